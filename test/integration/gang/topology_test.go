package gang

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// inOneRack is the PodGroup annotation that keeps a gang in one rack.
var inOneRack = map[string]string{topology.DomainRequiredAnnotation: framework.RackLabel}

// TestAGangThatMustStayInOneRackIsPlacedInTheTightestRackThatHoldsIt: a
// gang of 4 members of 2 CPUs, in a pool of rack-a (2 nodes of 4 CPUs)
// and rack-b (3 such nodes), goes whole to rack-a, which it fills,
// leaving rack-b whole; spread by the profile's scores, it would span
// both. A second gang of 6 then fills rack-b.
func TestAGangThatMustStayInOneRackIsPlacedInTheTightestRackThatHoldsIt(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2, "rack-b": 3}, "4")
	for _, gang := range []struct {
		name string
		size int
		rack string
	}{{"small", 4, "rack-a"}, {"large", 6, "rack-b"}} {
		framework.CreatePodGroup(t, ns, gang.name, int32(gang.size), inOneRack)
		var names []string
		for i := range gang.size {
			pod := framework.InPool(framework.MemberPod(ns, gang.name, i, "2").Obj(), ns)
			framework.CreatePods(t, pod)
			names = append(names, pod.Name)
		}
		for _, name := range names {
			framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
		}
		framework.CheckInRack(t, ns, names, gang.rack)
	}
}

// TestAGangLargerThanAnyRackWaitsWithNothingBoundAndSaysWhy: a gang of 7
// members of 2 CPUs fits the pool's 20 CPUs but neither rack; it binds
// nothing, and its members say which rack came closest. Once rack-b gets
// a node it is placed there, whole.
func TestAGangLargerThanAnyRackWaitsWithNothingBoundAndSaysWhy(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2, "rack-b": 3}, "4")
	framework.CreatePodGroup(t, ns, "big", 7, inOneRack)
	var names []string
	for i := range 7 {
		pod := framework.InPool(framework.MemberPod(ns, "big", i, "2").Obj(), ns)
		framework.CreatePods(t, pod)
		names = append(names, pod.Name)
	}
	want := "no " + framework.RackLabel + " domain has room for the 7 members group " + ns + "/big lacks; the closest, rack-b, has room for 6"
	framework.WaitForPod(t, ns, names[0], "told why it waits", func(pod *corev1.Pod) bool {
		c := framework.Condition(pod, corev1.PodScheduled)
		return c != nil && strings.Contains(c.Message, want)
	})
	if bound, err := framework.BoundActive(context.Background(), ns, topology.GroupLabel+"=big"); err != nil || len(bound) > 0 {
		t.Fatalf("members bound while no rack holds the gang: %v (%v)", bound, err)
	}

	framework.AddRackNode(t, ns, ns+"-5", "4", "rack-b")
	for _, name := range names {
		framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
	}
	framework.CheckInRack(t, ns, names, "rack-b")
}

// TestAGangThatMustStayInOneRackPreemptsInsideTheCheapestRack: rack-a's
// two nodes of 4 CPUs each run a low-priority pod of 4 CPUs, rack-b's one
// such pod beside a free node. A high-priority gang of two 4-CPU members
// in one rack takes rack-b's one pod, not a pod of rack-a (where, free to
// span racks, one victim beside rack-b's free node would do too), and is
// bound whole in rack-b; rack-a's pods keep running.
func TestAGangThatMustStayInOneRackPreemptsInsideTheCheapestRack(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2, "rack-b": 2}, "4")
	low, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 1000)
	// The pool's nodes are named in rack order: rack-a's first.
	for i, node := range []string{ns + "-0", ns + "-1", ns + "-2"} {
		pod := framework.InPool(framework.MemberPod(ns, "none", i, "4").Name(fmt.Sprintf("low-%d", i)).Obj(), ns)
		delete(pod.Labels, topology.GroupLabel)
		pod.Spec.PriorityClassName = low
		pod.Spec.NodeSelector[corev1.LabelHostname] = node
		framework.CreatePods(t, pod)
		framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
	}

	framework.CreatePodGroup(t, ns, "high", 2, inOneRack)
	var names []string
	for i := range 2 {
		pod := framework.InPool(framework.MemberPod(ns, "high", i, "4").Obj(), ns)
		pod.Spec.PriorityClassName = high
		framework.CreatePods(t, pod)
		names = append(names, pod.Name)
	}
	for _, name := range names {
		framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
	}
	framework.CheckInRack(t, ns, names, "rack-b")
	note := framework.WaitForEvent(t, ns, "high", gangpreemption.ReasonPreempting)
	if want := fmt.Sprintf("took %s/low-2 (priority below 1000) so that its 2 missing members fit at once", ns); note != want {
		t.Errorf("%s says %q; want %q", gangpreemption.ReasonPreempting, note, want)
	}
	if bound, err := framework.BoundActive(context.Background(), ns, topology.GroupLabel+"!=high"); err != nil || len(bound) != 2 {
		t.Errorf("the pods of rack-a left running are %v (%v); want low-0 and low-1", bound, err)
	}
}

