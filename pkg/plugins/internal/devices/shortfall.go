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
	_, free, total := resources.NewDevices(r.slices, classes, r.allocated).Count(ctx, own)
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(asked)) {
		need, have, all := asked[name], free[name], total[name]
		if need.Cmp(have) <= 0 {
			continue
		}
		class, _ := resources.DeviceClassOf(name)
		parts = append(parts, fmt.Sprintf("the claims ask for %s devices of class %s, and %s of its %s are free", need.String(), class, have.String(), all.String()))
	}
	return strings.Join(parts, "; ")
}
