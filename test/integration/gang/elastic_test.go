package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	framework.Eventually(t, "the rigid gang bound whole", func(context.Context) ([]string, error) {
		if bound := boundPods(t, ns, "rigid"); len(bound) != 2 {
			return nil, fmt.Errorf("bound %v", bound)
		}
		return nil, nil
	})
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
	filler := framework.InPool(framework.MemberPod(ns, "plain", 0, "2").Obj(), ns)
	delete(filler.Labels, topology.GroupLabel)
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

	// The workers waiting for room are past their scheduler backoff (10 s
	// at most), so the room that frees is offered to all of them at once,
	// in the queue's order.
	time.Sleep(11 * time.Second)
	if err := framework.Client.CoreV1().Pods(ns).Delete(context.Background(), filler.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bound(map[string]int{"a": 3, "b": 3})
}
