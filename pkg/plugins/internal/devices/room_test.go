package devices

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/ptr"
)

const (
	driver = "gpu.example.com"
	class  = "gpu"
	ns     = "team-a"
)

// fakeDRA is the scheduler's DRA manager over fixed objects; only what a
// Room reads is implemented.
type fakeDRA struct {
	claims  []*resourcev1.ResourceClaim
	slices  []*resourcev1.ResourceSlice
	classes []*resourcev1.DeviceClass
}

func (f *fakeDRA) ResourceClaims() fwk.ResourceClaimTracker     { return fakeClaims{f: f} }
func (f *fakeDRA) ResourceSlices() fwk.ResourceSliceLister      { return fakeSlices{f: f} }
func (f *fakeDRA) DeviceClasses() fwk.DeviceClassLister         { return fakeClasses{f: f} }
func (f *fakeDRA) DeviceClassResolver() fwk.DeviceClassResolver { return nil }

type fakeClaims struct {
	fwk.ResourceClaimTracker
	f *fakeDRA
}

func (c fakeClaims) List() ([]*resourcev1.ResourceClaim, error) { return c.f.claims, nil }

func (c fakeClaims) Get(namespace, name string) (*resourcev1.ResourceClaim, error) {
	for _, claim := range c.f.claims {
		if claim.Namespace == namespace && claim.Name == name {
			return claim, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), name)
}

func (c fakeClaims) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	allocated := sets.New[structured.DeviceID]()
	for _, claim := range c.f.claims {
		if claim.Status.Allocation != nil {
			for _, r := range claim.Status.Allocation.Devices.Results {
				allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	return allocated, nil
}

type fakeSlices struct {
	fwk.ResourceSliceLister
	f *fakeDRA
}

func (s fakeSlices) ListWithDeviceTaintRules() ([]*resourcev1.ResourceSlice, error) {
	return s.f.slices, nil
}

type fakeClasses struct {
	fwk.DeviceClassLister
	f *fakeDRA
}

func (c fakeClasses) List() ([]*resourcev1.DeviceClass, error) { return c.f.classes, nil }

func (c fakeClasses) Get(name string) (*resourcev1.DeviceClass, error) {
	for _, dc := range c.f.classes {
		if dc.Name == name {
			return dc, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("deviceclasses"), name)
}

// cluster is n nodes, node-0 … , each with two devices, gpu-0 and gpu-1.
func cluster(n int) (*fakeDRA, []*corev1.Node) {
	f := &fakeDRA{classes: []*resourcev1.DeviceClass{{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}}}
	var nodes []*corev1.Node
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}}
		nodes = append(nodes, node)
		f.slices = append(f.slices, &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name},
			Spec: resourcev1.ResourceSliceSpec{
				Driver:   driver,
				Pool:     resourcev1.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
				NodeName: ptr.To(node.Name),
				Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
			},
		})
	}
	return f, nodes
}

// claim is a claim for one device of the class, named name.
func claim(name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1, // the API server's defaults
			},
		}}}},
	}
}

// held is a claim allocated the device on the node and reserved for the
// pods (by name, which is also their UID).
func held(name, node, device string, pods ...string) *resourcev1.ResourceClaim {
	c := claim(name)
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: node, Device: device}},
	}}
	for _, pod := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod, UID: types.UID(pod)})
	}
	return c
}

func allLive(string, string, types.UID) bool { return true }

func uids(names ...string) sets.Set[types.UID] {
	out := sets.New[types.UID]()
	for _, name := range names {
		out.Insert(types.UID(name))
	}
	return out
}

func newRoom(t *testing.T, f *fakeDRA, live func(string, string, types.UID) bool) *Room {
	t.Helper()
	room, err := NewRoom(f, feature.Features{}, live)
	require.NoError(t, err)
	return room
}

func devicesOf(results []resourcev1.AllocationResult) []string {
	var out []string
	for _, r := range results {
		for _, d := range r.Devices.Results {
			out = append(out, d.Pool+"/"+d.Device)
		}
	}
	return out
}

func TestADeviceIsFreedOnlyOnceEveryPodItIsReservedForIsGone(t *testing.T) {
	f, nodes := cluster(1)
	f.claims = []*resourcev1.ResourceClaim{
		held("a", "node-0", "gpu-0", "pod-a"),
		held("shared", "node-0", "gpu-1", "pod-b", "pod-c"),
	}
	room := newRoom(t, f, allLive)
	want := []*resourcev1.ResourceClaim{claim("new")}
	tests := []struct {
		name string
		gone sets.Set[types.UID]
		want []string
	}{
		{name: "nothing gone: both devices are held", gone: uids(), want: nil},
		{name: "the one pod of a's claim gone", gone: uids("pod-a"), want: []string{"node-0/gpu-0"}},
		{name: "one of the two pods of the shared claim gone", gone: uids("pod-b"), want: nil},
		{name: "both pods of the shared claim gone", gone: uids("pod-b", "pod-c"), want: []string{"node-0/gpu-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results, err := room.Allocate(context.Background(), nodes[0], want, tt.gone)
			require.NoError(t, err)
			assert.Equal(t, tt.want, devicesOf(results))
		})
	}
}

