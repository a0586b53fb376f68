package jobset

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// devicePodTemplate is podTemplate whose container claims one device
// through framework.DeviceClaimTemplate.
var devicePodTemplate = strings.Replace(podTemplate, `
            containers:
            - {name: main, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}`, `
            resourceClaims: [{name: gpu, resourceClaimTemplateName: `+framework.DeviceClaimTemplate+`}]
            containers:
            - {name: main, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}, claims: [{name: gpu}]}}`, 1)

// A JobSet whose two workers and its launcher, which JobSet creates only
// once they are Ready, each claim a device.
var deviceJobSet = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: gpus
spec:
  replicatedJobs:
  - name: workers
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:` + devicePodTemplate + `
  - name: launcher
    dependsOn: [{name: workers, status: Ready}]
    template:
      spec:
        template:` + devicePodTemplate + `
`

// TestADependsOnLaunchersDeviceIsHeld: on a node of 3 devices, a JobSet's
// two workers and its late launcher each claim one. The PodGroup muster
// makes carries the launcher's device, read from its template; a pod of no
// group claiming a device once the workers are bound waits, and the
// launcher is bound with a device of its node.
func TestADependsOnLaunchersDeviceIsHeld(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 1, "8", 3)
	framework.CreateDeviceClaimTemplate(t, ns)
	createJobSet(t, ns, deviceJobSet, "5s")
	checkGrouped(t, ns, "gpus", "PodGroup gpus: minMember 3, roles workers=2,launcher=1, launch order workers>launcher")
	pg, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "gpus", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"devices":[{"deviceClassName":"` + localcluster.DeviceClassName + `","count":1}]`; !strings.Contains(pg.Annotations[topology.LateMembersAnnotation], want) {
		t.Errorf("the PodGroup's late members are %s; want the launcher's device, %s", pg.Annotations[topology.LateMembersAnnotation], want)
	}
	for _, pod := range jobSetPods(t, ns, 2) {
		framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
	}
	user := framework.ClaimOneDevice(framework.InPool(st.MakePod().Namespace(ns).Name("user").SchedulerName(localcluster.SchedulerName).
		Container("user").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj(), ns))
	framework.CreatePods(t, user)
	framework.Eventually(t, "the pod of no group unschedulable", func(ctx context.Context) (bool, error) {
		pod, err := framework.Client.CoreV1().Pods(ns).Get(ctx, "user", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if c := framework.Condition(pod, corev1.PodScheduled); framework.IsBound(pod) || c == nil || c.Reason != corev1.PodReasonUnschedulable {
			return false, fmt.Errorf("bound to %q, conditions %v", pod.Spec.NodeName, pod.Status.Conditions)
		}
		return true, nil
	})
	launcher := framework.Eventually(t, "the launcher bound with its device", func(ctx context.Context) (*corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: topology.JobSetReplicatedJobLabel + "=launcher"})
		if err != nil || len(pods.Items) != 1 || !framework.IsBound(&pods.Items[0]) {
			return nil, fmt.Errorf("launcher not bound: %v", err)
		}
		return &pods.Items[0], nil
	})
	if pod, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), "user", metav1.GetOptions{}); err != nil || framework.IsBound(pod) {
		t.Errorf("the pod of no group was bound, or is gone (%v): it took the launcher's device", err)
	}
	t.Logf("launcher %s bound to %s", launcher.Name, launcher.Spec.NodeName)
}
