package heldrooms

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/topology"
)

// EventsToRegister lists the events that can give a pod kept out of held
// room a node: room freed or added, or a waiting gang's member bound,
// which may end its wait. A gang's rooms released with its PodGroup or
// past their timeout wake the pods kept out of them (turnedAway).
func (h *HeldRooms) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: group.IsRoomFreed},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: isMemberBound},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, QueueingHintFn: group.QueueAlways},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeAllocatable}, QueueingHintFn: group.IsAllocatableGrown},
	}, nil
}

// isMemberBound wakes a pod when a member of a group is bound: a gang it
// left room to may no longer wait.
func isMemberBound(_ klog.Logger, _ *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	_, added, err := util.As[*corev1.Pod](nil, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if _, grouped := topology.GroupOf(added); grouped && added.Spec.NodeName != "" {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
