// Package heldrooms implements the HeldRooms scheduler plugin, which keeps
// room that gangs need from pods that would take it:
//
//   - it owns the whole life of the room held for a gang's late member
//     (groupstate.Rooms, late.go): Reserve holds it as the member that completes
//     the gang with it is reserved, PreFilter holds it again after a
//     restart, a timer releases it when the member does not come. The room
//     is that member's: PreFilter pins the member to it, Filter keeps every
//     other pod out, Reserve hands it to the member and Unreserve gives it
//     back when the member fails to bind;
//   - an elastic group's members above its min take only room no gang
//     waiting for its min (topology.WaitingForRoom) could use.
package heldrooms

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/clock"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = "HeldRooms"

var (
	_ fwk.PreFilterPlugin   = &HeldRooms{}
	_ fwk.FilterPlugin      = &HeldRooms{}
	_ fwk.ReservePlugin     = &HeldRooms{}
	_ fwk.EnqueueExtensions = &HeldRooms{}
)

// HeldRooms keeps held room for the gangs it is held for.
type HeldRooms struct {
	handle fwk.Handle
	groups Groups
	clock  clock.WithDelayedExecution
	// turned are the pods Filter kept off a node for a gang, and pods
	// that claim devices while some are held.
	turned *turnedAway
	// devices are the devices held with late members' rooms.
	devices *heldDevices
}

// Groups is what HeldRooms reads of the scheduler's groups: the group
// model, or a table in unit tests.
type Groups interface {
	// Rooms is the room held for gangs' late members.
	Rooms() *groupstate.Rooms
	// IsAdmitted reports whether the group's gang is admitted.
	IsAdmitted(key types.NamespacedName) bool
	// IsReserved reports whether the member holds a reservation.
	IsReserved(key types.NamespacedName, uid types.UID) bool
	// ElasticFulfillment says whether the pod is a member above an
	// admitted elastic group's min.
	ElasticFulfillment(key types.NamespacedName, pg *v1alpha1.PodGroup) (score float64, extra bool)
	// WaitingForRoom lists the gangs waiting for room.
	WaitingForRoom() map[types.NamespacedName]topology.WaitingGang
	// Topology is the group's topology, nil when it has no PodGroup.
	Topology(key types.NamespacedName) (*topology.Topology, error)
	// PodGroup is the group's PodGroup, nil when it has none.
	PodGroup(key types.NamespacedName) *v1alpha1.PodGroup
	// LateMembers is where the group's late members stand.
	LateMembers(key types.NamespacedName) group.LateMembers
	LateMembersOf(key types.NamespacedName, topo *topology.Topology) group.LateMembers
	// Quorum counts the gang's members toward its minMember.
	Quorum(key types.NamespacedName, minMember int32, counting groupstate.Counting) (placed int32, reached bool)
	// BoundCount is how many of the group's active members are bound.
	BoundCount(key types.NamespacedName) int32
	// BoundNode is a node a member of the group is bound to.
	BoundNode(key types.NamespacedName) (string, bool)
	// Attempts holds the topology domain chosen for a gang's attempt.
	Attempts() *groupstate.Attempts
	// ScheduleTimeout is how long room is held for late members.
	ScheduleTimeout(pg *v1alpha1.PodGroup) time.Duration
	// OnPodChange tells the plugin of pod events.
	OnPodChange(handler func(group.PodChange))
	// OnPodGroupChange tells the plugin of PodGroup events.
	OnPodGroupChange(handler cache.ResourceEventHandler)
}

// New builds the plugin over the scheduler's group model; it takes no
// args.
func New(ctx context.Context, _ runtime.Object, handle fwk.Handle, groups *group.Model) (fwk.Plugin, error) {
	return NewWithModel(klog.FromContext(ctx).WithValues("plugin", Name), groups, handle, clock.RealClock{}), nil
}

// NewWithModel builds the plugin over the groups, with the framework's
// handle and a clock; unit tests build it this way.
func NewWithModel(logger klog.Logger, groups Groups, handle fwk.Handle, clk clock.WithDelayedExecution) *HeldRooms {
	var dra fwk.SharedDRAManager
	if handle != nil { // unit tests of rooms without devices need none
		dra = handle.SharedDRAManager()
	}
	h := &HeldRooms{handle: handle, groups: groups, clock: clk, turned: newTurnedAway(),
		devices: newHeldDevices(dra, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))}
	groups.OnPodChange(h.podChanged)
	groups.Rooms().OnEnd(func(key types.NamespacedName, why groupstate.RoomsEnd) { h.releaseGroup(logger, key, why) })
	groups.OnPodGroupChange(cache.ResourceEventHandlerFuncs{
		// A deleted gang's rooms are released, and it waits for room no more.
		DeleteFunc: func(any) { h.wakeTurnedAway(logger) },
	})
	return h
}

