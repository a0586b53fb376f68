package heldrooms

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// A gang whose owner creates some members only after others are Ready,
// such as mpi-operator's launcher under WaitForWorkersReady, is admitted
// with room held for them. HeldRooms holds it as the member that completes
// the gang with it is reserved, holds it again after a restart, releases
// it when the late members do not come within the schedule timeout, and
// keeps every other pod out of it (heldrooms.go). A failed attempt gives
// it up with the gang's reservations (groupstate.Attempts.Fail).

// holdForGang holds the room of the gang's late members when the member
// just reserved (self, on selfNode) completes the gang with them, and
// starts the rooms' expiry. It says why when their room cannot be held.
func (h *HeldRooms) holdForGang(ctx context.Context, cycle *groupstate.Cycle, self *corev1.Pod, selfNode string) string {
	logger := klog.FromContext(ctx)
	key, pg := cycle.Key, cycle.PodGroup
	if pg == nil || cycle.TopologyErr != nil {
		return ""
	}
	late := h.groups.LateMembersOf(key, cycle.Topology)
	if late.Total() == 0 || h.groups.IsAdmitted(key) {
		return ""
	}
	placed, _ := h.groups.Quorum(key, pg.Spec.MinMember, groupstate.Counting{HeldRooms: true})
	// Gang's Reserve counts the member, unless a profile runs HeldRooms'
	// first.
	if !h.groups.IsReserved(key, self.UID) {
		placed++
	}
	quorum := cycle.Quorum()
	if quorum.ReachedBy(placed) || !quorum.EnoughMembers(placed, late.Total()-h.groups.Rooms().Count(key, "")) {
		return ""
	}
	nodes, err := h.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		logger.Error(err, "Listing nodes to hold room for late members", "podGroup", key)
		return ""
	}
	why := h.hold(ctx, key, late.Missing, nodes, self, selfNode)
	if why == "" {
		h.expire(logger, pg)
	}
	return why
}

// restore holds again the rooms of admitted gangs whose late members are
// still to come, for the groups marked by Rooms.Check: a restarted
// scheduler lost them with its memory. A gang counts as admitted when its
// bound members and its late members to come make its minMember. It runs
// at PreFilter, inside a scheduling cycle, so that the nodes are current
// and the rooms are back before any other pod is filtered.
func (h *HeldRooms) restore(ctx context.Context, nodes []fwk.NodeInfo) {
	logger := klog.FromContext(ctx)
	for _, key := range h.groups.Rooms().ToCheck() {
		pg := h.groups.PodGroup(key)
		late := h.groups.LateMembers(key)
		if pg == nil || late.Total() == 0 || late.Came || h.groups.Rooms().Count(key, "") > 0 {
			continue
		}
		if bound := h.groups.BoundCount(key); bound == 0 || !topology.QuorumOf(pg).EnoughMembers(bound, late.Total()) {
			continue
		}
		if why := h.hold(ctx, key, late.Missing, nodes, nil, ""); why == "" {
			logger.V(2).Info("Held again the room of late members of an admitted gang", "podGroup", key)
			h.expire(logger, pg)
		} else {
			logger.V(2).Info("Could not hold again the room of late members of an admitted gang", "podGroup", key, "reason", why)
		}
	}
}

