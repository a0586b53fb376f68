package podgroup

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// census counts a group's members by state.
// census is a group's members counted by phase, as the scheduler counts
// them (topology.Census), and its active members by role.
type census struct {
	topology.Census
	activeByRole map[string]int32
}

func countMembers(pods []corev1.Pod) census {
	c := census{Census: topology.CensusOf(pods), activeByRole: map[string]int32{}}
	for i := range pods {
		if role, ok := topology.RoleOf(&pods[i]); ok && topology.IsActiveMember(&pods[i]) {
			c.activeByRole[role]++
		}
	}
	return c
}

// desiredStatus is the PodGroup's status as its members show it. The
// phases are scheduler-plugins' own:
//
//	Pending     fewer than minMember members are bound or have succeeded
//	Scheduling  minMember members are bound or have succeeded, fewer
//	            run or have succeeded
//	Running     minMember members run or have succeeded, as
//	            scheduler-plugins' controller counts them: a gang whose
//	            members finish at different times is still running
//	Finished    minMember members succeeded
//	Failed      a member failed before minMember succeeded
//
// scheduleStartTime is when the group first had minMember active members,
// that is when it could first be scheduled; it is never moved after.
func desiredStatus(pg *v1alpha1.PodGroup, c census, now metav1.Time) v1alpha1.PodGroupStatus {
	status := pg.Status
	status.Running, status.Succeeded, status.Failed = c.Running(), c.Succeeded(), c.Failed()
	quorum := topology.QuorumOf(pg)
	switch {
	case quorum.ReachedBy(c.Succeeded()):
		status.Phase = v1alpha1.PodGroupFinished
	case c.Failed() > 0:
		status.Phase = v1alpha1.PodGroupFailed
	case quorum.ReachedBy(c.Running() + c.Succeeded()):
		status.Phase = v1alpha1.PodGroupRunning
	case quorum.ReachedBy(c.Placed()):
		status.Phase = v1alpha1.PodGroupScheduling
	default:
		status.Phase = v1alpha1.PodGroupPending
	}
	if status.ScheduleStartTime.IsZero() && quorum.EnoughMembers(c.Active()+c.Succeeded()+c.Failed(), 0) {
		status.ScheduleStartTime = now
	}
	return status
}

// waitingMessage says why the group's unscheduled members cannot be
// scheduled yet, or "" when nothing in the group holds them back. It is
// the message Gang's PreEnqueue gives.
func waitingMessage(pg *v1alpha1.PodGroup, members []corev1.Pod, c census, group types.NamespacedName) string {
	if pg == nil {
		if len(members) == 0 {
			return ""
		}
		return topology.WaitingForPodGroupMessage(group, topology.GroupFieldOf(&members[0]))
	}
	if owner, awaits := topology.AwaitsDerivation(pg); awaits {
		return topology.AwaitingDerivationMessage(group, owner)
	}
	topo, errs := topology.FromPodGroup(pg)
	if len(errs) > 0 {
		return topology.InvalidMessage(group, errs)
	}
	// Members their owner creates later count: the scheduler holds room
	// for them.
	if late := topo.MissingLate(c.activeByRole).Total(); !topology.QuorumOf(pg).EnoughMembers(c.TowardQuorum(), late) {
		return topology.WaitingForMembersMessage(group, c.TowardQuorum()+late, pg.Spec.MinMember)
	}
	return ""
}
