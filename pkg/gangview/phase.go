package gangview

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// PublishedAnnotation is muster-scheduler's record, on a PodGroup of
// either API, of what only it knows of the gang: the rooms it holds for
// members created later, the domain its attempt chose, and its last
// attempt's result. It is a JSON Published. Like
// topology.QuorumReachedAnnotation it is outside topology.AnnotationPrefix,
// so writing it wakes no member.
const PublishedAnnotation = "scheduling.muster.dev/state"

// Published is what PublishedAnnotation holds.
type Published struct {
	HeldRooms []HeldRoom `json:"heldRooms,omitempty"`
	// Held names the members held at Permit until their predecessors
	// reach start-after.
	Held []string `json:"held,omitempty"`
	// Domain is the topology domain of the gang's attempt, as
	// label=value.
	Domain string `json:"domain,omitempty"`
	// NoDomain says why no domain fits the gang, naming the closest.
	NoDomain string `json:"noDomain,omitempty"`
	// LastAttempt is the result of the gang's last attempt.
	LastAttempt *Attempt `json:"lastAttempt,omitempty"`
}

// HeldRoom is the room muster-scheduler holds for one member its owner
// creates later.
type HeldRoom struct {
	Role string `json:"role"`
	Node string `json:"node"`
	// Expires is when the room is released if its member has not come.
	Expires metav1.Time `json:"expires"`
}

// Attempt is the result of a gang's last attempt to be placed. Time is
// when its attempts began to end so: attempts that end the same way again
// leave it, so that a gang retried while it waits costs no write.
type Attempt struct {
	Time     metav1.Time `json:"time"`
	Admitted bool        `json:"admitted"`
	Message  string      `json:"message,omitempty"`
}

// ReadPublished reads a PodGroup's PublishedAnnotation; a missing or
// unreadable one is an empty record.
func ReadPublished(pg *v1alpha1.PodGroup) Published {
	var p Published
	if pg != nil {
		if v, ok := pg.Annotations[PublishedAnnotation]; ok {
			if err := json.Unmarshal([]byte(v), &p); err != nil {
				return Published{}
			}
		}
	}
	return p
}

// domainOf is the topology domain the bound members' nodes share, as
// label=value, or their values joined by commas.
func domainOf(topo *topology.Topology, members []corev1.Pod, nodes map[string]*corev1.Node) string {
	if topo == nil {
		return ""
	}
	key := topo.DomainKey
	if key == "" {
		key = topo.PreferredDomainKey
	}
	if key == "" {
		return ""
	}
	var values []string
	for i := range members {
		node := nodes[members[i].Spec.NodeName]
		if node == nil || !topology.IsActiveMember(&members[i]) {
			continue
		}
		if v, ok := node.Labels[key]; ok && !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return ""
	}
	slices.Sort(values)
	return key + "=" + strings.Join(values, ",")
}

// claimsOf are the members' ResourceClaims with their devices.
func claimsOf(members []corev1.Pod, claims []resourcev1.ResourceClaim) []Claim {
	byName := map[string]*Claim{}
	var names []string
	for i := range members {
		pod := &members[i]
		for _, status := range pod.Status.ResourceClaimStatuses {
			if status.ResourceClaimName == nil {
				continue
			}
			addClaimPod(byName, &names, *status.ResourceClaimName, pod.Name)
		}
		for _, rc := range pod.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				addClaimPod(byName, &names, *rc.ResourceClaimName, pod.Name)
			}
		}
	}
	var out []Claim
	for _, name := range names {
		c := byName[name]
		for i := range claims {
			if claims[i].Name != name || claims[i].Status.Allocation == nil {
				continue
			}
			for _, r := range claims[i].Status.Allocation.Devices.Results {
				c.Devices = append(c.Devices, r.Driver+"/"+r.Pool+"/"+r.Device)
			}
		}
		out = append(out, *c)
	}
	return out
}

func addClaimPod(byName map[string]*Claim, names *[]string, claim, pod string) {
	c, ok := byName[claim]
	if !ok {
		c = &Claim{Name: claim}
		byName[claim] = c
		*names = append(*names, claim)
	}
	if !slices.Contains(c.Pods, pod) {
		c.Pods = append(c.Pods, pod)
	}
}

// records are the events of the given reasons, oldest first; about, when
// not empty, keeps those about that object alone.
func records(events []eventsv1.Event, about string, reasons ...string) []Record {
	var out []Record
	for i := range events {
		e := &events[i]
		if !slices.Contains(reasons, e.Reason) || (about != "" && e.Regarding.Name != about) {
			continue
		}
		out = append(out, Record{Time: eventTime(e), Reason: e.Reason, About: e.Regarding.Kind + "/" + e.Regarding.Name, Note: e.Note})
	}
	return out
}

// last is the newest record of the given reasons, or nil.
func last(rs []Record, reasons ...string) *Record {
	for i := len(rs) - 1; i >= 0; i-- {
		if slices.Contains(reasons, rs[i].Reason) {
			return &rs[i]
		}
	}
	return nil
}

