package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// createElastic creates an elastic group of 1 to max workers of one CPU,
// and its max workers, on the test's node pool.
func createElastic(t *testing.T, namespace, group string, max int) {
	t.Helper()
	framework.CreatePodGroup(t, namespace, group, 1, map[string]string{
		topology.RolesAnnotation:   fmt.Sprintf("worker=%d", max),
		topology.ElasticAnnotation: fmt.Sprintf("1:%d", max),
	})
	for i := range max {
		pod := framework.MemberPod(namespace, group, i, "1").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, fmt.Sprint(i))
		framework.CreatePods(t, framework.InPool(pod.Obj(), namespace))
	}
}

// boundPods lists the names of the group's bound, active pods.
func boundPods(t *testing.T, namespace, group string) []string {
	t.Helper()
	pods, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: topology.GroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pod := range pods.Items {
		if framework.IsBound(&pod) && topology.IsActiveMember(&pod) {
			names = append(names, pod.Name)
		}
	}
	return names
}

// TestRigidGangTakesRoomBackFromTheMostFulfilledElasticGroups: two elastic
// groups of 1 to 3 workers fill a node of 6 CPUs; a rigid gang of two then
// waits for its min. muster-controller evicts one worker from each, the
// highest index of the most fulfilled group first (both at 1.00, then the
// other one), none below its min, and the gang is admitted whole.
func TestRigidGangTakesRoomBackFromTheMostFulfilledElasticGroups(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "6")
	createElastic(t, ns, "a", 3)
	createElastic(t, ns, "b", 3)
	for _, group := range []string{"a", "b"} {
		framework.Eventually(t, "group "+group+" grown to 3", func(context.Context) ([]string, error) {
			if bound := boundPods(t, ns, group); len(bound) != 3 {
				return nil, fmt.Errorf("bound %v", bound)
			}
			return nil, nil
		})
	}

	framework.CreatePodGroup(t, ns, "rigid", 2, nil)
	createGang(t, ns, "rigid", 2, "1", "")
	waitForBound(t, ns, "rigid", 2)
	for _, group := range []string{"a", "b"} {
		if bound := boundPods(t, ns, group); len(bound) != 2 || strings.Join(bound, ",") != group+"-0,"+group+"-1" {
			t.Errorf("group %s has %v bound; want its workers 0 and 1, its highest index given back", group, bound)
		}
		note := framework.WaitForEvent(t, ns, group, podgroup.ReasonElasticShrunk)
		if !strings.Contains(note, "evicted worker 2 (pod "+group+"-2) for gang "+ns+"/rigid") || !strings.Contains(note, "fulfillment 1.00 → 0.50") {
			t.Errorf("%s says %q", podgroup.ReasonElasticShrunk, note)
		}
	}
	pod, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), "a-2", metav1.GetOptions{})
	if err == nil && pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodFailed {
		t.Errorf("pod a-2 was not evicted: %s", pod.Status.Phase)
	}
}

// TestIdleRoomGoesToTheLeastFulfilledElasticGroup: on a node of 6 CPUs
// that a pod of 2 CPUs shares, elastic group a of 1 to 5 workers grows to
// 4; group b of 1 to 5 then takes a worker back from a for its min, which
// leaves a at 3 (0.50) and b at 1 (0.00), each with workers waiting. When
// the other pod goes, both of its CPUs go to b, the less fulfilled (0.00,
// then 0.25, both below 0.50): a 3, b 3. In order of arrival or of
// failure, a would get one of them.
func TestIdleRoomGoesToTheLeastFulfilledElasticGroup(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "6")
	filler := plainPod(ns, "plain-0", "2")
	framework.CreatePods(t, filler)
	framework.WaitForPod(t, ns, filler.Name, "bound", framework.IsBound)
	bound := func(want map[string]int) {
		t.Helper()
		framework.Eventually(t, fmt.Sprintf("bound workers %v", want), func(context.Context) (bool, error) {
			got := map[string]int{"a": len(boundPods(t, ns, "a")), "b": len(boundPods(t, ns, "b"))}
			if got["a"] != want["a"] || got["b"] != want["b"] {
				return false, fmt.Errorf("bound %v", got)
			}
			return true, nil
		})
	}
	createElastic(t, ns, "a", 5)
	bound(map[string]int{"a": 4})
	createElastic(t, ns, "b", 5)
	bound(map[string]int{"a": 3, "b": 1})

	// The workers waiting for room are past their scheduler backoff (a
	// second at most here, TestMain), so the room that frees is offered to
	// all of them at once, in the queue's order.
	time.Sleep(3 * time.Second)
	if err := framework.Client.CoreV1().Pods(ns).Delete(context.Background(), filler.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bound(map[string]int{"a": 3, "b": 3})
}

