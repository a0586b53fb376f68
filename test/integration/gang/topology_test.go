package gang

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
		for name, rack := range framework.RacksOf(t, ns, names) {
			if rack != gang.rack {
				t.Errorf("gang %s: %s is in %q, want every member in %s", gang.name, name, rack, gang.rack)
			}
		}
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
	for name, rack := range framework.RacksOf(t, ns, names) {
		if rack != "rack-b" {
			t.Errorf("%s is in %q, want every member in rack-b", name, rack)
		}
	}
}
