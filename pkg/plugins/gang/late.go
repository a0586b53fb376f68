package gang

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// lateRoom is room held on a node for a member of a gang that its owner
// creates only after others are Ready, such as mpi-operator's launcher
// under WaitForWorkersReady: the gang is admitted with it, and the member
// is bound into it when it comes.
type lateRoom struct {
	group   types.NamespacedName
	role    string
	node    string
	request corev1.ResourceList
}

// lateRooms holds the rooms of every gang. The Filter of every pod reads
// it, so an empty one costs a map lookup.
type lateRooms struct {
	mu      sync.RWMutex
	byNode  map[string][]*lateRoom
	byGroup map[types.NamespacedName][]*lateRoom
	// unchecked holds groups whose bound members the scheduler found
	// without having bound them, as after a restart: their rooms, held in
	// memory, may have to be held again.
	unchecked sets.Set[types.NamespacedName]
}

func newLateRooms() *lateRooms {
	return &lateRooms{byNode: map[string][]*lateRoom{}, byGroup: map[types.NamespacedName][]*lateRoom{}, unchecked: sets.New[types.NamespacedName]()}
}

// check marks a group whose rooms may have to be held again.
func (l *lateRooms) check(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unchecked.Insert(key)
}

// toCheck returns, and forgets, the groups marked by check. Every
// PreFilter asks, so the common answer, none, takes only a read lock.
func (l *lateRooms) toCheck() []types.NamespacedName {
	l.mu.RLock()
	none := l.unchecked.Len() == 0
	l.mu.RUnlock()
	if none {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := l.unchecked.UnsortedList()
	l.unchecked.Clear()
	return keys
}

func (l *lateRooms) add(r *lateRoom) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byNode[r.node] = append(l.byNode[r.node], r)
	l.byGroup[r.group] = append(l.byGroup[r.group], r)
}

// count returns how many rooms the group holds for role, or for every role
// when role is "".
func (l *lateRooms) count(key types.NamespacedName, role string) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int32
	for _, r := range l.byGroup[key] {
		if role == "" || r.role == role {
			n++
		}
	}
	return n
}

// node returns the node of a room the group holds for role.
func (l *lateRooms) node(key types.NamespacedName, role string) (string, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, r := range l.byGroup[key] {
		if r.role == role {
			return r.node, true
		}
	}
	return "", false
}

// take removes one room the group holds for role, as its member is
// placed, and returns it; nil when the group holds none for role.
func (l *lateRooms) take(key types.NamespacedName, role string) *lateRoom {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.byGroup[key], func(r *lateRoom) bool { return r.role == role })
	if i < 0 {
		return nil
	}
	r := l.byGroup[key][i]
	l.removeUnlocked(r)
	return r
}

// takenRoomKey is where Reserve leaves, for Unreserve, the room its late
// member took: a member that fails to bind gives it back.
const takenRoomKey fwk.StateKey = Name + "/taken-room"

// takenRoom is the room a late member took at Reserve.
type takenRoom struct{ room *lateRoom }

func (t takenRoom) Clone() fwk.StateData { return t }

// release removes every room of the group and returns how many there were.
func (l *lateRooms) release(key types.NamespacedName) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	rooms := slices.Clone(l.byGroup[key])
	for _, r := range rooms {
		l.removeUnlocked(r)
	}
	return len(rooms)
}

func (l *lateRooms) removeUnlocked(r *lateRoom) {
	remove := func(rooms []*lateRoom) []*lateRoom {
		return slices.DeleteFunc(rooms, func(other *lateRoom) bool { return other == r })
	}
	if l.byNode[r.node] = remove(l.byNode[r.node]); len(l.byNode[r.node]) == 0 {
		delete(l.byNode, r.node)
	}
	if l.byGroup[r.group] = remove(l.byGroup[r.group]); len(l.byGroup[r.group]) == 0 {
		delete(l.byGroup, r.group)
	}
}

