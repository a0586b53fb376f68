package devices

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
)

const ns = "team-a"

func allLive(string, string, types.UID) bool { return true }

func uids(names ...string) sets.Set[types.UID] {
	out := sets.New[types.UID]()
	for _, name := range names {
		out.Insert(types.UID(name))
	}
	return out
}

func newRoom(t *testing.T, f *devicestest.DRA, live func(string, string, types.UID) bool) *Room {
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
	f, nodes := devicestest.Cluster(1)
	f.Claims = []*resourcev1.ResourceClaim{
		devicestest.Held(ns, "a", "node-0", "gpu-0", "pod-a"),
		devicestest.Held(ns, "shared", "node-0", "gpu-1", "pod-b", "pod-c"),
	}
	room := newRoom(t, f, allLive)
	want := []*resourcev1.ResourceClaim{devicestest.Claim(ns, "new")}
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
	f, nodes := devicestest.Cluster(1)
	group := devicestest.Held(ns, "group", "node-0", "gpu-0")
	group.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "job", UID: "job"}}
	f.Claims = []*resourcev1.ResourceClaim{group, devicestest.Held(ns, "b", "node-0", "gpu-1", "pod-b")}
	room := newRoom(t, f, allLive)

	results, err := room.Allocate(context.Background(), nodes[0], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "x"), devicestest.Claim(ns, "y")}, uids("job", "pod-b"))
	require.NoError(t, err)
	assert.Nil(t, results, "two devices are wanted and only pod-b's is freed")
}

func TestADeviceOfPodsAlreadyGoneIsFreeWithoutVictims(t *testing.T) {
	f, nodes := devicestest.Cluster(1)
	f.Claims = []*resourcev1.ResourceClaim{devicestest.Held(ns, "a", "node-0", "gpu-0", "deleted"), devicestest.Held(ns, "b", "node-0", "gpu-1", "running")}
	room := newRoom(t, f, func(_, name string, _ types.UID) bool { return name != "deleted" })

	results, err := room.Allocate(context.Background(), nodes[0], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "new")}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"node-0/gpu-0"}, devicesOf(results), "the deleted pod's claim is deallocated by kube-controller-manager soon")
}

func TestDevicesGivenToPlacedPodsAreNotGivenAgain(t *testing.T) {
	f, nodes := devicestest.Cluster(1)
	room := newRoom(t, f, allLive)
	ctx := context.Background()

	first, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "m0")}, nil)
	require.NoError(t, err)
	require.Len(t, devicesOf(first), 1)
	room.Take(first)
	second, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "m1")}, nil)
	require.NoError(t, err)
	require.Len(t, devicesOf(second), 1)
	assert.NotEqual(t, devicesOf(first), devicesOf(second), "the second member gets the other device")
	room.Take(second)
	third, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "m2")}, nil)
	require.NoError(t, err)
	assert.Nil(t, third, "both devices are taken by the members placed before")

	room.ForgetTaken()
	again, err := room.Allocate(ctx, nodes[0], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "m2")}, nil)
	require.NoError(t, err)
	assert.Len(t, devicesOf(again), 1, "forgotten, the placed members' devices are free to place them again")
}

func TestAPodTheSearchTookFreesItsDevicesUntilGivenBack(t *testing.T) {
	f, nodes := devicestest.Cluster(1)
	f.Claims = []*resourcev1.ResourceClaim{devicestest.Held(ns, "a", "node-0", "gpu-0", "pod-a"), devicestest.Held(ns, "b", "node-0", "gpu-1", "pod-b")}
	room := newRoom(t, f, allLive)
	ctx := context.Background()
	want := []*resourcev1.ResourceClaim{devicestest.Claim(ns, "new")}

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
	f, nodes := devicestest.Cluster(2)
	f.Claims = []*resourcev1.ResourceClaim{devicestest.Held(ns, "a", "node-0", "gpu-0", "pod-a"), devicestest.Held(ns, "b", "node-0", "gpu-1", "pod-b")}
	room := newRoom(t, f, allLive)

	results, err := room.Allocate(context.Background(), nodes[0], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "new")}, nil)
	require.NoError(t, err)
	assert.Nil(t, results, "node-1's devices are free, but not on node-0")
	results, err = room.Allocate(context.Background(), nodes[1], []*resourcev1.ResourceClaim{devicestest.Claim(ns, "new")}, nil)
	require.NoError(t, err)
	assert.Len(t, devicesOf(results), 1)
}

func TestClaimsCountedAreAPodsUnallocatedOnes(t *testing.T) {
	f, _ := devicestest.Cluster(1)
	f.Claims = []*resourcev1.ResourceClaim{devicestest.Claim(ns, "free"), devicestest.Held(ns, "done", "node-0", "gpu-0", "other")}
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
