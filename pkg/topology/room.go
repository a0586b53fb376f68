package topology

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/muster-dev/muster/pkg/resources"
)

// LackingMembers are the unbound active members a gang needs to reach its
// minMember, the first by name: what room is made for. There are none when
// the gang has its minMember placed (Census.Placed: bound, or succeeded),
// or too few members to reach it at all.
func LackingMembers(minMember int32, members []*corev1.Pod) []*corev1.Pod {
	var census Census
	var unbound []*corev1.Pod
	for _, pod := range members {
		phase := PhaseOf(pod)
		census[phase]++
		if phase == MemberGated || phase == MemberPending {
			unbound = append(unbound, pod)
		}
	}
	lacking := Quorum{MinMember: minMember}.Short(census.Placed())
	if lacking == 0 || int32(len(unbound)) < lacking {
		return nil
	}
	slices.SortFunc(unbound, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return unbound[:lacking]
}

// WaitingForRoom is the one definition of a gang waiting for room, for
// the scheduler (an elastic group's members above its min keep off the
// room it could use) and the controller (elastic groups shrink for it)
// alike: every member it needs for its minMember exists, fewer than that
// are bound, and the scheduler has marked an unbound member Unschedulable,
// having found no room for it. It returns the members the gang lacks.
func WaitingForRoom(minMember int32, members []*corev1.Pod) ([]*corev1.Pod, bool) {
	lacking := LackingMembers(minMember, members)
	if len(lacking) == 0 {
		return nil, false
	}
	for _, pod := range members {
		if pod.Spec.NodeName == "" && IsActiveMember(pod) && markedUnschedulable(pod) {
			return lacking, true
		}
	}
	return nil, false
}

// UntriedMembers are the unbound active members of a gang that has every
// member it needs for its minMember, fewer than that bound, which the
// scheduler has not tried yet: no PodScheduled condition. Such a gang is
// about to take room, which is not idle for anyone else.
func UntriedMembers(minMember int32, members []*corev1.Pod) []*corev1.Pod {
	if len(LackingMembers(minMember, members)) == 0 {
		return nil
	}
	var untried []*corev1.Pod
	for _, pod := range members {
		if pod.Spec.NodeName == "" && IsActiveMember(pod) &&
			!slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled }) {
			untried = append(untried, pod)
		}
	}
	return untried
}

func markedUnschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// WaitingGang is a gang waiting for room (WaitingForRoom), with what it
// lacks for its min. What room it keeps, and from whom, is decided here
// alone, for muster-scheduler's HeldRooms and muster-controller's elastic
// scaler alike (docs/elastic.md):
//
//   - the priority rule: it keeps room from the members above an elastic
//     group's min of its own priority or lower (KeepsRoomFrom); of those,
//     muster-controller shrinks a group of its priority (Shrinks), and
//     muster-scheduler preempts one of lower priority;
//   - the fit rule: it keeps a node when a member it lacks may run there
//     and would fit the node empty (MayUse), and only while the nodes that
//     member may use could hold all it lacks, empty (CouldHold): a larger
//     gang waits for room no one could give it, and keeps none.
type WaitingGang struct {
	// Lacking are the unbound members the gang needs for its min.
	Lacking []*corev1.Pod
}

// Priority is the gang's: its dearest lacking member's.
func (g WaitingGang) Priority() int32 {
	var p int32
	for i, pod := range g.Lacking {
		if q := corev1helpers.PodPriority(pod); i == 0 || q > p {
			p = q
		}
	}
	return p
}

// KeepsRoomFrom reports whether the gang keeps room from an elastic
// group's members above its min that are of the given priority.
func (g WaitingGang) KeepsRoomFrom(priority int32) bool { return g.Priority() >= priority }

// Shrinks reports whether muster-controller shrinks an elastic group of
// the given priority for the gang; one of lower priority muster-scheduler
// preempts, and taking from it here as well would take twice.
func (g WaitingGang) Shrinks(priority int32) bool { return g.Priority() == priority }

// Need is what the members the gang lacks request.
func (g WaitingGang) Need() corev1.ResourceList {
	need := corev1.ResourceList{}
	for _, pod := range g.Lacking {
		need = resources.Add(need, resources.OfPod(pod), 1)
	}
	return need
}

// MayUse reports whether a member the gang lacks may run on the node and
// would fit it empty.
func (g WaitingGang) MayUse(node *corev1.Node) bool {
	for _, pod := range g.Lacking {
		if MayRunOn(pod, node) && resources.Fits(resources.OfPod(pod), node.Status.Allocatable) {
			return true
		}
	}
	return false
}

// CouldHold reports whether the nodes the gang's first lacking member may
// run on could hold all it lacks if they were empty.
func (g WaitingGang) CouldHold(nodes []*corev1.Node) bool {
	if len(g.Lacking) == 0 {
		return false
	}
	capacity := corev1.ResourceList{}
	for _, node := range nodes {
		if MayRunOn(g.Lacking[0], node) {
			capacity = resources.Add(capacity, node.Status.Allocatable, 1)
		}
	}
	return resources.Fits(g.Need(), capacity)
}

// KeepsNode reports whether the gang keeps the node from an elastic
// group's members above its min of the given priority; couldHold is
// CouldHold's answer for the cluster's nodes.
func (g WaitingGang) KeepsNode(node *corev1.Node, priority int32, couldHold bool) bool {
	return couldHold && g.KeepsRoomFrom(priority) && g.MayUse(node)
}
