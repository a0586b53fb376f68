package dra

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-dev/muster/test/integration/framework"
)

// TestARestartMidGangLeavesNoDeviceAllocated: 3 members of a gang of 4,
// each claiming a device, are placed and wait at Permit for the fourth,
// which a scheduling gate keeps out of the queue. muster-scheduler
// restarts. No claim is ever allocated while the gang is not bound: the
// waiting members' devices were the crashed scheduler's in memory only.
// Once the gate is removed, the gang is bound whole.
func TestARestartMidGangLeavesNoDeviceAllocated(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 2, "8", 2)
	framework.CreateDeviceClaimTemplate(t, ns)
	allocated := watchAllocations(t, ns)
	watch := watchBinds(t, ns)
	framework.CreatePodGroup(t, ns, "job", 4, nil)

	// The fourth comes last: until it exists, Gang keeps the other three
	// out of the queue too, and the scheduler's count of gated pods is 3.
	createClaimingGang(t, ns, "job", 3)
	gated := claimingMember(ns, "job", 3).Obj()
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "test.muster.dev/hold"}}
	framework.CreatePods(t, gated)
	waitForPermit(t, "before the restart")

	if err := framework.Cluster().Restart(context.Background(), "muster-scheduler"); err != nil {
		t.Fatalf("restarting muster-scheduler: %v", err)
	}
	waitForPermit(t, "after the restart")
	if n := watch.everBound(); n != 0 {
		t.Fatalf("%d members of the incomplete gang were bound", n)
	}
	if claims := allocated.claims(); len(claims) > 0 {
		t.Fatalf("claims of a gang not bound were allocated or reserved across the restart: %v", claims)
	}

	ungate(t, ns, gated.Name)
	waitForBound(t, ns, "job", 4)
}

// waitForPermit waits until muster-scheduler has one pod gated and none
// queued: the 3 members, not bound, are then out of the queue at Permit.
func waitForPermit(t *testing.T, when string) {
	t.Helper()
	var queued float64
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(context.Context) (bool, error) {
		metrics := framework.SchedulerMetrics(t)
		queued = 0
		for _, queue := range []string{"active", "backoff", "unschedulable", "pending", "incomplete"} {
			queued += metrics[fmt.Sprintf("scheduler_pending_pods{queue=%q}", queue)]
		}
		return queued == 0 && metrics[`scheduler_pending_pods{queue="gated"}`] == 1, nil
	})
	if err != nil {
		t.Fatalf("%s, the members never all left the queue (%v queued): %v", when, queued, err)
	}
}

// ungate removes the pod's scheduling gates.
func ungate(t *testing.T, namespace, name string) {
	t.Helper()
	pod, err := framework.Client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	pod.Spec.SchedulingGates = nil
	if _, err := framework.Client.CoreV1().Pods(namespace).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing the scheduling gate of %s: %v", name, err)
	}
}