// hold holds room for every late member not yet created nor held, each on
// a node where it fits beside everything placed and held, or says why it
// could not; it holds none when it cannot hold all. self is the member
// reserved on selfNode, which the cycle's nodes do not count yet. The
// devices a late member claims are held with its room.
func (h *HeldRooms) hold(ctx context.Context, key types.NamespacedName, missing map[string]int32, nodes []fwk.NodeInfo, self *corev1.Pod, selfNode string) string {
	logger := klog.FromContext(ctx)
	topo, err := h.groups.Topology(key)
	if err != nil {
		return fmt.Sprintf("the room of group %s's late members cannot be held: its topology cannot be read: %v", key, err)
	}
	if topo == nil {
		// The PodGroup is gone: nothing to hold room for.
		return ""
	}
	var devices *devices.Room
	if claimsDevices(topo, missing) {
		if devices, err = h.devices.room(); err != nil {
			logger.Error(err, "Reading the devices to hold for late members", "podGroup", key)
			return fmt.Sprintf("the room of group %s's late members cannot be held: reading the devices failed: %v", key, err)
		}
	}
	nodes = slices.DeleteFunc(slices.Clone(nodes), func(n fwk.NodeInfo) bool { return n.Node() == nil })
	if topo.DomainKey != "" {
		anchor := selfNode
		if anchor == "" {
			anchor, _ = h.groups.BoundNode(key)
		}
		nodes = inDomainOf(nodes, topo.DomainKey, anchor)
	}
	// The member's own node first: a launcher beside its workers; then the
	// nodes of the domain the gang's attempt prefers (Placement).
	preferred := func(fwk.NodeInfo) bool { return true }
	if d, chosen := h.groups.Attempts().Domain(key); chosen && d.Preferred != "" {
		preferred = func(n fwk.NodeInfo) bool { return n.Node().Labels[topo.PreferredDomainKey] == d.Preferred }
	}
	slices.SortStableFunc(nodes, func(a, b fwk.NodeInfo) int {
		return cmp.Or(boolOrder(a.Node().Name != selfNode)-boolOrder(b.Node().Name != selfNode),
			boolOrder(!preferred(a))-boolOrder(!preferred(b)))
	})
	rooms := h.groups.Rooms()
	var held []*groupstate.Room
	for _, role := range slices.Sorted(maps.Keys(missing)) {
		late := topo.Late[role]
		for range missing[role] - rooms.Count(key, role) {
			r := h.findRoom(ctx, nodes, key, role, late, devices, self, selfNode)
			if r == nil {
				for _, r := range held {
					rooms.Take(key, r.Role)
				}
				return fmt.Sprintf("the room of group %s's late member %s cannot be held: %s", key, role, noRoomReason(nodes, late))
			}
			r.HeldSince = h.clock.Now()
			rooms.Add(r)
			held = append(held, r)
			logger.V(2).Info("Holding room for a late member", "podGroup", key, "role", role, "node", r.Node, "devices", len(r.Devices))
		}
	}
	h.devices.sync(logger, rooms.WithDevices(), nil)
	return ""
}

// noRoomReason says why findRoom found no room for the late member on
// the nodes: none it may run on, none of those with its requests free, or
// none of those with its devices free too.
func noRoomReason(nodes []fwk.NodeInfo, late topology.LateMember) string {
	pod := late.Pod()
	var mayRun int
	for _, node := range nodes {
		if topology.MayRunOn(pod, node.Node()) {
			mayRun++
		}
	}
	switch {
	case mayRun == 0:
		return fmt.Sprintf("no node of the %d it could use matches its node selector, node affinity and tolerations", len(nodes))
	case len(late.Devices) == 0:
		return fmt.Sprintf("none of the %d nodes it may run on has its requests (%s) free beside what is placed and held", mayRun, describe(late.Requests))
	}
	return fmt.Sprintf("none of the %d nodes it may run on has its requests (%s) and its devices free beside what is placed and held", mayRun, describe(late.Requests))
}

// describe lists the requests, "cpu: 1, memory: 1Gi".
func describe(requests corev1.ResourceList) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(requests)) {
		q := requests[name]
		parts = append(parts, fmt.Sprintf("%s: %s", name, q.String()))
	}
	return strings.Join(parts, ", ")
}

// claimsDevices reports whether a missing late member claims devices.
func claimsDevices(topo *topology.Topology, missing map[string]int32) bool {
	for role, n := range missing {
		if n > 0 && len(topo.Late[role].Devices) > 0 {
			return true
		}
	}
	return false
}

// findRoom returns room on a node that the late member's pod template lets
// it use (its node selector, required node affinity and tolerations) where
// its requests fit beside what is placed and held, and its devices, in
// available, beside those allocated and held; nil when there is none.
func (h *HeldRooms) findRoom(ctx context.Context, nodes []fwk.NodeInfo, key types.NamespacedName, role string, late topology.LateMember, available *devices.Room, self *corev1.Pod, selfNode string) *groupstate.Room {
	pod := late.Pod()
	for _, node := range nodes {
		if !topology.MayRunOn(pod, node.Node()) {
			continue
		}
		held, _ := h.groups.Rooms().HeldOn(node.Node().Name, types.NamespacedName{}, "")
		if self != nil && node.Node().Name == selfNode {
			held = resources.Add(held, resources.OfPod(self), 1)
		}
		if !resources.FitsBeside(late.Requests, held, node) {
			continue
		}
		if devices, ok := allocate(ctx, available, node.Node(), key, role, late.Devices); ok {
			return &groupstate.Room{Group: key, Role: role, Node: node.Node().Name, Request: late.Requests, Devices: devices}
		}
	}
	return nil
}

