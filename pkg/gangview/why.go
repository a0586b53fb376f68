package gangview

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/muster-dev/muster/pkg/topology"
)

// Trouble is one row of the user guide's troubleshooting table: what a
// user sees, its cause and its fix. The table is written from Troubles,
// and `kubectl muster why` answers with one of them.
type Trouble struct {
	Shows string `json:"shows"`
	Cause string `json:"cause"`
	Fix   string `json:"fix"`
}

// The troubles, in the order the user guide lists them.
var (
	TroubleNone = Trouble{
		Shows: "phase `Running`, `Admitted` or `Finished`",
		Cause: "nothing holds the pod: it is bound",
		Fix:   "none; if its container does not start, `kubectl describe pod` says why",
	}
	TroubleNotOurs = Trouble{
		Shows: "pods never scheduled, no event at all",
		Cause: "`spec.schedulerName` is not `muster-scheduler`, or muster-scheduler is not running",
		Fix:   "check the pod, then `kubectl -n muster-system get pods`",
	}
	TroubleNoGroup = Trouble{
		Shows: "a pod of no group, `Pending`",
		Cause: "the pod names no group, so muster schedules it alone, like kube-scheduler",
		Fix:   "add the label `scheduling.x-k8s.io/pod-group`, or `spec.schedulingGroup`, to make it a member",
	}
	TroubleNoPodGroup = Trouble{
		Shows: "`waiting for PodGroup ns/x to be created (named by …)`",
		Cause: "pods exist, PodGroup does not",
		Fix:   "create the PodGroup; check the label's (or `spec.schedulingGroup`'s) value and namespace; for an upstream PodGroup, that muster-scheduler's log names `scheduling.k8s.io/v1beta1`",
	}
	TroubleFewMembers = Trouble{
		Shows: "`waiting for 2 more pods of group ns/x (3/5)`",
		Cause: "fewer pods than `minMember` (those that succeeded count; failed ones and those being deleted do not)",
		Fix:   "create them, or lower `minMember`; check that a Job's `parallelism` is not below it",
	}
	TroubleInvalidTopology = Trouble{
		Shows: "`invalid topology in PodGroup`",
		Cause: "the PodGroup's annotations",
		Fix:   "fix them; the message names each one",
	}
	TroubleKueue = Trouble{
		Shows: "phase `QueuedInKueue`",
		Cause: "Kueue has not admitted the gang's Workload: its ClusterQueue lacks quota",
		Fix:   "free quota in the queue, or raise the ClusterQueue's `nominalQuota`; `kubectl describe workload` says what is short",
	}
	TroubleNoRoom = Trouble{
		Shows: "`GangRejected` with `0/N nodes are available`",
		Cause: "the whole gang does not fit now",
		Fix:   "free room or add nodes; the gang retries after the backoff, never half placed",
	}
	TroubleNoDomain = Trouble{
		Shows: "`no … domain has room for the N members`",
		Cause: "the gang must stay in one topology domain, and none has room for all its members",
		Fix:   "free room in the closest domain the message names, or relax `muster.dev/topology-required` to `muster.dev/topology-preferred`",
	}
	TroubleDevices = Trouble{
		Shows: "`the claims ask for N devices of class …` or `cannot allocate all claims`",
		Cause: "the members' ResourceClaims ask for more devices than are free",
		Fix:   "free devices of that class, or ask for fewer; a higher-priority gang may preempt for them",
	}
	TroublePreempted = Trouble{
		Shows: "`Preempted` on the PodGroup",
		Cause: "a gang of higher priority took this one's room, whole",
		Fix:   "none needed: the owner recreates the members and the gang waits for room; raise its priority if it must not be taken",
	}
	TroubleLaunchHeld = Trouble{
		Shows: "`held until worker is Ready (2/4)` on a launcher",
		Cause: "workers not Ready",
		Fix:   "look at the workers' readiness probes; `muster.dev/start-after: Running` if they have none",
	}
	TroubleRefusedIdentity = Trouble{
		Shows: "pod creation refused: `metadata.labels[muster.dev/role]` / `[muster.dev/index]`",
		Cause: "a member without its identity",
		Fix:   "add the label, or use an Indexed Job named `<group>-<role>`",
	}
	TroubleRefusedHostname = Trouble{
		Shows: "pod creation refused: `spec.hostname`",
		Cause: "an Indexed Job not named `<group>-<role>`",
		Fix:   "rename the Job",
	}
	TroubleOwnershipConflict = Trouble{
		Shows: "`OwnershipConflict`",
		Cause: "a Service, ConfigMap or Secret of that name exists",
		Fix:   "rename or delete it",
	}
	TroubleNotTried = Trouble{
		Shows: "`the scheduler has not tried it yet`",
		Cause: "the gang has every member it needs and is in muster-scheduler's queue, or backs off after a failed attempt",
		Fix:   "wait for the attempt; if it lasts, muster-scheduler's log says why",
	}
)