// releaseGroup releases the group's rooms, as every release of a group's
// rooms goes, and returns how many there were. The pods Filter kept off
// their nodes go back to the queue.
func (h *HeldRooms) releaseGroup(logger klog.Logger, key types.NamespacedName, why groupstate.RoomsEnd) int {
	released := h.groups.Rooms().Release(key)
	if released > 0 {
		logger.V(2).Info("Released the room held for late members", "podGroup", key, "rooms", released, "why", why)
		h.wakeTurnedAway(logger)
	}
	return released
}

// wakeTurnedAway moves the pods Filter kept off a node for a gang back to
// the queue: the gang's room is free.
func (h *HeldRooms) wakeTurnedAway(logger klog.Logger) {
	if pods := h.turned.take(); len(pods) > 0 {
		h.handle.Activate(logger, pods)
	}
}

// Name returns the plugin's name.
func (h *HeldRooms) Name() string { return Name }

// pinnedKey is where PreFilter leaves, for Filter, the node of the room
// held for the cycle's late member.
const pinnedKey fwk.StateKey = Name + "/pinned"

type pinned string

func (p pinned) Clone() fwk.StateData { return p }

// elasticHoldKey is where PreFilter leaves, for Filter, the gangs an
// elastic group's member above its min leaves room to.
const elasticHoldKey fwk.StateKey = Name + "/elastic-hold"

// elasticHold is the gangs waiting for room that keep room from the pod
// (topology.WaitingGang: its priority rule, and the nodes could hold it).
type elasticHold map[types.NamespacedName]topology.WaitingGang

func (e elasticHold) Clone() fwk.StateData { return e }

// PreFilter holds again the late rooms a restarted scheduler lost, sends a
// late member to the room held for it, with the devices held for it, and,
// for a member above an admitted elastic group's min, notes the gangs
// waiting for room, once per cycle. It runs before DynamicResources'
// PreFilter, which reads the devices allocated (devices.go).
func (h *HeldRooms) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	h.restore(ctx, nodes)
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	key, grouped := cycle.Key, cycle.Grouped
	var room *groupstate.Room
	if role, ok := topology.RoleOf(pod); ok && grouped {
		room = h.groups.Rooms().Held(key, role)
		if room != nil && !mayUse(pod, room, nodes) {
			h.release(ctx, pod, room)
			room = nil
		}
	}
	h.devices.sync(klog.FromContext(ctx), h.groups.Rooms().WithDevices(), room)
	if len(pod.Spec.ResourceClaims) > 0 && h.devices.holds() {
		// DynamicResources may turn it away for want of a held device: it
		// is woken when the room is released.
		h.turned.add(pod)
	}
	if !grouped {
		// Filter still keeps it out of held rooms.
		return nil, nil
	}
	if room != nil {
		state.Write(pinnedKey, pinned(room.Node))
		return &fwk.PreFilterResult{NodeNames: sets.New(room.Node)}, nil
	}
	if _, extra := h.groups.ElasticFulfillment(key, cycle.PodGroup); extra {
		if hold := h.waitingGangs(corev1helpers.PodPriority(pod), nodes); len(hold) > 0 {
			state.Write(elasticHoldKey, hold)
		}
	}
	return nil, nil
}

// mayUse reports whether the late member may run on its room's node, by
// its own node selector, required node affinity and tolerations. The room
// was held from its pod template before it existed; the pod may since
// have been placed elsewhere, by Kueue's topology scheduling say.
func mayUse(pod *corev1.Pod, room *groupstate.Room, nodes []fwk.NodeInfo) bool {
	for _, n := range nodes {
		if n.Node() != nil && n.Node().Name == room.Node {
			return topology.MayRunOn(pod, n.Node())
		}
	}
	return false
}