// inDomainOf keeps the nodes in the topology domain of the anchor node, a
// member's: a gang that must stay in one domain holds its late members'
// room there too. None when the anchor is not among the nodes or lacks
// the label.
func inDomainOf(nodes []fwk.NodeInfo, label, anchor string) []fwk.NodeInfo {
	i := slices.IndexFunc(nodes, func(n fwk.NodeInfo) bool { return n.Node().Name == anchor })
	if i < 0 {
		return nil
	}
	domain, ok := nodes[i].Node().Labels[label]
	if !ok {
		return nil
	}
	return slices.DeleteFunc(nodes, func(n fwk.NodeInfo) bool {
		value, labeled := n.Node().Labels[label]
		return !labeled || value != domain
	})
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// expire releases a gang's rooms, with a Warning event, when its late
// members have not come within its schedule timeout.
func (h *HeldRooms) expire(logger klog.Logger, pg *v1alpha1.PodGroup) {
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	timeout := h.groups.ScheduleTimeout(pg)
	h.groups.Rooms().Expire(key, h.clock.Now().Add(timeout))
	h.clock.AfterFunc(timeout, func() {
		if released := h.releaseGroup(logger, key, groupstate.LateMembersMissing); released > 0 {
			group.RecordEvent(h.handle, pg, corev1.EventTypeWarning, gangview.ReasonLateMemberMissing, "Release",
				fmt.Sprintf("%d late members were not created within %s of the gang's admission; released the room held for them", released, timeout))
		}
	})
}

// podChanged forgets a turned-away pod once it is bound or gone, and marks
// the late rooms of a gang whose member is found bound for holding again
// at the next PreFilter: the member was bound before this scheduler
// started, which may have lost the rooms with its memory. It releases the
// rooms of a gang whose last bound member has gone (gangGone).
func (h *HeldRooms) podChanged(change group.PodChange) {
	if change.Deleted || change.Pod.Spec.NodeName != "" {
		h.turned.forget(change.Pod.UID)
	}
	if change.Grouped && !change.Deleted && change.Old == nil && change.Pod.Spec.NodeName != "" && topology.IsActiveMember(change.Pod) {
		h.groups.Rooms().Check(change.Key)
	}
	h.gangGone(change)
}

// gangGone releases the rooms of a gang's late members once its last bound
// member has gone (deleted, being deleted, or finished), with a Normal
// event: a gang evicted whole, by Kueue say, or deleted with its job, has
// no member for its late ones to join, and the room it held would
// otherwise stay closed to every other pod until its schedule timeout.
func (h *HeldRooms) gangGone(change group.PodChange) {
	if !change.Grouped || change.Pod.Spec.NodeName == "" || (!change.Deleted && topology.IsActiveMember(change.Pod)) {
		return
	}
	if h.groups.BoundCount(change.Key) > 0 {
		return
	}
	logger := klog.Background().WithValues("plugin", Name, "lastMember", klog.KObj(change.Pod))
	released := h.releaseGroup(logger, change.Key, groupstate.GangGone)
	if released == 0 {
		return
	}
	if pg := h.groups.PodGroup(change.Key); pg != nil {
		group.RecordEvent(h.handle, pg, corev1.EventTypeNormal, RoomReleasedReason, "Release",
			fmt.Sprintf("the gang's last bound member %s has gone; released the room held for %d late members", change.Pod.Name, released))
	}
}

// RoomReleasedReason is the reason of the Normal event recorded when a
// late member's room is released before its time: its gang has gone
// (gangGone), or the member may not run where it was held (release).
const RoomReleasedReason = gangview.ReasonLateMemberRoomReleased
