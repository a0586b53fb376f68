// Package resources is muster's arithmetic of resource lists, for the
// scheduler's plugins and the controller alike: what a pod requests, sums
// of requests, what a node has free, what a request lacks of it, and
// whether it fits.
// It is pure: no clients, no globals, no time.
package resources

import (
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