// TestAGangThatPrefersOneRackSharesOneWhenOneHoldsItElseSpansTheFewest:
// with muster.dev/topology-preferred alone, a gang of four 2-CPU members,
// in a pool of rack-a (2 nodes of 4 CPUs), rack-b (3 such nodes) and
// rack-c (1), goes to rack-a, the tightest rack that holds it. Once it is
// gone, a gang of seven, which no one rack holds, is bound across rack-b
// and rack-a, the fewest racks that hold it, and never rack-c: a
// preference, not a requirement, kept as far as it can be.
func TestAGangThatPrefersOneRackSharesOneWhenOneHoldsItElseSpansTheFewest(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2, "rack-b": 3, "rack-c": 1}, "4")
	prefersOneRack := map[string]string{topology.DomainPreferredAnnotation: framework.RackLabel}
	create := func(group string, size int) []string {
		framework.CreatePodGroup(t, ns, group, int32(size), prefersOneRack)
		var names []string
		for i := range size {
			pod := framework.InPool(framework.MemberPod(ns, group, i, "2").Obj(), ns)
			framework.CreatePods(t, pod)
			names = append(names, pod.Name)
		}
		return names
	}
	small := create("small", 4)
	for _, name := range small {
		framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
	}
	framework.CheckInRack(t, ns, small, "rack-a")
	if err := framework.Client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: topology.GroupLabel + "=small"}); err != nil {
		t.Fatal(err)
	}
	large := create("large", 7)
	for _, name := range large {
		framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
	}
	racks := map[string]bool{}
	for _, rack := range framework.RacksOf(t, ns, large) {
		racks[rack] = true
	}
	if want := map[string]bool{"rack-a": true, "rack-b": true}; !maps.Equal(racks, want) {
		t.Errorf("the gang of seven is in racks %v; want rack-b and rack-a, the fewest that hold it", racks)
	}
}

// TestAnElasticGroupInOneRackGrowsOnlyIntoItsRack: an elastic group of 1
// to 4 one-CPU workers that must stay in one rack, a StatefulSet at 1, is
// placed in rack-a (one node of 2 CPUs), the tightest rack. Of the idle
// room, rack-a's one CPU and rack-b's four, muster-controller scales it
// into rack-a's alone: 1 → 2, both workers in rack-a.
func TestAnElasticGroupInOneRackGrowsOnlyIntoItsRack(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-controller")
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 1, "rack-b": 1}, "2")
	framework.AddRackNode(t, ns, ns+"-2", "2", "rack-b")
	framework.CreateElasticSet(t, ns, "e", 1, 4, 1, inOneRack)
	grown := framework.WaitForEvent(t, ns, "e", podgroup.ReasonElasticGrown)
	if want := fmt.Sprintf("scaled StatefulSet %s/e-worker worker replicas 1 → 2 into idle room; fulfillment 0.00 → 0.33", ns); grown != want {
		t.Errorf("%s says %q; want %q", podgroup.ReasonElasticGrown, grown, want)
	}
	names := []string{"e-worker-0", "e-worker-1"}
	for _, name := range names {
		framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
	}
	framework.CheckInRack(t, ns, names, "rack-a")
}
