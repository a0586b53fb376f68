package topology

import "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

// Quorum is a gang's minMember and the rules muster reads from it, each
// in one place for both programs: whether enough members exist to try,
// which member completes the group, and whether the members placed make
// the gang. The countings are the callers': what counts as existing or
// placed differs by where it is asked (bound only; reserved and held
// rooms too; finished members).
type Quorum struct {
	MinMember int32
}

// QuorumOf is the quorum of the gang the PodGroup names.
func QuorumOf(pg *v1alpha1.PodGroup) Quorum {
	return Quorum{MinMember: pg.Spec.MinMember}
}

// EnoughMembers says whether the members that exist and the late members
// their owner creates later, counted apart, make the quorum. A gang with
// fewer waits for members, not for room.
func (q Quorum) EnoughMembers(existing, lateToCome int32) bool {
	return existing+lateToCome >= q.MinMember
}

// CompletedBy says whether existing members are exactly the quorum: the
// member that made them so completed the group.
func (q Quorum) CompletedBy(existing int32) bool {
	return existing == q.MinMember
}

// Short is how many more members the gang needs placed: none once the
// placed reach the quorum.
func (q Quorum) Short(placed int32) int32 {
	return max(q.MinMember-placed, 0)
}

// ReachedBy says whether the placed members make the gang.
func (q Quorum) ReachedBy(placed int32) bool {
	return placed >= q.MinMember
}
