package gang

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/topology"
)

var _ fwk.SignPlugin = &Gang{}

// PlacementSignerName names Gang's fragment of a pod's signature. 1.37's
// opportunistic batching hands a pod the next node of the previous pod's
// result when their signatures match, so two pods may share a signature
// only when Gang's PreFilter and Filter cannot tell them apart.
const PlacementSignerName = "muster.dev/Gang.GroupAndRole()"

// SignPod signs a pod by its group and role. Gang's Filter tells pods apart
// by nothing else: a room held for late members is open to the pods of its
// own group and role only, and an elastic hold applies to a whole group's
// members above its min. Pods of no group share one fragment.
//
// A member of a late role is not signed: PreFilter pins it to the room held
// for it, and a node hint skips PreFilter's result. The signature is taken
// when the pod is queued, not in each cycle, so it holds no state that
// changes while the pod waits.
func (g *Gang) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	key, ok := topology.GroupOf(pod)
	if !ok {
		return []fwk.SignFragment{{Key: PlacementSignerName, Value: ""}}, nil
	}
	role, _ := topology.RoleOf(pod)
	if topo, err := g.groups.Topology(key); err == nil && topo != nil {
		if _, late := topo.Late[role]; late {
			return nil, fwk.NewStatus(fwk.Unschedulable, "a late member is placed into the room held for it, not by a batch")
		}
	}
	return []fwk.SignFragment{{Key: PlacementSignerName, Value: key.String() + "/" + role}}, nil
}
