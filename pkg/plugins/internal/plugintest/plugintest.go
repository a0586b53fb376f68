// Package plugintest holds what the plugins' unit tests share.
package plugintest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Activator stands in for the scheduling queue and records the pods a
// plugin asks it to retry, by namespace/name.
type Activator struct{ Activated []string }

// Activate records the pods.
func (a *Activator) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	for key := range pods {
		a.Activated = append(a.Activated, key)
	}
}

// Permit runs the framework's Permit plugins for the pod as the scheduler
// does: a pod asked to wait becomes a waiting pod.
func Permit(ctx context.Context, fw framework.Framework, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	waits, status := fw.RunPermitPlugins(ctx, state, pod, node)
	if status.IsWait() {
		fw.AddWaitingPod(pod, waits)
	}
	return status
}
