package heldrooms

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/topology"
)

var _ fwk.SignPlugin = &HeldRooms{}

// PlacementSignerName names HeldRooms' fragment of a pod's signature.
// 1.37's opportunistic batching hands a pod the next node of the previous
// pod's result when their signatures match, so two pods may share a
// signature only when HeldRooms' PreFilter and Filter cannot tell them
// apart.
const PlacementSignerName = "muster.dev/HeldRooms.Placement()"

// SignPod signs a pod by what HeldRooms' Filter tells pods apart by.
//
//   - A member of a late role is not signed: PreFilter pins it to the room
//     held for it, and a node hint skips PreFilter's result.
//   - A member of an elastic group is signed by its group: whether the
//     group's members are above its min, and so kept off room a waiting
//     gang could use, is the group's state.
//   - Any other pod, of no group or a member of a rigid gang, is signed as
//     a pod of no group: a room held for late members is closed to it as
//     to every pod but its own late member, and no hold applies to it.
//   - A member whose group cannot be read yet (its PodGroup is still to
//     come, or awaits its operator's topology) is signed by its group and
//     role, what held rooms are kept by.
//
// The signature is taken when the pod is queued, not in each cycle, so it
// holds what a pod's group is, not the state that changes while it waits.
func (h *HeldRooms) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	key, ok := topology.GroupOf(pod)
	if !ok {
		return placement(""), nil
	}
	role, _ := topology.RoleOf(pod)
	topo, err := h.groups.Topology(key)
	switch {
	case err != nil || topo == nil:
		return placement(key.String() + "/" + role), nil
	case topo.IsLate(role):
		return nil, fwk.NewStatus(fwk.Unschedulable, "a late member is placed into the room held for it, not by a batch")
	case topo.Elastic != nil:
		return placement(key.String()), nil
	}
	return placement(""), nil
}

func placement(value string) []fwk.SignFragment {
	return []fwk.SignFragment{{Key: PlacementSignerName, Value: value}}
}
