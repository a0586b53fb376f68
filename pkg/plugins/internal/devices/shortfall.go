package devices

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/muster-dev/muster/pkg/resources"
)

// Shortfall says, for each device class that the claims ask for more
// devices of than the cluster has free, how many they ask for and how many
// are free, for example "the claims ask for 10 devices of class
// gpu.example.com, and 8 of its 8 are free". It is empty when every class
// has enough free in all, though they may not be on the nodes that would
// need them. A claim listed twice, shared by two pods, counts once.
// Devices allocated in flight to the claims themselves (members
// of a gang reserved in the attempt that failed) count as free: the
// failure gives them back.
func (r *Room) Shortfall(ctx context.Context, claims []*resourcev1.ResourceClaim) string {
	return r.shortfall(ctx, claims, nil, "its")
}

// ShortfallIn is Shortfall within one topology domain, its nodes, named
// domain: "the claims ask for 10 devices of class gpu.example.com, and 8
// of rack-0's 8 are free".
func (r *Room) ShortfallIn(ctx context.Context, claims []*resourcev1.ResourceClaim, domain string, nodes sets.Set[string]) string {
	return r.shortfall(ctx, claims, nodes, domain+"'s")
}

// shortfall counts the devices of the nodes, every node's when nil, whose
// devices of a class are owned as whose says.
func (r *Room) shortfall(ctx context.Context, claims []*resourcev1.ResourceClaim, nodes sets.Set[string], whose string) string {
	asked := resources.Add(nil, nil, 1)
	own := sets.New[structured.DeviceID]()
	counted := sets.New[types.UID]()
	for _, claim := range claims {
		// A claim that pods share is allocated once.
		if counted.Has(claim.UID) {
			continue
		}
		counted.Insert(claim.UID)
		resources.Add(asked, resources.OfClaim(&claim.Spec), 1)
		if pending := r.dra.ResourceClaims().GetPendingAllocation(claim.UID); pending != nil {
			for _, result := range pending.Devices.Results {
				own.Insert(structured.MakeDeviceID(result.Driver, result.Pool, result.Device))
			}
		}
	}
	classes, err := r.dra.DeviceClasses().List()
	if err != nil || len(asked) == 0 {
		return ""
	}
	devices := r.slices
	if nodes != nil {
		devices = slices.DeleteFunc(slices.Clone(devices), func(s *resourcev1.ResourceSlice) bool {
			return s.Spec.NodeName == nil || !nodes.Has(*s.Spec.NodeName)
		})
	}
	_, free, total := resources.NewDevices(devices, classes, r.allocated.Union(r.taken)).Count(ctx, own)
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(asked)) {
		need, have, all := asked[name], free[name], total[name]
		if need.Cmp(have) <= 0 {
			continue
		}
		class, _ := resources.DeviceClassOf(name)
		parts = append(parts, fmt.Sprintf("the claims ask for %s devices of class %s, and %s of %s %s are free", need.String(), class, have.String(), whose, all.String()))
	}
	return strings.Join(parts, "; ")
}
