package group

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
)

// The queueing hints muster's plugins share, for events that free room.

// IsRoomFreed wakes a pod when a bound pod is deleted or finishes (the
// scheduler's informer sees a finished pod as deleted).
func IsRoomFreed(_ klog.Logger, _ *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*corev1.Pod](oldObj, nil)
	if err != nil {
		return fwk.Queue, err
	}
	if deleted.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// QueueAlways wakes a pod on every event of its kind, such as a node
// added.
func QueueAlways(klog.Logger, *corev1.Pod, any, any) (fwk.QueueingHint, error) {
	return fwk.Queue, nil
}

// IsAllocatableGrown wakes a pod when a node's allocatable grows in some
// resource.
func IsAllocatableGrown(_ klog.Logger, _ *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := util.As[*corev1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	for name, quantity := range newNode.Status.Allocatable {
		before, ok := oldNode.Status.Allocatable[name]
		if !ok || quantity.Cmp(before) > 0 {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}
