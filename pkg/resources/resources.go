// Package resources is muster's arithmetic of resource lists, for the
// scheduler's plugins and the controller alike: what a pod requests, sums
// of requests, what a node has free, what a request lacks of it, and
// whether it fits; devices claimed through Dynamic Resource Allocation
// count as resources of their own, one per DeviceClass (devices.go).
// It is pure: no clients, no globals, no time.
package resources

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// OfPod is what a pod requests, as the scheduler counts it: its
// containers', its init containers' peak, and its overhead.
func OfPod(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// Add adds times × requests to total, which may be nil, and returns it.
func Add(total, requests corev1.ResourceList, times int32) corev1.ResourceList {
	if total == nil {
		total = corev1.ResourceList{}
	}
	for name, quantity := range requests {
		quantity.Mul(int64(times))
		sum := total[name]
		sum.Add(quantity)
		total[name] = sum
	}
	return total
}

// Sub takes times × requests from total, and returns it. Only the
// resources total lists are taken from: a node that lists none of a
// resource has none to give, and a deficit that lists none needs none.
// What is taken may leave a resource below zero (Clamp).
func Sub(total, requests corev1.ResourceList, times int32) corev1.ResourceList {
	for name, quantity := range requests {
		have, ok := total[name]
		if !ok {
			continue
		}
		quantity.Mul(int64(times))
		have.Sub(quantity)
		total[name] = have
	}
	return total
}

// Clamp sets every resource of list below zero to zero, and returns it.
func Clamp(list corev1.ResourceList) corev1.ResourceList {
	for name, quantity := range list {
		if quantity.Sign() < 0 {
			quantity.Set(0)
			list[name] = quantity
		}
	}
	return list
}

// Room is what a node has left for more pods, as the controller counts it
// from API objects: its allocatable less what the pods placed on it
// request. The scheduler counts its own with Free.
type Room struct {
	Node *corev1.Node
	Free corev1.ResourceList
}

// EmptyRoom is the room of a node with no pod on it.
func EmptyRoom(node *corev1.Node) Room {
	return Room{Node: node, Free: node.Status.Allocatable.DeepCopy()}
}

// Place takes what a pod placed on the node requests from its room.
func (r Room) Place(requests corev1.ResourceList) { Sub(r.Free, requests, 1) }

// Clone returns a room that changes apart from r.
func (r Room) Clone() Room { return Room{Node: r.Node, Free: r.Free.DeepCopy()} }

// Deficit is what need asks beyond free, by resource; a resource free
// covers is left out, and one free lacks counts whole.
func Deficit(need, free corev1.ResourceList) corev1.ResourceList {
	deficit := corev1.ResourceList{}
	for name, quantity := range need {
		short := quantity.DeepCopy()
		if have, ok := free[name]; ok {
			short.Sub(have)
		}
		if short.Sign() > 0 {
			deficit[name] = short
		}
	}
	return deficit
}

// Covered reports whether nothing is left of a deficit, which may have
// been paid down below zero.
func Covered(deficit corev1.ResourceList) bool {
	for _, quantity := range deficit {
		if quantity.Sign() > 0 {
			return false
		}
	}
	return true
}

// Fits reports whether free holds everything request asks for.
func Fits(request, free corev1.ResourceList) bool {
	return Covered(Deficit(request, free))
}

// Free is what a node has left to give: its allocatable less what the
// pods on it, and those assumed there, request.
func Free(node fwk.NodeInfo) corev1.ResourceList {
	alloc, used := node.GetAllocatable(), node.GetRequested()
	free := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(alloc.GetMilliCPU()-used.GetMilliCPU(), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(alloc.GetMemory()-used.GetMemory(), resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(alloc.GetEphemeralStorage()-used.GetEphemeralStorage(), resource.BinarySI),
	}
	for name, quantity := range alloc.GetScalarResources() {
		free[name] = *resource.NewQuantity(quantity-used.GetScalarResources()[name], resource.DecimalSI)
	}
	return free
}

// FitsBeside reports whether request fits in what is free on the node once
// held, room kept for others, is set aside.
func FitsBeside(request, held corev1.ResourceList, node fwk.NodeInfo) bool {
	return Fits(Add(Add(nil, request, 1), held, 1), Free(node))
}

// Amounts are quantities of resources in the unit Amount gives them, for
// sums over many nodes without a quantity's cost.
type Amounts map[corev1.ResourceName]int64

// Amount is a quantity of the resource: millicores of CPU, else whole
// units (bytes of memory).
func Amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// AddFree adds to free what the node has left of each resource it lists.
func (free Amounts) AddFree(node fwk.NodeInfo) {
	alloc, used := node.GetAllocatable(), node.GetRequested()
	for name := range free {
		switch name {
		case corev1.ResourceCPU:
			free[name] += alloc.GetMilliCPU() - used.GetMilliCPU()
		case corev1.ResourceMemory:
			free[name] += alloc.GetMemory() - used.GetMemory()
		case corev1.ResourceEphemeralStorage:
			free[name] += alloc.GetEphemeralStorage() - used.GetEphemeralStorage()
		default:
			free[name] += alloc.GetScalarResources()[name] - used.GetScalarResources()[name]
		}
	}
}

// Fill is the share of free that need would take of its scarcest
// resource: 1 fills it, and above 1 need does not fit. A resource free
// has none of counts as filled past fitting.
func Fill(need corev1.ResourceList, free Amounts) float64 {
	var fill float64
	for name, quantity := range need {
		amount := Amount(name, quantity)
		if amount <= 0 {
			continue
		}
		if free[name] <= 0 {
			return math.Inf(1)
		}
		fill = max(fill, float64(amount)/float64(free[name]))
	}
	return fill
}
