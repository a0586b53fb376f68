package gang

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// A gang whose owner creates some members only after others are Ready,
// such as mpi-operator's launcher under WaitForWorkersReady, is admitted
// with room held for them (group.Rooms); HeldRooms keeps that room theirs.

// missingLate returns, for each role whose members its owner creates late,
// how many of them do not exist yet.
func (g *Gang) missingLate(key types.NamespacedName) map[string]int32 {
	topo, err := g.groups.Topology(key)
	if err != nil || topo == nil || len(topo.Late) == 0 {
		return nil
	}
	active := map[string]int32{}
	for role := range topo.Late {
		active[role] = g.groups.Role(key, role).Active
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
	var held []*group.Room
	for _, role := range slices.Sorted(maps.Keys(missing)) {
		late := topo.Late[role]
		for range missing[role] - g.rooms.Count(key, role) {
			room := g.findRoom(nodes, late, self, selfNode)
			if room == "" {
				for _, r := range held {
					g.rooms.Take(key, r.Role)
				}
				return false
			}
			r := &group.Room{Group: key, Role: role, Node: room, Request: late.Requests}
			g.rooms.Add(r)
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
		held, _ := g.rooms.HeldOn(node.Node().Name, types.NamespacedName{}, "")
		if self != nil && node.Node().Name == selfNode {
			held = resources.Add(held, resources.OfPod(self), 1)
		}
		if resources.FitsBeside(late.Requests, held, node) {
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
// members are still to come, for the groups marked by Rooms.Check: a
// restarted scheduler lost them with its memory. A gang counts as admitted
// when its bound members and its late members to come make its minMember.
// It runs at PreFilter, inside a scheduling cycle, so that the snapshot is
// current and the rooms are back before any other pod is filtered.
func (g *Gang) restoreLateRooms(logger klog.Logger) {
	for _, key := range g.rooms.ToCheck() {
		pg := g.podGroup(key)
		missing := g.missingLate(key)
		if pg == nil || total(missing) == 0 || g.rooms.Count(key, "") > 0 || g.lateMemberCame(key) {
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
	for role := range topo.Late {
		if g.groups.Role(key, role).Any > 0 {
			return true
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
		if released := g.rooms.Release(key); released > 0 {
			logger.V(2).Info("Released the room of late members that did not come", "podGroup", key, "rooms", released)
			g.recordEvent(pg, corev1.EventTypeWarning, "LateMemberMissing", "Release",
				fmt.Sprintf("%d late members were not created within %s of the gang's admission; released the room held for them", released, timeout))
		}
	})
}
