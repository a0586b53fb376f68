package dra

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestLateLaunchersDeviceStaysHeld is the case: an MPI group
// (launcher=1, worker=2) whose workers and late launcher each claim one
// device, on 4 nodes of 2 devices. Once the workers are bound, a device is
// held with the launcher's room. Six pods of no group, each claiming a
// device, then find 5 free: one waits. The launcher, created last, is
// bound into its room with a device of its node, and the workers are
// never evicted.
func TestLateLaunchersDeviceStaysHeld(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 4, "8", 2)
	framework.CreateDeviceClaimTemplate(t, ns)
	launcher := claimingRolePod(ns, "mpi", "launcher", 0)
	late, err := json.Marshal(map[string]topology.LateMember{"launcher": {
		Requests:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		NodeSelector: launcher.Spec.NodeSelector,
		Tolerations:  launcher.Spec.Tolerations,
		Devices:      []topology.LateDevices{{DeviceClassName: localcluster.DeviceClassName, Count: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	framework.CreatePodGroup(t, ns, "mpi", 3, map[string]string{
		topology.FrameworkAnnotation:   "mpi",
		topology.RolesAnnotation:       "launcher=1,worker=2",
		topology.LateMembersAnnotation: string(late),
	})
	watch := watchBinds(t, ns)
	for i := range 2 {
		framework.CreatePods(t, claimingRolePod(ns, "mpi", "worker", i))
	}
	waitForBound(t, ns, "mpi", 2)

	for i := range 6 {
		pod := claimingMember(ns, "none", i).Obj()
		pod.Name = fmt.Sprintf("user-%d", i)
		delete(pod.Labels, topology.GroupLabel)
		framework.CreatePods(t, pod)
	}
	waiting := waitForUsers(t, ns, 5)
	t.Logf("the sixth pod of no group waits: %s", waiting)

	framework.CreatePods(t, launcher)
	bound := framework.WaitForPod(t, ns, launcher.Name, "bound into its held room", framework.IsBound)
	result := allocatedClaimOf(t, *bound).Status.Allocation.Devices.Results
	if len(result) != 1 || result[0].Pool != bound.Spec.NodeName {
		t.Errorf("the launcher is bound to %s with devices %v; want one device of its node", bound.Spec.NodeName, result)
	}
	if n := watch.boundOf("mpi"); n != 3 {
		t.Errorf("the group had %d members bound; want its 2 workers and its launcher", n)
	}
	for i := range 2 {
		worker := framework.WaitForPod(t, ns, fmt.Sprintf("mpi-worker-%d", i), "still bound", framework.IsBound)
		if worker.DeletionTimestamp != nil {
			t.Errorf("worker %s is being evicted", worker.Name)
		}
	}
}

// waitForUsers waits until bound of the pods of no group ("user-") are
// bound and every other one is found unschedulable, and returns what the
// first unschedulable one says.
func waitForUsers(t *testing.T, namespace string, bound int) string {
	t.Helper()
	var got, unschedulable int
	var note string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got, unschedulable, note = 0, 0, ""
		users := 0
		for _, pod := range pods.Items {
			if !strings.HasPrefix(pod.Name, "user-") {
				continue
			}
			users++
			if framework.IsBound(&pod) {
				got++
			} else if c := framework.Condition(&pod, corev1.PodScheduled); c != nil && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable++
				note = pod.Name + ": " + c.Message
			}
		}
		return got == bound && unschedulable == users-bound, nil
	})
	if err != nil {
		t.Fatalf("%d pods of no group are bound and %d unschedulable; want %d bound and the rest unschedulable: %v", got, unschedulable, bound, err)
	}
	return note
}

// claimingRolePod is member index of role in group, on the test's pool,
// claiming one device through the template.
func claimingRolePod(namespace, group, role string, index int) *corev1.Pod {
	pod := claimingMember(namespace, group, index).Obj()
	pod.Name = fmt.Sprintf("%s-%s-%d", group, role, index)
	pod.Labels[topology.RoleLabel] = role
	pod.Labels[topology.IndexLabel] = strconv.Itoa(index)
	return pod
}
