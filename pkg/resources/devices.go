package resources

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Devices that pods claim through Dynamic Resource Allocation are counted
// here as resources of their own, one per DeviceClass: a claim asks for a
// count of a class (OfClaim), and a node has free as many devices of the
// class as its ResourceSlices publish and no claim is allocated
// (Devices.FreeOn). The arithmetic of this package then serves them as it
// serves CPU.

// devicePrefix begins the name of a class's devices as a resource; a
// DeviceClass name is a DNS subdomain, so the name is a qualified one.
const devicePrefix = "devices.muster.dev/"

// DeviceResource names the devices of a class as a resource.
func DeviceResource(class string) corev1.ResourceName {
	return corev1.ResourceName(devicePrefix + class)
}

// DeviceClassOf returns the class a resource named by DeviceResource
// counts, and false for any other resource.
func DeviceClassOf(name corev1.ResourceName) (string, bool) {
	return strings.CutPrefix(string(name), devicePrefix)
}

// OfClaim is what a claim asks for, per class: each request's count (one
// unless it says more), or its first alternative's, the one the allocator
// tries first. A request of every device of a class on a node, and one of
// admin access, which consumes none, are not counted.
func OfClaim(spec *resourcev1.ResourceClaimSpec) corev1.ResourceList {
	asked := corev1.ResourceList{}
	for _, request := range spec.Devices.Requests {
		class, mode, count, consumes := readRequest(request)
		if !consumes || mode == resourcev1.DeviceAllocationModeAll {
			continue
		}
		Add(asked, corev1.ResourceList{DeviceResource(class): *resource.NewQuantity(max(count, 1), resource.DecimalSI)}, 1)
	}
	return asked
}

// AllOfAClass returns a request of the claim for every device of a class
// on a node, which OfClaim cannot count, and its class; false for none.
func AllOfAClass(spec *resourcev1.ResourceClaimSpec) (request, class string, found bool) {
	for _, r := range spec.Devices.Requests {
		if class, mode, _, consumes := readRequest(r); consumes && mode == resourcev1.DeviceAllocationModeAll {
			return r.Name, class, true
		}
	}
	return "", "", false
}

// readRequest reads a device request: its exact request, or the first of
// its alternatives, and whether it consumes devices (admin access does
// not).
func readRequest(request resourcev1.DeviceRequest) (class string, mode resourcev1.DeviceAllocationMode, count int64, consumes bool) {
	if exact := request.Exactly; exact != nil {
		return exact.DeviceClassName, exact.AllocationMode, exact.Count, exact.AdminAccess == nil || !*exact.AdminAccess
	}
	if len(request.FirstAvailable) > 0 {
		first := request.FirstAvailable[0]
		return first.DeviceClassName, first.AllocationMode, first.Count, true
	}
	return "", "", 0, false
}

// Devices are the devices the cluster's ResourceSlices publish, which of
// them are allocated, and the DeviceClasses that select them, read once to
// be counted.
type Devices struct {
	Slices    []*resourcev1.ResourceSlice
	Classes   []*resourcev1.DeviceClass
	Allocated sets.Set[structured.DeviceID]
	cel       *cel.Cache
}

// NewDevices returns the devices of the slices, with the allocated ones,
// to be counted by the classes.
func NewDevices(slices []*resourcev1.ResourceSlice, classes []*resourcev1.DeviceClass, allocated sets.Set[structured.DeviceID]) *Devices {
	return &Devices{Slices: slices, Classes: classes, Allocated: allocated, cel: cel.NewCache(len(classes)+1, cel.Features{})}
}

// Count returns, for each node, how many devices of each class are free
// on it, as DeviceResource resources; and, for the whole cluster, how
// many of each class there are free, and in all. own are allocated
// devices that count as free.
func (d *Devices) Count(ctx context.Context, own sets.Set[structured.DeviceID]) (byNode map[string]corev1.ResourceList, free, total corev1.ResourceList) {
	byNode, free, total = map[string]corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}
	one := corev1.ResourceList{}
	for _, slice := range d.Slices {
		for _, device := range slice.Spec.Devices {
			id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, device.Name)
			isFree := !d.Allocated.Has(id) || own.Has(id)
			for _, class := range d.Classes {
				if !d.selects(ctx, class, slice.Spec.Driver, device) {
					continue
				}
				clear(one)
				one[DeviceResource(class.Name)] = *resource.NewQuantity(1, resource.DecimalSI)
				Add(total, one, 1)
				if !isFree {
					continue
				}
				Add(free, one, 1)
				if node := slice.Spec.NodeName; node != nil {
					byNode[*node] = Add(byNode[*node], one, 1)
				}
			}
		}
	}
	return byNode, free, total
}

// selects reports whether every selector of the class accepts the device.
func (d *Devices) selects(ctx context.Context, class *resourcev1.DeviceClass, driver string, device resourcev1.Device) bool {
	for _, selector := range class.Spec.Selectors {
		if selector.CEL == nil {
			continue
		}
		compiled := d.cel.GetOrCompile(selector.CEL.Expression)
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
