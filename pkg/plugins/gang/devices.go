package gang

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
)

// devicesShort says what of the gang's unbound members' device claims
// keeps it out, for its rejection: the classes the cluster has too few
// devices free of (devices.Room.Shortfall), a claim its members share
// counted once; empty when none, or when its members claim no devices.
func (g *Gang) devicesShort(ctx context.Context, key types.NamespacedName) string {
	dra := g.handle.SharedDRAManager()
	if dra == nil {
		return ""
	}
	members, err := g.groups.Members(key)
	if err != nil {
		return ""
	}
	var claims []*resourcev1.ResourceClaim
	counted := sets.New[types.UID]()
	for _, member := range members {
		if member.Spec.NodeName != "" {
			continue
		}
		own, ok, err := devices.Claims(dra, member)
		if err != nil || !ok {
			continue
		}
		for _, claim := range own {
			if !counted.Has(claim.UID) {
				counted.Insert(claim.UID)
				claims = append(claims, claim)
			}
		}
	}
	if len(claims) == 0 {
		return ""
	}
	// Counted as the allocator counts them: a claim of a pod deleted is
	// not free until it is deallocated.
	room, err := devices.NewRoom(dra, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate), func(string, string, types.UID) bool { return true })
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Counting the devices a gang lacks", "podGroup", key, "err", err)
		return ""
	}
	return room.Shortfall(ctx, claims)
}