func TestAClaimReservedForAPodGroupIsNeverFreed(t *testing.T) {
	f, nodes := cluster(1)
	group := held("group", "node-0", "gpu-0")
	group.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "job", UID: "job"}}
	f.claims = []*resourcev1.ResourceClaim{group, held("b", "node-0", "gpu-1", "pod-b")}
	room := newRoom(t, f, allLive)

	results, err := room.Allocate(context.Background(), nodes[0], []*resourcev1.ResourceClaim{claim("x"), claim("y")}, uids("job", "pod-b"))
	require.NoError(t, err)
	assert.Nil(t, results, "two devices are wanted and only pod-b's is freed")
}

func TestADeviceOfPodsAlreadyGoneIsFreeWithoutVictims(t *testing.T) {
	f, nodes := cluster(1)
	f.claims = []*resourcev1.ResourceClaim{held("a", "node-0", "gpu-0", "deleted"), held("b", "node-0", "gpu-1", "running")}
	room := newRoom(t, f, func(_, name string, _ types.UID) bool { return name != "deleted" })

	results, err := room.Allocate(context.Background(), nodes[0], []*resourcev1.ResourceClaim{claim("new")}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"node-0/gpu-0"}, devicesOf(results), "the deleted pod's claim is deallocated by kube-controller-manager soon")
}

func TestDevicesGivenToPlacedPodsAreNotGivenAgain(t *testing.T) {
	f, nodes := cluster(1)
	room := newRoom(t, f, allLive)
	ctx := context.Background()

	first, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{claim("m0")}, nil)
	require.NoError(t, err)
	require.Len(t, devicesOf(first), 1)
	room.Take(first)
	second, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{claim("m1")}, nil)
	require.NoError(t, err)
	require.Len(t, devicesOf(second), 1)
	assert.NotEqual(t, devicesOf(first), devicesOf(second), "the second member gets the other device")
	room.Take(second)
	third, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{claim("m2")}, nil)
	require.NoError(t, err)
	assert.Nil(t, third, "both devices are taken by the members placed before")

	room.ForgetTaken()
	again, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{claim("m2")}, nil)
	require.NoError(t, err)
	assert.Len(t, devicesOf(again), 1, "forgotten, the placed members' devices are free to place them again")
}

func TestAPodTheSearchTookFreesItsDevicesUntilGivenBack(t *testing.T) {
	f, nodes := cluster(1)
	f.claims = []*resourcev1.ResourceClaim{held("a", "node-0", "gpu-0", "pod-a"), held("b", "node-0", "gpu-1", "pod-b")}
	room := newRoom(t, f, allLive)
	ctx := context.Background()
	want := []*resourcev1.ResourceClaim{claim("new")}

	room.Leave("pod-a")
	results, err := room.Allocate(ctx, nodes[0], want, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"node-0/gpu-0"}, devicesOf(results))

	room.Return("pod-a")
	results, err = room.Allocate(ctx, nodes[0], want, nil)
	require.NoError(t, err)
	assert.Nil(t, results)
}

func TestDevicesOnAnotherNodeDoNotCount(t *testing.T) {
	f, nodes := cluster(2)
	f.claims = []*resourcev1.ResourceClaim{held("a", "node-0", "gpu-0", "pod-a"), held("b", "node-0", "gpu-1", "pod-b")}
	room := newRoom(t, f, allLive)

	results, err := room.Allocate(context.Background(), nodes[0], []*resourcev1.ResourceClaim{claim("new")}, nil)
	require.NoError(t, err)
	assert.Nil(t, results, "node-1's devices are free, but not on node-0")
	results, err = room.Allocate(context.Background(), nodes[1], []*resourcev1.ResourceClaim{claim("new")}, nil)
	require.NoError(t, err)
	assert.Len(t, devicesOf(results), 1)
}

func TestClaimsCountedAreAPodsUnallocatedOnes(t *testing.T) {
	f, _ := cluster(1)
	f.claims = []*resourcev1.ResourceClaim{claim("free"), held("done", "node-0", "gpu-0", "other")}
	withClaims := func(claims ...corev1.PodResourceClaim) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: corev1.PodSpec{ResourceClaims: claims}}
	}
	named := func(name string) corev1.PodResourceClaim {
		return corev1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(name)}
	}

	claims, counted, err := Claims(f, withClaims())
	assert.NoError(t, err)
	assert.False(t, counted, "a pod that claims nothing")
	assert.Nil(t, claims)

	claims, counted, err = Claims(f, withClaims(named("free")))
	require.NoError(t, err)
	assert.True(t, counted)
	require.Len(t, claims, 1)
	assert.Equal(t, "free", claims[0].Name)

	_, counted, err = Claims(f, withClaims(named("free"), named("done")))
	assert.NoError(t, err)
	assert.False(t, counted, "one claim is allocated already: DynamicResources decides alone")

	_, _, err = Claims(f, withClaims(named("missing")))
	assert.ErrorContains(t, err, "reading ResourceClaim team-a/missing")

	template := withClaims(corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")})
	_, _, err = Claims(f, template)
	assert.Error(t, err, "the claim is not made from its template yet")
}