// heldOn sums the rooms held on a node, but those of the given group and
// role, which its own member may use.
func (l *lateRooms) heldOn(node string, except types.NamespacedName, exceptRole string) (*framework.Resource, []types.NamespacedName) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	rooms := l.byNode[node]
	if len(rooms) == 0 {
		return nil, nil
	}
	held := &framework.Resource{}
	var groups []types.NamespacedName
	for _, r := range rooms {
		if r.group == except && r.role == exceptRole {
			continue
		}
		held.Add(r.request)
		if !slices.Contains(groups, r.group) {
			groups = append(groups, r.group)
		}
	}
	return held, groups
}

// fits reports whether request fits in what is free on the node once held
// is set aside.
func fits(node fwk.NodeInfo, held, request *framework.Resource) bool {
	alloc, used := node.GetAllocatable(), node.GetRequested()
	if request.MilliCPU > alloc.GetMilliCPU()-used.GetMilliCPU()-held.MilliCPU ||
		request.Memory > alloc.GetMemory()-used.GetMemory()-held.Memory ||
		request.EphemeralStorage > alloc.GetEphemeralStorage()-used.GetEphemeralStorage()-held.EphemeralStorage {
		return false
	}
	for name, quantity := range request.ScalarResources {
		if quantity > alloc.GetScalarResources()[name]-used.GetScalarResources()[name]-held.ScalarResources[name] {
			return false
		}
	}
	return true
}

// heldRoomKey is where PreFilter leaves, for Filter, the node of the room
// held for a late member.
const heldRoomKey fwk.StateKey = Name + "/held-room"

// heldRoom is the node of the room held for the cycle's late member.
type heldRoom string

func (h heldRoom) Clone() fwk.StateData { return h }

// heldRoomOf returns the node PreFilter pinned the cycle's pod to, if any.
func heldRoomOf(state fwk.CycleState) (string, bool) {
	data, err := state.Read(heldRoomKey)
	if err != nil {
		return "", false
	}
	return string(data.(heldRoom)), true
}

// Filter keeps a late member to the room held for it, every other pod out
// of the room held on a node for another gang's late members, and an
// elastic group's members above its min off a node a gang waiting for its
// min could use.
func (g *Gang) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	// PreFilter's result already says so, but a nominated node or a batch's
	// node hint is tried before, and without, that result.
	if node, pinned := heldRoomOf(state); pinned && node != nodeInfo.Node().Name {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("the member's room is held on node %s", node))
	}
	if waiting, ok := gangWaitingForRoom(state, nodeInfo.Node()); ok {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf(
			"room on the node is kept for gang %s, which waits for its min: members above an elastic group's min take only room no gang needs", waiting))
	}
	key, _ := topology.GroupOf(pod)
	role, _ := topology.RoleOf(pod)
	held, groups := g.late.heldOn(nodeInfo.Node().Name, key, role)
	if held == nil || fits(nodeInfo, held, framework.NewResource(resources.OfPod(pod))) {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("room on the node is held for the members %v will create later", groups))
}

// missingLate returns, for each role whose members its owner creates late,
// how many of them do not exist yet.
func (g *Gang) missingLate(key types.NamespacedName) map[string]int32 {
	topo, err := g.groups.Topology(key)
	if err != nil || topo == nil || len(topo.Late) == 0 {
		return nil
	}
	pods, err := g.groups.Members(key)
	if err != nil {
		return nil
	}
	active := map[string]int32{}
	for _, pod := range pods {
		if role, ok := topology.RoleOf(pod); ok && topology.IsActiveMember(pod) {
			active[role]++
		}
	}
	return topo.MissingLate(active)
}

func total(counts map[string]int32) int32 {
	var n int32
	for _, c := range counts {
		n += c
	}
	return n
}

