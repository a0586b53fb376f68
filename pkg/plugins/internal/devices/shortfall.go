package devices

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Shortfall says, for each device class that the claims ask for more
// devices of than the cluster has free, how many they ask for and how many
// are free, for example "the claims ask for 10 devices of class
// gpu.example.com, and 8 of its 8 are free". It is empty when every class
// has enough free in all, though they may not be on the nodes that would
// need them. A request of every device of a class is not counted. Devices
// allocated in flight to the claims themselves (members of a gang reserved
// in the attempt that failed) count as free: the failure gives them back.
func (r *Room) Shortfall(ctx context.Context, claims []*resourcev1.ResourceClaim) string {
	asked := map[string]int64{}
	own := sets.New[structured.DeviceID]()
	for _, claim := range claims {
		if pending := r.dra.ResourceClaims().GetPendingAllocation(claim.UID); pending != nil {
			for _, result := range pending.Devices.Results {
				own.Insert(structured.MakeDeviceID(result.Driver, result.Pool, result.Device))
			}
		}
		for _, request := range claim.Spec.Devices.Requests {
			switch {
			case request.Exactly != nil && request.Exactly.AllocationMode != resourcev1.DeviceAllocationModeAll:
				asked[request.Exactly.DeviceClassName] += max(request.Exactly.Count, 1)
			case len(request.FirstAvailable) > 0 && request.FirstAvailable[0].AllocationMode != resourcev1.DeviceAllocationModeAll:
				asked[request.FirstAvailable[0].DeviceClassName] += max(request.FirstAvailable[0].Count, 1)
			}
		}
	}
	var parts []string
	for _, class := range slices.Sorted(maps.Keys(asked)) {
		free, total, err := r.count(ctx, class, own)
		if err != nil || int64(free) >= asked[class] {
			continue
		}
		parts = append(parts, fmt.Sprintf("the claims ask for %d devices of class %s, and %d of its %d are free", asked[class], class, free, total))
	}
	return strings.Join(parts, "; ")
}

// count returns how many devices of the class the ResourceSlices publish,
// and how many of them are free or own.
func (r *Room) count(ctx context.Context, className string, own sets.Set[structured.DeviceID]) (free, total int, err error) {
	class, err := r.dra.DeviceClasses().Get(className)
	if err != nil {
		return 0, 0, err
	}
	for _, slice := range r.slices {
		for _, device := range slice.Spec.Devices {
			if !r.matches(ctx, class, slice.Spec.Driver, device) {
				continue
			}
			total++
			if id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, device.Name); !r.allocated.Has(id) || own.Has(id) {
				free++
			}
		}
	}
	return free, total, nil
}

// matches reports whether every selector of the class accepts the device.
func (r *Room) matches(ctx context.Context, class *resourcev1.DeviceClass, driver string, device resourcev1.Device) bool {
	for _, selector := range class.Spec.Selectors {
		if selector.CEL == nil {
			continue
		}
		compiled := r.cel.GetOrCompile(selector.CEL.Expression)
		if compiled.Error != nil {
			return false
		}
		ok, _, err := compiled.DeviceMatches(ctx, cel.Device{Driver: driver, Attributes: device.Attributes, Capacity: device.Capacity})
		if err != nil || !ok {
			return false
		}
	}
	return true
}
