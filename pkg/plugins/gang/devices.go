package gang

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
)

// devicesShort says what of the gang's unbound members' device claims
// keeps it out, for its rejection: a claim two of them share, which a gang
// cannot be given (sharedClaim), or the classes the cluster has too few
// devices free of (devices.Room.Shortfall); empty when neither, or when its
// members claim no devices.
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
	claimedBy := map[types.UID]string{}
	for _, member := range members {
		if member.Spec.NodeName != "" {
			continue
		}
		own, ok, err := devices.Claims(dra, member)
		if err != nil || !ok {
			continue
		}
		for _, claim := range own {
			if first, shared := claimedBy[claim.UID]; shared {
				return sharedClaim(first, member.Name, claim)
			}
			claimedBy[claim.UID] = member.Name
		}
		claims = append(claims, own...)
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

// sharedClaim says why a gang whose members share a claim not allocated
// yet is never admitted: kube-scheduler's DynamicResources writes the
// claim's allocation only as the first of them binds, after the whole gang
// is admitted, and refuses the others until then.
func sharedClaim(first, second string, claim *resourcev1.ResourceClaim) string {
	return fmt.Sprintf("members %s and %s share ResourceClaim %s/%s (spec.resourceClaims[].resourceClaimName), which muster cannot allocate to a gang: "+
		"its allocation is written only as the first of them binds, after the whole gang is admitted; give each member a claim of its own (resourceClaimTemplateName)",
		first, second, claim.Namespace, claim.Name)
}
