package topology

import corev1 "k8s.io/api/core/v1"

// MemberPhase is where a member of a group stands: the one reading of a
// pod's phase the scheduler, muster-controller and kubectl muster count
// a group's members by.
type MemberPhase uint8

const (
	// MemberGated: not bound, held back by scheduling gates.
	MemberGated MemberPhase = iota
	// MemberPending: not bound, to be scheduled.
	MemberPending
	// MemberBound: bound to a node, not running yet.
	MemberBound
	// MemberRunning: bound and running.
	MemberRunning
	// MemberSucceeded and MemberFailed: finished.
	MemberSucceeded
	MemberFailed
	// MemberTerminating: being deleted before it finished.
	MemberTerminating
	memberPhases
)

// PhaseOf is where a member stands.
func PhaseOf(pod *corev1.Pod) MemberPhase {
	switch {
	case pod.Status.Phase == corev1.PodSucceeded:
		return MemberSucceeded
	case pod.Status.Phase == corev1.PodFailed:
		return MemberFailed
	case pod.DeletionTimestamp != nil:
		return MemberTerminating
	case pod.Spec.NodeName == "" && len(pod.Spec.SchedulingGates) > 0:
		return MemberGated
	case pod.Spec.NodeName == "":
		return MemberPending
	case pod.Status.Phase == corev1.PodRunning:
		return MemberRunning
	}
	return MemberBound
}

// IsActive says whether a member in the phase counts toward its group:
// neither finished nor being deleted (IsActiveMember).
func (p MemberPhase) IsActive() bool { return p <= MemberRunning }

// IsBound says whether a member in the phase is active and bound to a
// node.
func (p MemberPhase) IsBound() bool { return p == MemberBound || p == MemberRunning }

// Census counts a group's members by phase.
type Census [memberPhases]int32

// CensusOf counts the members by phase.
func CensusOf(members []corev1.Pod) Census {
	var c Census
	for i := range members {
		c[PhaseOf(&members[i])]++
	}
	return c
}

// Active counts the members neither finished nor being deleted.
func (c Census) Active() int32 {
	return c[MemberGated] + c[MemberPending] + c[MemberBound] + c[MemberRunning]
}

// TowardQuorum counts the members a gang is made of before it is placed:
// the active ones and those that succeeded. A member that finished its
// work was part of the gang and is not replaced, so a replacement for a
// lost member, or a Job's last index, is not left waiting for it.
func (c Census) TowardQuorum() int32 { return c.Active() + c.Succeeded() }

// Placed counts the members a gang's quorum counts as placed: the active
// ones bound to a node and those that succeeded, which were placed with
// their gang and are not replaced.
func (c Census) Placed() int32 { return c.Bound() + c.Succeeded() }

// Bound counts the active members bound to a node.
func (c Census) Bound() int32 { return c[MemberBound] + c[MemberRunning] }

// Unbound counts the active members not bound to a node.
func (c Census) Unbound() int32 { return c[MemberGated] + c[MemberPending] }

// Running counts the active members running.
func (c Census) Running() int32 { return c[MemberRunning] }

// Succeeded counts the members that succeeded.
func (c Census) Succeeded() int32 { return c[MemberSucceeded] }

// Failed counts the members that failed.
func (c Census) Failed() int32 { return c[MemberFailed] }
