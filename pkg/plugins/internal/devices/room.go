// Package devices answers, for a preemption's dry run, what kube-scheduler's
// DynamicResources plugin cannot: whether a pod's device claims could be
// allocated on a node once some pods are gone. DynamicResources has no
// PreFilter extensions, so a dry run that takes victims off a node never
// sees their devices freed.
package devices

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// FilterName is the name of the profile's plugin that allocates devices
// (pkg/plugins/podgroupdra, kube-scheduler's DynamicResources): the
// plugins that count devices themselves skip its Filter.
const FilterName = "PodGroupDynamicResources"

// SkipFilter skips the profile's device Filter in the cycle state, whose
// dry run or trial counts the devices itself.
func SkipFilter(state fwk.CycleState) {
	state.SetSkipFilterPlugins(sets.New(FilterName).Union(state.GetSkipFilterPlugins()))
}

// Room is the cluster's devices as one preemption's dry run sees them:
// those allocated now, which of them each pod's going would free, the pods
// the search has taken already, and the devices it gave to pods it placed
// (the members of a gang placed before the one tried).
type Room struct {
	features structured.Features
	cel      *cel.Cache
	dra      fwk.SharedDRAManager
	slices   []*resourcev1.ResourceSlice
	// allocated are the devices allocated now, in flight or written.
	allocated sets.Set[structured.DeviceID]
	// holders are, for each allocated device whose claim is reserved for
	// pods only, those pods: the device is freed once they are all gone.
	holders map[structured.DeviceID]sets.Set[types.UID]
	gone    sets.Set[types.UID]
	taken   sets.Set[structured.DeviceID]
}

// NewRoom reads the cluster's devices for one preemption. A device whose
// claim is reserved only for pods that are gone or going (deleted, or no
// longer the pod of that name, per live) counts as free: the dry run need
// not wait for kube-controller-manager to deallocate it.
func NewRoom(dra fwk.SharedDRAManager, features feature.Features, live func(namespace, name string, uid types.UID) bool) (*Room, error) {
	r := &Room{
		features: dynamicresources.AllocatorFeatures(features),
		cel: cel.NewCache(10, cel.Features{
			EnableConsumableCapacity: features.EnableDRAConsumableCapacity,
			EnableListTypeAttributes: features.EnableDRAListTypeAttributes,
		}),
		dra:     dra,
		holders: map[structured.DeviceID]sets.Set[types.UID]{},
		gone:    sets.New[types.UID](),
		taken:   sets.New[structured.DeviceID](),
	}
	// The tracker refuses a list that changed while it was read.
	var err error
	for range 3 {
		if r.allocated, err = dra.ResourceClaims().ListAllAllocatedDevices(); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listing the allocated devices: %w", err)
	}
	r.allocated = r.allocated.Clone()
	if r.slices, err = dra.ResourceSlices().ListWithDeviceTaintRules(); err != nil {
		return nil, fmt.Errorf("listing the ResourceSlices: %w", err)
	}
	all, err := dra.ResourceClaims().List()
	if err != nil {
		return nil, fmt.Errorf("listing the ResourceClaims: %w", err)
	}
	for _, claim := range all {
		pods, ok := reservedForPodsOnly(claim)
		if !ok || claim.Status.Allocation == nil {
			continue
		}
		held := slices.ContainsFunc(claim.Status.ReservedFor, func(c resourcev1.ResourceClaimConsumerReference) bool {
			return live(claim.Namespace, c.Name, c.UID)
		})
		for _, result := range claim.Status.Allocation.Devices.Results {
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if !held {
				r.allocated.Delete(id)
				continue
			}
			if r.holders[id] == nil {
				r.holders[id] = sets.New[types.UID]()
			}
			r.holders[id].Insert(pods...)
		}
	}
	return r, nil
}

// Claims returns the pod's claims that a dry run counts here, and false
// when there are none, or one of them is allocated already: the profile's
// DynamicResources filter alone decides for such a pod. A claim not yet
// made from its template is an error: the pod is not ready to preempt.
func Claims(dra fwk.SharedDRAManager, pod *corev1.Pod) ([]*resourcev1.ResourceClaim, bool, error) {
	if dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil, false, nil
	}
	claims, err := claimsOf(dra, pod)
	return claims, len(claims) > 0, err
}

// claimsOf returns the pod's claims, or nil when one is allocated already.
// A claim not made yet from its template fails: the pod is not ready for
// preemption.
func claimsOf(dra fwk.SharedDRAManager, pod *corev1.Pod) ([]*resourcev1.ResourceClaim, error) {
	var claims []*resourcev1.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue // the template makes no claim for this pod
		}
		claim, err := dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, fmt.Errorf("reading ResourceClaim %s/%s: %w", pod.Namespace, *name, err)
		}
		if claim.Status.Allocation != nil {
			return nil, nil
		}
		claims = append(claims, claim)
	}
	return claims, nil
}

// reservedForPodsOnly returns the pods the claim is reserved for, if it is
// reserved for pods and nothing else (not a PodGroup).
func reservedForPodsOnly(claim *resourcev1.ResourceClaim) ([]types.UID, bool) {
	if len(claim.Status.ReservedFor) == 0 {
		return nil, false
	}
	pods := make([]types.UID, 0, len(claim.Status.ReservedFor))
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.APIGroup != "" || consumer.Resource != "pods" {
			return nil, false
		}
		pods = append(pods, consumer.UID)
	}
	return pods, true
}

// Allocate returns the devices the claims would get on the node once the
// gone pods, and those the search took, have left it, or nil when they
// would not all get some.
func (r *Room) Allocate(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim, gone sets.Set[types.UID]) ([]resourcev1.AllocationResult, error) {
	allocated := r.allocated.Union(r.taken)
	gone = gone.Union(r.gone)
	for id, holders := range r.holders {
		if !r.taken.Has(id) && gone.IsSuperset(holders) {
			allocated.Delete(id)
		}
	}
	allocator, err := structured.NewAllocator(ctx, r.features, structured.AllocatedState{
		AllocatedDevices:         allocated,
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}, r.dra.DeviceClasses(), r.slices, r.cel)
	if err != nil {
		return nil, fmt.Errorf("allocating devices on node %s: %w", node.Name, err)
	}
	results, err := allocator.Allocate(ctx, node, claims)
	if err != nil {
		return nil, fmt.Errorf("allocating devices on node %s: %w", node.Name, err)
	}
	return results, nil
}

// Take counts the devices of results as allocated: a pod the dry run
// placed holds them.
func (r *Room) Take(results []resourcev1.AllocationResult) {
	for _, result := range results {
		for _, device := range result.Devices.Results {
			r.taken.Insert(structured.MakeDeviceID(device.Driver, device.Pool, device.Device))
		}
	}
}

// Leave counts the pod gone: a search took it.
func (r *Room) Leave(uid types.UID) { r.gone.Insert(uid) }

// Return counts the pod back: the search gave it back.
func (r *Room) Return(uid types.UID) { r.gone.Delete(uid) }

// ForgetTaken drops the devices given to placed pods, before they are
// placed again.
func (r *Room) ForgetTaken() { r.taken = sets.New[structured.DeviceID]() }
