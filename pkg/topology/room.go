package topology

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// LackingMembers are the unbound active members a gang needs to reach its
// minMember, the first by name: what room is made for. There are none when
// the gang has its minMember bound, or too few members to reach it at all.
func LackingMembers(minMember int32, members []*corev1.Pod) []*corev1.Pod {
	var bound int32
	var unbound []*corev1.Pod
	for _, pod := range members {
		switch {
		case !IsActiveMember(pod):
		case pod.Spec.NodeName != "":
			bound++
		default:
			unbound = append(unbound, pod)
		}
	}
	lacking := minMember - bound
	if lacking <= 0 || int32(len(unbound)) < lacking {
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

func markedUnschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}