// Troubles lists every trouble, in the user guide's order.
var Troubles = []Trouble{
	TroubleNone, TroubleNotOurs, TroubleNoGroup, TroubleNoPodGroup, TroubleFewMembers, TroubleInvalidTopology,
	TroubleKueue, TroubleNoRoom, TroubleNoDomain, TroubleDevices, TroublePreempted, TroubleLaunchHeld,
	TroubleRefusedIdentity, TroubleRefusedHostname, TroubleOwnershipConflict, TroubleNotTried,
}

// Answer is why one pod waits: the trouble, and what muster said of it.
type Answer struct {
	Pod     string  `json:"pod"`
	Gang    string  `json:"gang,omitempty"`
	Phase   Phase   `json:"phase,omitempty"`
	Said    string  `json:"said,omitempty"`
	Trouble Trouble `json:"trouble"`
}

// Why answers for one pod: gang is its group's view, nil when it names
// none.
func Why(pod *corev1.Pod, gang *Gang, schedulerName string) Answer {
	a := Answer{Pod: pod.Namespace + "/" + pod.Name}
	if gang != nil {
		a.Gang, a.Phase = gang.Namespace+"/"+gang.Name, gang.Phase
	}
	if pod.Spec.SchedulerName != schedulerName {
		a.Said = "spec.schedulerName is " + pod.Spec.SchedulerName
		a.Trouble = TroubleNotOurs
		return a
	}
	if pod.Spec.NodeName != "" {
		a.Said = "bound to " + pod.Spec.NodeName
		a.Trouble = TroubleNone
		return a
	}
	if gang == nil {
		if c := condition(pod, corev1.PodScheduled); c != nil {
			a.Said = c.Message
		}
		a.Trouble = TroubleNoGroup
		return a
	}
	var member *Member
	for i := range gang.Members {
		if gang.Members[i].Name == pod.Name {
			member = &gang.Members[i]
		}
	}
	a.Said = gang.WaitingFor
	if member != nil && member.WaitingFor != "" && gang.Phase != QueuedInKueue {
		a.Said = member.WaitingFor
	}
	a.Trouble = troubleOf(gang, member, gang.WaitingFor+"\n"+a.Said)
	return a
}

// troubleOf reads the trouble from the gang's phase, the member's state
// and what muster said of both.
func troubleOf(gang *Gang, member *Member, said string) Trouble {
	switch gang.Phase {
	case QueuedInKueue:
		return TroubleKueue
	case WaitingForMembers:
		switch {
		case strings.Contains(said, "to be created"):
			return TroubleNoPodGroup
		case strings.Contains(said, "invalid topology"):
			return TroubleInvalidTopology
		}
		return TroubleFewMembers
	}
	if member != nil && member.State == StateHeld {
		return TroubleLaunchHeld
	}
	switch {
	case strings.Contains(said, "preempted by"):
		return TroublePreempted
	case strings.Contains(said, topology.NoDomainMarker):
		return TroubleNoDomain
	case strings.Contains(said, "devices of class") || strings.Contains(said, "cannot allocate all claims"):
		return TroubleDevices
	case strings.Contains(said, notTried) || strings.TrimSpace(said) == "":
		return TroubleNotTried
	}
	return TroubleNoRoom
}