// eventNotes lists the notes of the events with the reason about the
// named object.
func eventNotes(t *testing.T, namespace, regarding, reason string) []string {
	t.Helper()
	events, err := framework.Client.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", reason).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range events.Items {
		if e.Regarding.Name == regarding {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// TestElasticStatefulSetsGrowAndShrinkThroughTheirScale: two elastic
// groups of 1 to 4 workers, each a StatefulSet at 1, share a node of 6
// CPUs with a pod of 4. When that pod goes, muster-controller scales both
// sets up into the idle room, the least fulfilled first (1, 1 → 3, 3).
// When a rigid gang of two then waits for its min, it scales each set
// down by one, the most fulfilled first, and the gang is admitted whole.
// The StatefulSet controller removes the highest ordinal.
func TestElasticStatefulSetsGrowAndShrinkThroughTheirScale(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "6")
	filler := plainPod(ns, "plain-0", "4")
	framework.CreatePods(t, filler)
	framework.WaitForPod(t, ns, filler.Name, "bound", framework.IsBound)
	framework.CreateElasticSet(t, ns, "a", 1, 4, 1, nil)
	framework.CreateElasticSet(t, ns, "b", 1, 4, 1, nil)
	sized := func(want int32) {
		t.Helper()
		framework.Eventually(t, fmt.Sprintf("both sets at %d replicas, all bound", want), func(ctx context.Context) (bool, error) {
			for _, group := range []string{"a", "b"} {
				set, err := framework.Client.AppsV1().StatefulSets(ns).Get(ctx, group+"-worker", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if bound := boundPods(t, ns, group); *set.Spec.Replicas != want || len(bound) != int(want) {
					return false, fmt.Errorf("set %s at %d replicas, bound %v", set.Name, *set.Spec.Replicas, bound)
				}
			}
			return true, nil
		})
	}
	sized(1)
	if err := framework.Client.CoreV1().Pods(ns).Delete(context.Background(), filler.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sized(3)
	for _, group := range []string{"a", "b"} {
		want := fmt.Sprintf("scaled StatefulSet %s/%s-worker worker replicas 1 → 3 into idle room; fulfillment 0.00 → 0.67", ns, group)
		if notes := eventNotes(t, ns, group, podgroup.ReasonElasticGrown); len(notes) != 1 || notes[0] != want {
			t.Errorf("group %s's %s events are %q; want one, %q", group, podgroup.ReasonElasticGrown, notes, want)
		}
		// Each worker's environment names the workers there were as it
		// was created: worker 0 alone, and 1 and 2 the three the set was
		// scaled to.
		for index, want := range []int{1, 3, 3} {
			name := fmt.Sprintf("%s-worker-%d", group, index)
			pod, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var hosts []string
			for i := range want {
				hosts = append(hosts, fmt.Sprintf("%s-worker-%d.%s.%s.svc", group, i, group, ns))
			}
			env := map[string]string{}
			for _, e := range pod.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if env["MUSTER_WORKER_NUM"] != fmt.Sprint(want) || env["MUSTER_WORKER_HOSTS"] != strings.Join(hosts, ",") {
				t.Errorf("pod %s has MUSTER_WORKER_NUM=%s MUSTER_WORKER_HOSTS=%s; want the %d workers there were as it was created", name, env["MUSTER_WORKER_NUM"], env["MUSTER_WORKER_HOSTS"], want)
			}
		}
	}

	framework.CreatePodGroup(t, ns, "rigid", 2, nil)
	createGang(t, ns, "rigid", 2, "1", "")
	waitForBound(t, ns, "rigid", 2)
	sized(2)
	for group, before := range map[string]string{"a": "0.67 → 0.33", "b": "0.67 → 0.33"} {
		if bound := boundPods(t, ns, group); strings.Join(bound, ",") != group+"-worker-0,"+group+"-worker-1" {
			t.Errorf("group %s has %v bound; want its workers 0 and 1", group, bound)
		}
		note := framework.WaitForEvent(t, ns, group, podgroup.ReasonElasticShrunk)
		want := fmt.Sprintf("scaled StatefulSet %s/%s-worker worker replicas 3 → 2 for gang %s/rigid (priority 0), which waits for its min; fulfillment %s", ns, group, ns, before)
		if note != want {
			t.Errorf("%s says %q; want %q", podgroup.ReasonElasticShrunk, note, want)
		}
	}
}
