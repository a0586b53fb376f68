// Package devicestest gives unit tests a scheduler's DRA manager over
// fixed ResourceClaims, ResourceSlices and DeviceClasses.
package devicestest

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// Driver publishes the devices; Class selects them all.
const (
	Driver = "gpu.example.com"
	Class  = "gpu"
)

// DRA is the scheduler's DRA manager over fixed objects; only what a
// devices.Room reads, and allocations in flight, are implemented.
type DRA struct {
	Claims  []*resourcev1.ResourceClaim
	Slices  []*resourcev1.ResourceSlice
	Classes []*resourcev1.DeviceClass
	// Pending are the claims signalled in flight, by UID.
	Pending map[types.UID]*resourcev1.ResourceClaim
	// informed are the claims as the API server has them, by
	// namespace/name, while Claims holds a copy assumed in their place.
	informed map[string]*resourcev1.ResourceClaim
	// mu guards the claims, which a test may change while a plugin's
	// binding reads them.
	mu sync.Mutex
}

func (f *DRA) ResourceClaims() fwk.ResourceClaimTracker     { return claims{f: f} }
func (f *DRA) ResourceSlices() fwk.ResourceSliceLister      { return slices{f: f} }
func (f *DRA) DeviceClasses() fwk.DeviceClassLister         { return classes{f: f} }
func (f *DRA) DeviceClassResolver() fwk.DeviceClassResolver { return nil }

type claims struct {
	fwk.ResourceClaimTracker
	f *DRA
}

func (c claims) List() ([]*resourcev1.ResourceClaim, error) { return c.f.Claims, nil }

func (c claims) Get(namespace, name string) (*resourcev1.ResourceClaim, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	for _, claim := range c.f.Claims {
		if claim.Namespace == namespace && claim.Name == name {
			return claim, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), name)
}

func (c claims) SignalClaimPendingAllocation(uid types.UID, claim *resourcev1.ResourceClaim) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if c.f.Pending == nil {
		c.f.Pending = map[types.UID]*resourcev1.ResourceClaim{}
	}
	c.f.Pending[uid] = claim
	return nil
}

func (c claims) GetPendingAllocation(uid types.UID) *resourcev1.AllocationResult {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if claim, ok := c.f.Pending[uid]; ok {
		return claim.Status.Allocation
	}
	return nil
}

func (c claims) MaybeRemoveClaimPendingAllocation(uid types.UID, _ bool) bool {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	_, ok := c.f.Pending[uid]
	delete(c.f.Pending, uid)
	return ok
}

// AssumeClaimAfterAPICall puts the claim in place of the one of its name,
// as the scheduler's claim cache does, but refuses an older version.
func (c claims) AssumeClaimAfterAPICall(claim *resourcev1.ResourceClaim) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	for i, stored := range c.f.Claims {
		if stored.Namespace != claim.Namespace || stored.Name != claim.Name {
			continue
		}
		if claim.ResourceVersion < stored.ResourceVersion {
			return fmt.Errorf("claim %s/%s is out of sync", claim.Namespace, claim.Name)
		}
		if c.f.informed == nil {
			c.f.informed = map[string]*resourcev1.ResourceClaim{}
		}
		key := claim.Namespace + "/" + claim.Name
		if _, ok := c.f.informed[key]; !ok {
			c.f.informed[key] = stored
		}
		c.f.Claims[i] = claim
		return nil
	}
	return apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), claim.Name)
}

// AssumedClaimRestore puts back the claim as the API server has it.
func (c claims) AssumedClaimRestore(namespace, name string) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	key := namespace + "/" + name
	informed, ok := c.f.informed[key]
	if !ok {
		return
	}
	delete(c.f.informed, key)
	for i, stored := range c.f.Claims {
		if stored.Namespace == namespace && stored.Name == name {
			c.f.Claims[i] = informed
		}
	}
}

// Inform replaces the claim of its name as an informer event does,
// dropping any copy assumed in its place.
func (f *DRA) Inform(claim *resourcev1.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.informed, claim.Namespace+"/"+claim.Name)
	for i, stored := range f.Claims {
		if stored.Namespace == claim.Namespace && stored.Name == claim.Name {
			f.Claims[i] = claim
		}
	}
}

// PendingDevices lists the devices of the claims in flight, as
// driver/pool/device.
func (f *DRA) PendingDevices() []string {
	var devices []string
	for _, claim := range f.Pending {
		for _, r := range claim.Status.Allocation.Devices.Results {
			devices = append(devices, structured.MakeDeviceID(r.Driver, r.Pool, r.Device).String())
		}
	}
	return devices
}

func (c claims) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	allocated := sets.New[structured.DeviceID]()
	for _, claim := range c.f.Pending {
		for _, r := range claim.Status.Allocation.Devices.Results {
			allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	for _, claim := range c.f.Claims {
		if claim.Status.Allocation != nil {
			for _, r := range claim.Status.Allocation.Devices.Results {
				allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	return allocated, nil
}

type slices struct {
	fwk.ResourceSliceLister
	f *DRA
}

func (s slices) ListWithDeviceTaintRules() ([]*resourcev1.ResourceSlice, error) {
	return s.f.Slices, nil
}

type classes struct {
	fwk.DeviceClassLister
	f *DRA
}

func (c classes) List() ([]*resourcev1.DeviceClass, error) { return c.f.Classes, nil }

func (c classes) Get(name string) (*resourcev1.DeviceClass, error) {
	for _, dc := range c.f.Classes {
		if dc.Name == name {
			return dc, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

// Cluster is n nodes, node-0 …, each with two devices, gpu-0 and gpu-1.
func Cluster(n int) (*DRA, []*corev1.Node) {
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}}
	}
	return On(nodes...), nodes
}

// On is a DRA manager of the nodes, each with two devices, gpu-0 and
// gpu-1, and the class that selects them.
func On(nodes ...*corev1.Node) *DRA {
	f := &DRA{Classes: []*resourcev1.DeviceClass{{
		ObjectMeta: metav1.ObjectMeta{Name: Class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", Driver)},
		}}},
	}}}
	for _, node := range nodes {
		f.Slices = append(f.Slices, &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name},
			Spec: resourcev1.ResourceSliceSpec{
				Driver:   Driver,
				Pool:     resourcev1.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
				NodeName: ptr.To(node.Name),
				Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
			},
		})
	}
	return f
}

// Claim is a claim in the namespace for one device of the class, named
// name.
func Claim(namespace, name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: Class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1, // the API server's defaults
			},
		}}}},
	}
}

// Held is a claim allocated the device on the node and reserved for the
// pods (by name, which is also their UID).
func Held(namespace, name, node, device string, pods ...string) *resourcev1.ResourceClaim {
	c := Claim(namespace, name)
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: Driver, Pool: node, Device: device}},
	}}
	for _, pod := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod, UID: types.UID(pod)})
	}
	return c
}
