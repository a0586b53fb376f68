package dra

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestAnElasticGroupGrowsOnlyIntoFreeDevices: on a node of 8 CPUs and 3
// devices, an elastic group of 1 to 4 workers, a StatefulSet at 1 whose
// workers each claim a device and a CPU, is scaled to 3, where its devices
// run out, not to 4, where its CPUs would. A rigid gang of 2 of the same
// priority, each member claiming a device, then waits for its min:
// muster-controller scales the set down to 1 for the 2 devices, though
// there are CPUs to spare, and the gang is bound whole.
func TestAnElasticGroupGrowsOnlyIntoFreeDevices(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 1, "8", 3)
	framework.CreateDeviceClaimTemplate(t, ns)
	framework.CreateElasticSet(t, ns, "e", 1, 4, 1, nil, func(pod *corev1.Pod) { framework.ClaimOneDevice(pod) })
	sized := func(want int32) {
		t.Helper()
		framework.Eventually(t, fmt.Sprintf("the set at %d replicas, all bound", want), func(ctx context.Context) (bool, error) {
			set, err := framework.Client.AppsV1().StatefulSets(ns).Get(ctx, "e-worker", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if bound := boundNow(ctx, ns, "e"); *set.Spec.Replicas != want || bound != int(want) {
				return false, fmt.Errorf("set at %d replicas, %d bound", *set.Spec.Replicas, bound)
			}
			return true, nil
		})
	}
	sized(3)
	note := framework.WaitForEvent(t, ns, "e", podgroup.ReasonElasticGrown)
	if want := "replicas 1 → 3 into idle room"; !strings.Contains(note, want) {
		t.Errorf("%s says %q; want %q: the fourth worker's device is not there", podgroup.ReasonElasticGrown, note, want)
	}

	framework.CreatePodGroup(t, ns, "rigid", 2, nil)
	createClaimingGang(t, ns, "rigid", 2)
	waitForBound(t, ns, "rigid", 2)
	sized(1)
	note = framework.WaitForEvent(t, ns, "e", podgroup.ReasonElasticShrunk)
	if want := "replicas 3 → 1 for gang " + ns + "/rigid"; !strings.Contains(note, want) {
		t.Errorf("%s says %q; want %q", podgroup.ReasonElasticShrunk, note, want)
	}
}

// boundNow counts the group's active members bound.
func boundNow(ctx context.Context, namespace, group string) int {
	pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=" + group})
	if err != nil {
		return 0
	}
	n := 0
	for i := range pods.Items {
		if framework.IsBound(&pods.Items[i]) && topology.IsActiveMember(&pods.Items[i]) {
			n++
		}
	}
	return n
}
