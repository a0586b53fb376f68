package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// The tests of this file each reproduce a failure found by using muster as
// a careless user would, and show it fixed.

const rejectedAttempts = `muster_gang_attempts_total{result="rejected"}`

// TestARaisedQuorumEvictsNothingRunning: a gang of two runs; its
// minMember is raised to 3 and a third member that fits nowhere is added.
// The gang had its quorum, so it is not partly bound: the new member's
// attempts fail, again and again, past the gang's schedule timeout of 1s,
// and the two running members are never evicted. They are the same pods
// once the third member is bound into a node added for it.
func TestARaisedQuorumEvictsNothingRunning(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	framework.CreatePodGroup(t, ns, "train", 2, nil)
	createGang(t, ns, "train", 2, "1", "")
	running := map[string]types.UID{}
	for i := range 2 {
		pod := framework.WaitForPod(t, ns, fmt.Sprintf("train-%d", i), "running", framework.IsRunning)
		running[pod.Name] = pod.UID
	}

	rejectedBefore := framework.SchedulerMetrics(t)[rejectedAttempts]
	raise := []byte(`{"spec":{"minMember":3,"scheduleTimeoutSeconds":1}}`)
	if _, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Patch(context.Background(), "train", types.MergePatchType, raise, metav1.PatchOptions{}); err != nil {
		t.Fatalf("raising minMember: %v", err)
	}
	framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "train", 2, "1").Obj(), ns))
	// The first failed attempt ends past the timeout of the last bind, so a
	// gang taken as partly bound would be evicted then; by the second, its
	// eviction would have been sent.
	evicted := framework.Eventually(t, "two failed attempts of the raised gang, or its eviction", func(context.Context) ([]string, error) {
		if notes := eventNotes(t, ns, "train", "GangEvicted"); len(notes) > 0 {
			return notes, nil
		}
		if n := framework.SchedulerMetrics(t)[rejectedAttempts]; n < rejectedBefore+2 {
			return nil, fmt.Errorf("%s is %v, was %v", rejectedAttempts, n, rejectedBefore)
		}
		return nil, nil
	})
	if len(evicted) > 0 {
		t.Fatalf("the running gang was evicted: %v", evicted)
	}

	framework.AddPoolNode(t, ns, ns+"-extra", "1")
	framework.WaitForPod(t, ns, "train-2", "bound", framework.IsBound)
	for name, uid := range running {
		pod := framework.WaitForPod(t, ns, name, "running", framework.IsRunning)
		if pod.UID != uid {
			t.Errorf("pod %s was evicted and made again (UID %s, was %s)", name, pod.UID, uid)
		}
	}
}

// TestAPreemptionLeavesNoPromiseOnceItsGangIsGone: four full nodes; a
// high-priority gang on one host port takes one victim per node, runs,
// and is deleted. The room its preemption made is promised to it no
// longer: a second high-priority gang, whose three members repel each
// other by hostname, takes victims on those nodes at its first attempt,
// and is bound whole.
func TestAPreemptionLeavesNoPromiseOnceItsGangIsGone(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 4, "4")
	low, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 1000)
	fillWithLowPods(t, ns, 16, low)

	createPortedGang(t, ns, high)
	deletePods(t, ns, topology.GroupLabel+"=ported")

	framework.CreatePodGroup(t, ns, "apart", 3, nil)
	for i := range 3 {
		pod := framework.InPool(framework.MemberPod(ns, "apart", i, "2").Obj(), ns)
		pod.Spec.PriorityClassName = high
		pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{topology.GroupLabel: "apart"}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
		framework.CreatePods(t, pod)
	}
	waitForBound(t, ns, "apart", 3)
	checkVictimsTakenAtFirst(t, ns, "apart")
}

// TestAnElasticVictimIsShrunkRightAfterAnotherPreemption: the elastic
// case of gang preemption, in sequence. On one node of 4 CPUs, a
// high-priority gang takes two low-priority pods, runs, and is deleted;
// an elastic group of 1 to 4 then fills the node, and a second
// high-priority gang takes its workers 3 and 2 at its first attempt,
// though the first gang's victims were on that node.
func TestAnElasticVictimIsShrunkRightAfterAnotherPreemption(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	low, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 1000)
	fillWithLowPods(t, ns, 4, low)
	createPriorityGang(t, ns, "first", 2, "1", high)
	waitForBound(t, ns, "first", 2)
	deletePods(t, ns, "")

	createElastic(t, ns, "e", 4)
	waitForBound(t, ns, "e", 4)
	createPriorityGang(t, ns, "second", 2, "1", high)
	waitForBound(t, ns, "second", 2)
	if bound := boundPods(t, ns, "e"); strings.Join(bound, ",") != "e-0,e-1" {
		t.Errorf("the elastic group has %v bound; want workers 0 and 1, its highest indices taken", bound)
	}
	checkVictimsTakenAtFirst(t, ns, "second")
}

