package heldrooms

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
)

// A launcher claiming one device, whose two workers are on n1 with both
// of its devices: its room is held on n2, where a device is free, though
// its CPU fits on n1.
const deviceLauncher = `{"launcher":{"requests":{"cpu":"1"},"devices":[{"deviceClassName":"` + devicestest.Class + `","count":1}]}}`

// deviceRooms is HeldRooms over n1 and n2, of 4 CPUs and two devices each,
// with both of n1's devices held by the workers w0 and w1, and the room of
// the gang's launcher held as w1 is reserved.
func deviceRooms(t *testing.T) (*HeldRooms, *groups, *devicestest.DRA) {
	t.Helper()
	nodes := []*corev1.Node{nodeObj("n1", "gpu", "4"), nodeObj("n2", "gpu", "4")}
	dra := devicestest.On(nodes...)
	dra.Claims = append(dra.Claims, devicestest.Held(ns, "w0-gpu", "n1", "gpu-0", "w0"), devicestest.Held(ns, "w1-gpu", "n1", "gpu-1", "w1"))
	g := newGroups()
	lateGang(t, g, deviceLauncher)
	g.placed[key("mpi")] = 2
	g.reserved.Insert("w1")
	snapshot := cache.NewSnapshot(nil, nodes)
	h := NewWithModel(klog.Background(), g, handle{snapshot: snapshot, events: events.NewFakeRecorder(10), activator: &plugintest.Activator{}, dra: dra},
		testingclock.NewFakeClock(time.Time{}))
	require.True(t, h.Reserve(context.Background(), recorded(h, member("mpi", "worker", "w1", "1")), member("mpi", "worker", "w1", "1"), "n1").IsSuccess())
	return h, g, dra
}

// preFilter runs PreFilter for the pod over deviceRooms' nodes.
func preFilter(t *testing.T, h *HeldRooms, pod *corev1.Pod) {
	t.Helper()
	nodes := []fwk.NodeInfo{nodeInfo(nodeObj("n1", "gpu", "4")), nodeInfo(nodeObj("n2", "gpu", "4"))}
	_, status := h.PreFilter(context.Background(), recorded(h, pod), pod, nodes)
	require.True(t, status.IsSuccess(), status.AsError())
}

func TestALateMembersRoomHoldsItsDevicesWhereTheyAreFree(t *testing.T) {
	_, g, dra := deviceRooms(t)
	room := g.rooms.Held(key("mpi"), "launcher")
	require.NotNil(t, room, "no room held for the launcher")
	assert.Equal(t, "n2", room.Node, "the room is on a node with no free device")
	assert.Equal(t, []string{devicestest.Driver + "/n2/gpu-0"}, dra.PendingDevices(), "the tracker does not count the held device allocated")
}

func TestALateMembersDevicesAreHeldFromOthersAndLentToItAlone(t *testing.T) {
	h, g, dra := deviceRooms(t)
	held := []string{devicestest.Driver + "/n2/gpu-0"}

	preFilter(t, h, plainPod("other", "1"))
	assert.Equal(t, held, dra.PendingDevices(), "another pod's cycle must not see the held device free")

	launcher := member("mpi", "launcher", "launcher", "1")
	preFilter(t, h, launcher)
	assert.Empty(t, dra.PendingDevices(), "the launcher's own cycle must see its device free")

	// Its cycle fails before Reserve: the next cycle holds the device again.
	preFilter(t, h, plainPod("other", "1"))
	assert.Equal(t, held, dra.PendingDevices())

	// It takes its room: the device is its claim's now, not the room's.
	preFilter(t, h, launcher)
	require.True(t, h.Reserve(context.Background(), recorded(h, launcher), launcher, "n2").IsSuccess())
	assert.Nil(t, g.rooms.Held(key("mpi"), "launcher"))
	preFilter(t, h, plainPod("other", "1"))
	assert.Empty(t, dra.PendingDevices())
}

func TestAReleasedRoomFreesItsDevicesAtTheNextCycle(t *testing.T) {
	h, g, dra := deviceRooms(t)
	require.Equal(t, 1, g.rooms.Release(key("mpi")))
	preFilter(t, h, plainPod("other", "1"))
	assert.Empty(t, dra.PendingDevices())
}

func TestNoRoomIsHeldWhereNoDeviceIsFree(t *testing.T) {
	nodes := []*corev1.Node{nodeObj("n1", "gpu", "4")}
	dra := devicestest.On(nodes...)
	dra.Claims = append(dra.Claims, devicestest.Held(ns, "w0-gpu", "n1", "gpu-0", "w0"), devicestest.Held(ns, "w1-gpu", "n1", "gpu-1", "w1"))
	g := newGroups()
	lateGang(t, g, deviceLauncher)
	g.placed[key("mpi")] = 2
	g.reserved.Insert("w1")
	h := NewWithModel(klog.Background(), g, handle{snapshot: cache.NewSnapshot(nil, nodes), events: events.NewFakeRecorder(10), dra: dra},
		testingclock.NewFakeClock(time.Time{}))
	status := h.Reserve(context.Background(), recorded(h, member("mpi", "worker", "w1", "1")), member("mpi", "worker", "w1", "1"), "n1")
	assert.Equal(t, fwk.Unschedulable, status.Code(), "the attempt ends at once")
	assert.Contains(t, status.Message(), "late member launcher cannot be held: none of the 1 nodes it may run on has its requests (cpu: 1) and its devices free")
	assert.Nil(t, g.rooms.Held(key("mpi"), "launcher"), "a room was held without the device its member claims")
	assert.Empty(t, dra.PendingDevices())
}

func TestAPodClaimingDevicesWhileSomeAreHeldIsWokenWhenTheyAreReleased(t *testing.T) {
	h, g, _ := deviceRooms(t)
	activator := h.handle.(handle).activator
	claiming := plainPod("claiming", "1")
	claiming.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
	preFilter(t, h, claiming)
	preFilter(t, h, plainPod("cpu-only", "1"))
	require.Equal(t, 1, g.rooms.Release(key("mpi")))
	h.wakeTurnedAway(klog.Background())
	assert.Equal(t, []string{ns + "/claiming"}, activator.Activated)
}

// plainPod is a pod of no group asking for cpu.
func plainPod(name, cpu string) *corev1.Pod {
	return st.MakePod().Namespace(ns).Name(name).UID(name).Req(map[corev1.ResourceName]string{"cpu": cpu}).Obj()
}
