package dra

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestAPodTakesTheDevicesOfOneLowerPriorityPod: every device of 2 nodes is
// held by a low-priority pod of no group, one claim each. A high-priority
// pod claiming one device takes exactly one of them, and is bound on the
// device it freed.
func TestAPodTakesTheDevicesOfOneLowerPriorityPod(t *testing.T) {
	ns, high := devicesHeldByLowPriority(t, 2)

	framework.CreatePods(t, claimingPod(ns, "high", high))
	pod := framework.WaitForPod(t, ns, "high", "bound", framework.IsBound)
	claim := allocatedClaimOf(t, *pod)
	if result := claim.Status.Allocation.Devices.Results; len(result) != 1 || result[0].Pool != pod.Spec.NodeName {
		t.Errorf("high is bound to %s with devices %v", pod.Spec.NodeName, result)
	}
	if left := activeLow(t, ns, "low-"); left != 3 {
		t.Errorf("%d of the 4 low-priority pods are left, want 3: one device was needed", left)
	}
}

// devicesHeldByLowPriority gives the test nodes of 2 devices each, every
// device held by a low-priority pod of no group (low-0, low-1, …), one
// claim each, and returns the namespace and a high priority class.
func devicesHeldByLowPriority(t *testing.T, nodes int) (namespace, high string) {
	t.Helper()
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, nodes, "8", 2)
	framework.CreateDeviceClaimTemplate(t, ns)
	low := framework.PriorityClass(t, ns, 10)
	for i := range 2 * nodes {
		framework.CreatePods(t, claimingPod(ns, fmt.Sprintf("low-%d", i), low))
	}
	for i := range 2 * nodes {
		framework.WaitForPod(t, ns, fmt.Sprintf("low-%d", i), "bound", framework.IsBound)
	}
	return ns, framework.PriorityClass(t, ns, 1000)
}

// claimingPod is a pod of no group on the test's pool, of the priority
// class, claiming one device through the template.
func claimingPod(namespace, name, priorityClass string) *corev1.Pod {
	pod := claimingMember(namespace, "none", 0).Obj()
	pod.Name = name
	delete(pod.Labels, topology.GroupLabel)
	pod.Spec.PriorityClassName = priorityClass
	return pod
}

// activeLow counts the pods named with the prefix, once none of the
// namespace's pods is being deleted.
func activeLow(t *testing.T, namespace, prefix string) int {
	t.Helper()
	var active int
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		active = 0
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp != nil {
				return false, nil
			}
			if strings.HasPrefix(pod.Name, prefix) {
				active++
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods of %s were still being deleted: %v", namespace, err)
	}
	return active
}

// TestAGangTakesExactlyTheDevicesItNeeds: every device of 4 nodes of 2 is
// held by a low-priority pod of no group, one claim each. A high-priority
// gang of 4, each member claiming one device, takes exactly 4 of them and
// is bound whole, each member on a device its victims freed.
func TestAGangTakesExactlyTheDevicesItNeeds(t *testing.T) {
	ns, high := devicesHeldByLowPriority(t, 4)

	framework.CreatePodGroup(t, ns, "job", 4, nil)
	for i := range 4 {
		member := claimingMember(ns, "job", i).Obj()
		member.Spec.PriorityClassName = high
		framework.CreatePods(t, member)
	}
	pods := waitForBound(t, ns, "job", 4)
	for _, pod := range pods {
		claim := allocatedClaimOf(t, pod)
		if result := claim.Status.Allocation.Devices.Results; len(result) != 1 || result[0].Pool != pod.Spec.NodeName {
			t.Errorf("%s is bound to %s with devices %v", pod.Name, pod.Spec.NodeName, result)
		}
	}
	if left := activeLow(t, ns, "low-"); left != 4 {
		t.Errorf("%d of the 8 low-priority pods are left, want 4: the gang needed 4 devices", left)
	}
}