// TestAMemberBuiltForADeletedPodGroupIsNotTakenIntoItsSuccessor: two MPI
// workers wait for their launcher; their PodGroup is deleted and made
// again with another topology (TensorFlow, a parameter server and three
// workers). The old workers carry the old group's
// environment and mounts, so they are not members of the new one: they
// say why, the new group's quorum counts only its own members, and
// they are never bound.
func TestAMemberBuiltForADeletedPodGroupIsNotTakenIntoItsSuccessor(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "8")
	framework.CreatePodGroup(t, ns, "spd", 3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	framework.CreatePods(t, framework.InPool(rolePod(ns, "spd", "worker", 0, "1"), ns), framework.InPool(rolePod(ns, "spd", "worker", 1, "1"), ns))
	waitForCondition(t, ns, "spd-worker-0", topology.WaitingForMembersMessage(types.NamespacedName{Namespace: ns, Name: "spd"}, 2, 3))
	if err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Delete(context.Background(), "spd", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "PodGroup spd gone", func(ctx context.Context) (bool, error) {
		_, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "spd", metav1.GetOptions{})
		if err == nil {
			return false, fmt.Errorf("still there")
		}
		return true, nil
	})
	again := framework.CreatePodGroup(t, ns, "spd", 3, map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=1,worker=3"})
	ps := framework.InPool(rolePod(ns, "spd", "ps", 0, "1"), ns)
	framework.CreatePods(t, ps)

	old := framework.WaitForPod(t, ns, "spd-worker-0", "told it is not a member", func(pod *corev1.Pod) bool {
		c := framework.Condition(pod, corev1.PodScheduled)
		return c != nil && strings.Contains(c.Message, "was built for an earlier PodGroup")
	})
	if c := framework.Condition(old, corev1.PodScheduled); !strings.Contains(c.Message, string(again.UID)) {
		t.Errorf("the old worker's condition %q does not name the new PodGroup's UID %s", c.Message, again.UID)
	}
	waitForCondition(t, ns, ps.Name, topology.WaitingForMembersMessage(types.NamespacedName{Namespace: ns, Name: "spd"}, 1, 3))

	// Workers of the new topology take the old ones' indexes.
	for i := range 3 {
		worker := framework.InPool(rolePod(ns, "spd", "worker", i, "1"), ns)
		worker.Name = fmt.Sprintf("spd-tf-worker-%d", i)
		framework.CreatePods(t, worker)
	}
	for _, name := range []string{ps.Name, "spd-tf-worker-0", "spd-tf-worker-1", "spd-tf-worker-2"} {
		pod := framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
		if !slices.ContainsFunc(pod.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "TF_CONFIG" }) {
			t.Errorf("member %s of the new group has no TF_CONFIG", name)
		}
	}
	for _, name := range []string{"spd-worker-0", "spd-worker-1"} {
		if pod := framework.WaitForPod(t, ns, name, "present", func(*corev1.Pod) bool { return true }); framework.IsBound(pod) {
			t.Errorf("worker %s, built for the deleted MPI group, was bound into the TensorFlow group", name)
		}
	}
}

// deletePods deletes the namespace's pods the label selector selects, at
// once, and waits until they are gone.
func deletePods(t *testing.T, namespace, selector string) {
	t.Helper()
	pods := framework.Client.CoreV1().Pods(namespace)
	if err := pods.DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		t.Fatalf("deleting pods %q: %v", selector, err)
	}
	framework.Eventually(t, "pods "+selector+" gone", func(ctx context.Context) (int, error) {
		left, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(left.Items) > 0 {
			return 0, fmt.Errorf("%d pods left (%v)", len(left.Items), err)
		}
		return 0, nil
	})
}

// checkVictimsTakenAtFirst checks that the gang's first attempt took
// victims, rather than finding the room kept for a gang that is gone.
func checkVictimsTakenAtFirst(t *testing.T, namespace, group string) {
	t.Helper()
	if first := firstEvent(t, namespace, group, "GangRejected"); !strings.Contains(first, "fits once the victims preempted for the gang are gone") {
		t.Errorf("gang %s's first attempt ended with %q; want victims taken at once, not the room kept for a gang that is gone", group, first)
	}
}

// firstEvent returns the note of the earliest event of the reason about
// the named object.
func firstEvent(t *testing.T, namespace, regarding, reason string) string {
	t.Helper()
	events := framework.Eventually(t, reason+" about "+regarding, func(ctx context.Context) ([]eventsv1.Event, error) {
		list, err := framework.Client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", reason).String()})
		if err != nil {
			return nil, err
		}
		mine := slices.DeleteFunc(list.Items, func(e eventsv1.Event) bool { return e.Regarding.Name != regarding })
		if len(mine) == 0 {
			return nil, fmt.Errorf("no %s event about %s", reason, regarding)
		}
		return mine, nil
	})
	first := slices.MinFunc(events, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	return first.Note
}