// holdLateRooms holds room for every late member not yet created nor held,
// each on a node where it fits beside everything placed and held, and
// reports whether it could. self is the member at Permit on node, which the
// cycle's snapshot does not count yet.
func (g *Gang) holdLateRooms(logger klog.Logger, key types.NamespacedName, missing map[string]int32, self *corev1.Pod, selfNode string) bool {
	topo, err := g.groups.Topology(key)
	if err != nil || topo == nil {
		return false
	}
	nodes, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return false
	}
	nodes = slices.DeleteFunc(nodes, func(n fwk.NodeInfo) bool { return n.Node() == nil })
	// The member's own node first: a launcher beside its workers.
	slices.SortStableFunc(nodes, func(a, b fwk.NodeInfo) int {
		return boolOrder(a.Node().Name != selfNode) - boolOrder(b.Node().Name != selfNode)
	})
	var held []*lateRoom
	for _, role := range slices.Sorted(maps.Keys(missing)) {
		late := topo.Late[role]
		for range missing[role] - g.late.count(key, role) {
			room := g.findRoom(nodes, late, self, selfNode)
			if room == "" {
				for _, r := range held {
					g.late.take(key, r.role)
				}
				return false
			}
			r := &lateRoom{group: key, role: role, node: room, request: late.Requests}
			g.late.add(r)
			held = append(held, r)
			logger.V(2).Info("Holding room for a late member", "podGroup", key, "role", role, "node", room)
		}
	}
	return true
}

// findRoom returns a node that the late member's pod template lets it use
// (its node selector, required node affinity and tolerations) where its
// requests fit beside what is placed and held, or "". self is the member
// at Permit on selfNode, which the cycle's snapshot does not count yet.
func (g *Gang) findRoom(nodes []fwk.NodeInfo, late topology.LateMember, self *corev1.Pod, selfNode string) string {
	pod := late.Pod()
	for _, node := range nodes {
		if !topology.MayRunOn(pod, node.Node()) {
			continue
		}
		held, _ := g.late.heldOn(node.Node().Name, types.NamespacedName{}, "")
		if held == nil {
			held = &framework.Resource{}
		}
		if self != nil && node.Node().Name == selfNode {
			held.Add(resources.OfPod(self))
		}
		if fits(node, held, framework.NewResource(late.Requests)) {
			return node.Node().Name
		}
	}
	return ""
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// restoreLateRooms holds again the rooms of admitted gangs whose late
// members are still to come, for the groups marked by lateRooms.check: a
// restarted scheduler lost them with its memory. A gang counts as admitted
// when its bound members and its late members to come make its minMember.
// It runs at PreFilter, inside a scheduling cycle, so that the snapshot is
// current and the rooms are back before any other pod is filtered.
func (g *Gang) restoreLateRooms(logger klog.Logger) {
	for _, key := range g.late.toCheck() {
		pg := g.podGroup(key)
		missing := g.missingLate(key)
		if pg == nil || total(missing) == 0 || g.late.count(key, "") > 0 || g.lateMemberCame(key) {
			continue
		}
		if bound := g.groups.BoundCount(key); bound == 0 || bound+total(missing) < pg.Spec.MinMember {
			continue
		}
		if g.holdLateRooms(logger, key, missing, nil, "") {
			logger.V(2).Info("Held again the room of late members of an admitted gang", "podGroup", key)
			g.expireLateRooms(logger, pg)
		}
	}
}

// lateMemberCame reports whether a pod of a late role exists, in any
// phase: a launcher that has finished needs no room.
func (g *Gang) lateMemberCame(key types.NamespacedName) bool {
	topo, err := g.groups.Topology(key)
	if err != nil || topo == nil {
		return false
	}
	pods, err := g.groups.Members(key)
	if err != nil {
		return false
	}
	for _, pod := range pods {
		if role, ok := topology.RoleOf(pod); ok {
			if topo.IsLate(role) {
				return true
			}
		}
	}
	return false
}

// expireLateRooms releases a gang's rooms, with a Warning event, when its
// late members have not come within its schedule timeout.
func (g *Gang) expireLateRooms(logger klog.Logger, pg *v1alpha1.PodGroup) {
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	timeout := g.permitTimeout(pg)
	g.clock.AfterFunc(timeout, func() {
		if released := g.late.release(key); released > 0 {
			logger.V(2).Info("Released the room of late members that did not come", "podGroup", key, "rooms", released)
			g.recordEvent(pg, corev1.EventTypeWarning, "LateMemberMissing", "Release",
				fmt.Sprintf("%d late members were not created within %s of the gang's admission; released the room held for them", released, timeout))
		}
	})
}