// release gives up the room held for the late member, which may not use
// it, with a Normal event: the member is scheduled where it may run, as
// any member, and the room is free for other pods.
func (h *HeldRooms) release(ctx context.Context, pod *corev1.Pod, room *groupstate.Room) {
	logger := klog.FromContext(ctx)
	h.groups.Rooms().Take(room.Group, room.Role)
	logger.V(2).Info("Released a late member's room on a node it may not run on", "podGroup", room.Group, "pod", klog.KObj(pod), "node", room.Node)
	h.wakeTurnedAway(logger)
	if pg := h.groups.PodGroup(room.Group); pg != nil {
		group.RecordEvent(h.handle, pg, corev1.EventTypeNormal, RoomReleasedReason, "Release",
			fmt.Sprintf("late member %s may not run on node %s, where its room was held (its node selector or affinity excludes it); released the room, and the member is scheduled where it may run", pod.Name, room.Node))
	}
}

// waitingGangs returns the gangs waiting for room that keep room from an
// elastic group's members of the given priority, and that the nodes could
// hold.
func (h *HeldRooms) waitingGangs(priority int32, nodes []fwk.NodeInfo) elasticHold {
	hold := elasticHold{}
	var cluster []*corev1.Node
	for key, gang := range h.groups.WaitingForRoom() {
		if !gang.KeepsRoomFrom(priority) {
			continue
		}
		if cluster == nil {
			for _, n := range nodes {
				cluster = append(cluster, n.Node())
			}
		}
		if gang.CouldHold(cluster) {
			hold[key] = gang
		}
	}
	return hold
}

// PreFilterExtensions returns nil: the cycle's state does not depend on
// other pods being added or removed.
func (h *HeldRooms) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a late member to the room held for it, every other pod out
// of the room held on a node for another gang's late members, and an
// elastic group's members above its min off a node a gang waiting for its
// min could use.
func (h *HeldRooms) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	// PreFilter's result already says so, but a nominated node or a batch's
	// node hint is tried before, and without, that result.
	if data, err := state.Read(pinnedKey); err == nil && string(data.(pinned)) != node.Name {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("the member's room is held on node %s", data.(pinned)))
	}
	if waiting, ok := gangWaitingOn(state, node); ok {
		h.turned.add(pod)
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf(
			"room on the node is kept for gang %s, which waits for its min: members above an elastic group's min take only room no gang needs", waiting))
	}
	// Read from the cycle (groupstate.Cycle): Filter runs on every node. A pod
	// of no group has the zero key.
	key, _, err := groupstate.KeyIn(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	role, _ := topology.RoleOf(pod)
	held, groups := h.groups.Rooms().HeldOn(node.Name, key, role)
	if held == nil || resources.FitsBeside(resources.OfPod(pod), held, nodeInfo) {
		return nil
	}
	h.turned.add(pod)
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("room on the node is held for the members %v will create later", groups))
}

// gangWaitingOn finds a gang of the cycle's hold that may use the node
// (topology.WaitingGang.MayUse): the elastic group's member leaves it the
// room there.
func gangWaitingOn(state fwk.CycleState, node *corev1.Node) (types.NamespacedName, bool) {
	data, err := state.Read(elasticHoldKey)
	if err != nil {
		return types.NamespacedName{}, false
	}
	for key, gang := range data.(elasticHold) {
		if gang.MayUse(node) {
			return key, true
		}
	}
	return types.NamespacedName{}, false
}

// takenKey is where Reserve leaves, for Unreserve, the room its late
// member took.
const takenKey fwk.StateKey = Name + "/taken"

type taken struct{ room *groupstate.Room }

func (t taken) Clone() fwk.StateData { return t }

// Reserve hands a late member the room held for it, or, when the member
// completes its gang with the room of the members to come, holds that
// room: Gang's Permit then admits the gang.
func (h *HeldRooms) Reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if !cycle.Grouped {
		return nil
	}
	key := cycle.Key
	if role, ok := topology.RoleOf(pod); ok {
		if room := h.groups.Rooms().Take(key, role); room != nil {
			state.Write(takenKey, taken{room: room})
			return nil
		}
	}
	if why := h.holdForGang(ctx, cycle, pod, nodeName); why != "" {
		// The gang would wait at Permit for room that is not there: its
		// attempt ends now, told why (Gang's Unreserve).
		state.Write(groupstate.AttemptFailedKey, &groupstate.AttemptFailed{Reason: why})
		return fwk.NewStatus(fwk.Unschedulable, why)
	}
	return nil
}

// Unreserve gives a late member's room back when the member fails to bind
// and its gang is still admitted: the member retries into it. A gang torn
// down has released its rooms.
func (h *HeldRooms) Unreserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) {
	data, err := state.Read(takenKey)
	if err != nil {
		return
	}
	room := data.(taken).room
	if h.groups.IsAdmitted(room.Group) {
		h.groups.Rooms().Add(room)
	}
}
