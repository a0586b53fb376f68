package podgroup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/muster-dev/muster/pkg/resources"
)

// clusterDevices are the devices pods claim through Dynamic Resource
// Allocation, as the elastic scaler counts them for one look: each class a
// resource (resources.DeviceResource), free on a node as its ResourceSlices
// publish devices of the class that no claim is allocated, and asked for by
// a pod as its claims' requests.
type clusterDevices struct {
	claims map[types.NamespacedName]*resourcev1.ResourceClaim
	free   map[string]corev1.ResourceList
}

// readDevices reads the cluster's devices from the room cache; none where
// the API server serves no resource.k8s.io/v1.
func (r *ElasticScaler) readDevices(ctx context.Context) (*clusterDevices, error) {
	d := &clusterDevices{claims: map[types.NamespacedName]*resourcev1.ResourceClaim{}, free: map[string]corev1.ResourceList{}}
	var slices resourcev1.ResourceSliceList
	if err := r.Rooms.List(ctx, &slices); err != nil {
		if meta.IsNoMatchError(err) {
			return d, nil
		}
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	var classes resourcev1.DeviceClassList
	if err := r.Rooms.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing DeviceClasses: %w", err)
	}
	var claims resourcev1.ResourceClaimList
	if err := r.Rooms.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	allocated := sets.New[structured.DeviceID]()
	for i := range claims.Items {
		claim := &claims.Items[i]
		d.claims[types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}] = claim
		if claim.Status.Allocation != nil {
			for _, result := range claim.Status.Allocation.Devices.Results {
				allocated.Insert(structured.MakeDeviceID(result.Driver, result.Pool, result.Device))
			}
		}
	}
	if len(slices.Items) == 0 {
		return d, nil
	}
	d.free, _, _ = resources.NewDevices(pointersTo(slices.Items), pointersTo(classes.Items), allocated).Count(ctx, nil)
	return d, nil
}

// addFree adds to each node's room its free devices.
func (d *clusterDevices) addFree(nodes []resources.Room) {
	for _, n := range nodes {
		resources.Add(n.Free, d.free[n.Node.Name], 1)
	}
}

// of is what the pod's claims ask for: those it shares, and those made
// for it from templates. known is false when a claim is not made yet, or
// not seen yet: it asks for what cannot be counted.
func (d *clusterDevices) of(pod *corev1.Pod) (asked corev1.ResourceList, known bool) {
	asked = corev1.ResourceList{}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return asked, false
		}
		if name == nil {
			continue // the template makes no claim for this pod
		}
		claim, ok := d.claims[types.NamespacedName{Namespace: pod.Namespace, Name: *name}]
		if !ok {
			return asked, false
		}
		resources.Add(asked, resources.OfClaim(&claim.Spec), 1)
	}
	return asked, true
}

// pointersTo points at each of the items.
func pointersTo[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