// phaseOf decides the gang's phase, and the one reason that dominates
// what it waits for.
func phaseOf(o Objects, topo *topology.Topology, topoErr string, c count, members []corev1.Pod, g Gang, noDomain string) (Phase, string) {
	pg := o.PodGroup
	if pg == nil {
		if len(members) == 0 {
			return WaitingForMembers, ""
		}
		return WaitingForMembers, topology.WaitingForPodGroupMessage(o.Key, topology.GroupFieldOf(&members[0]))
	}
	quorum, minMember := topology.QuorumOf(pg), pg.Spec.MinMember
	switch {
	case quorum.ReachedBy(c.Succeeded()):
		return Finished, ""
	case c.Failed() > 0 && !quorum.EnoughMembers(c.TowardQuorum(), 0):
		return Failed, fmt.Sprintf("%d members failed, and %d of the %d the gang needs are left; its owner decides whether to replace them", c.Failed(), c.TowardQuorum(), minMember)
	case g.Workload != nil && !g.Workload.Admitted:
		why := g.Workload.Message
		if why == "" {
			why = "not admitted yet"
		}
		return QueuedInKueue, fmt.Sprintf("Kueue, queue %s: %s", g.Workload.Queue, why)
	case g.Workload == nil && kueueGated(members):
		return QueuedInKueue, "Kueue has not admitted the pods: they carry its scheduling gate " + topology.KueueAdmissionGate
	case topoErr != "":
		return WaitingForMembers, topoErr
	}
	if owner, awaits := topology.AwaitsDerivation(pg); awaits {
		return WaitingForMembers, topology.AwaitingDerivationMessage(o.Key, owner)
	}
	var late int32
	if topo != nil {
		late = topo.MissingLate(c.byRole).Total()
	}
	held := 0
	var heldFor string
	for _, m := range g.Members {
		if m.State == StateHeld {
			held++
			if heldFor == "" {
				heldFor = m.Name + " " + m.WaitingFor
			}
		}
	}
	bound := c.Placed()
	admitted := topology.ReachedQuorum(pg)
	if a := last(g.Attempts, ReasonGangAdmitted, ReasonGangRejected, ReasonGangEvicted); a != nil {
		admitted = admitted || a.Reason == ReasonGangAdmitted
	}
	// A held member keeps its reservation, and the room held for a late
	// one counts, toward the quorum.
	placed := bound + int32(held)
	if admitted {
		placed += late
	}
	if quorum.ReachedBy(placed) && bound > 0 {
		switch {
		case held > 0:
			return Launching, heldFor
		case admitted && late > 0:
			return Launching, lateMessage(topo, c, g.HeldRooms)
		case quorum.ReachedBy(c.Running() + c.Succeeded()):
			return Running, ""
		}
		return Admitted, fmt.Sprintf("%d of %d members running", c.Running()+c.Succeeded(), minMember)
	}
	if !quorum.EnoughMembers(c.TowardQuorum(), late) {
		return WaitingForMembers, topology.WaitingForMembersMessage(o.Key, c.TowardQuorum()+late, minMember)
	}
	why := roomReason(g, members, noDomain)
	if bound > 0 {
		return PartlyBound, fmt.Sprintf("%d of %d bound; %s", bound, minMember, why)
	}
	return WaitingForRoom, why
}

// kueueGated reports whether an active member carries Kueue's admission
// gate: Kueue has not admitted its pod group.
func kueueGated(members []corev1.Pod) bool {
	for i := range members {
		if !topology.IsActiveMember(&members[i]) {
			continue
		}
		for _, gate := range members[i].Spec.SchedulingGates {
			if gate.Name == topology.KueueAdmissionGate {
				return true
			}
		}
	}
	return false
}

// lateMessage says which late members the gang waits for their owner to
// create.
func lateMessage(topo *topology.Topology, c count, rooms []HeldRoom) string {
	var parts []string
	missing := topo.MissingLate(c.byRole)
	for _, role := range topo.Roles {
		if n := missing[role]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, role))
		}
	}
	msg := strings.Join(parts, ", ") + " not created yet by its owner"
	if len(rooms) > 0 {
		msg += fmt.Sprintf("; room held on %s until %s", rooms[0].Node, rooms[0].Expires.UTC().Format("15:04:05"))
	}
	return msg
}

// notTried is what a gang waits for before the scheduler's first word
// on it.
const notTried = "the scheduler has not tried it yet"

// roomReason is why a gang with every member it needs is not placed: that
// no domain fits it, or else the scheduler's last word on it; after the
// preemption that took it, if one did since it was last admitted.
func roomReason(g Gang, members []corev1.Pod, noDomain string) string {
	why := notTried
	lastAttempt := last(g.Attempts, ReasonGangAdmitted, ReasonGangRejected)
	if noDomain != "" {
		why = noDomain
	} else if lastAttempt != nil && lastAttempt.Reason == ReasonGangRejected {
		why = lastAttempt.Note
	} else {
		for i := range members {
			if c := condition(&members[i], corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Message != "" {
				why = c.Message
				break
			}
		}
	}
	// A gang taken by a preemption says so until it is admitted again:
	// its failed attempts since follow from it.
	admitted := last(g.Attempts, ReasonGangAdmitted)
	if taken := last(g.Preemptions, ReasonPreempted); taken != nil && (admitted == nil || !admitted.Time.After(taken.Time.Time)) {
		why = taken.Note + "; " + why
	}
	return why
}
