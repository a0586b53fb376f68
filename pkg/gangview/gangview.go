// Package gangview reads a gang as one thing: its phase, members, launch
// stage, domain, held rooms and what it waits for, from the API objects
// that make it (its PodGroup of either API, its pods, their events and
// claims, Kueue's Workload). It is what `kubectl muster` shows. It holds
// no client, no global and no clock: the caller reads the objects and
// says what time it is.
package gangview

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// Phase is where a gang is on its way from created to finished.
type Phase string

// The phases, in the order a gang passes them.
const (
	// WaitingForMembers: its PodGroup, or fewer pods than its minMember,
	// do not exist yet.
	WaitingForMembers Phase = "WaitingForMembers"
	// QueuedInKueue: Kueue has not admitted its Workload.
	QueuedInKueue Phase = "QueuedInKueue"
	// WaitingForRoom: every member it needs exists, fewer than its
	// minMember are bound.
	WaitingForRoom Phase = "WaitingForRoom"
	// PartlyBound: some members are bound, fewer than its minMember, in a
	// gang that had no quorum, or lost it.
	PartlyBound Phase = "PartlyBound"
	// Admitted: its quorum is bound; fewer than that run.
	Admitted Phase = "Admitted"
	// Launching: its quorum runs, and members of a later role in its
	// launch order wait for their predecessors.
	Launching Phase = "Launching"
	// Running: its quorum runs.
	Running Phase = "Running"
	// Finished: its quorum succeeded.
	Finished Phase = "Finished"
	// Failed: a member failed before its quorum succeeded.
	Failed Phase = "Failed"
)

// Phases lists every phase, in the order a gang passes them.
var Phases = []Phase{WaitingForMembers, QueuedInKueue, WaitingForRoom, PartlyBound, Admitted, Launching, Running, Finished, Failed}

// Objects are the API objects that make one gang.
type Objects struct {
	// Key is the group's namespace and name.
	Key types.NamespacedName
	// PodGroup is the group's PodGroup in the one shape muster reads
	// (topology.FromUpstream for upstream's); nil when it does not exist.
	PodGroup *v1alpha1.PodGroup
	// Pods are the pods that name the group.
	Pods []corev1.Pod
	// Events are the events about the PodGroup, its pods and its Workload.
	Events []eventsv1.Event
	// Workload is Kueue's Workload of the gang; nil when it has none.
	Workload *unstructured.Unstructured
	// Claims are the ResourceClaims in the group's namespace; the members'
	// are read from them.
	Claims []resourcev1.ResourceClaim
	// Nodes are the nodes the members are bound to, by name.
	Nodes map[string]*corev1.Node
	// SchedulerName is muster-scheduler's name: a pod of another scheduler
	// is not a member.
	SchedulerName string
	// Now is when the objects were read.
	Now time.Time
}

// Gang is one gang as a user sees it.
type Gang struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Source is where the group comes from: a PodGroup of scheduler-plugins
	// or of scheduling.k8s.io, or the owner of a derived one (Kind/name).
	Source string `json:"source"`
	Phase  Phase  `json:"phase"`
	// Bound counts the active members bound to a node, and those that
	// succeeded.
	Bound int32 `json:"bound"`
	// MinMember is the quorum the gang is admitted with.
	MinMember int32 `json:"minMember"`
	// Elastic is the range of an elastic group's elastic role.
	Elastic *topology.Range `json:"elastic,omitempty"`
	// MaxMember is an elastic group's members at its max.
	MaxMember int32 `json:"maxMember,omitempty"`
	// LaunchStage says how far the launch order has come, for example
	// "worker 2/2 Ready, launcher held"; empty for a group in no order.
	LaunchStage string `json:"launchStage,omitempty"`
	// Domain is the topology domain its bound members share.
	Domain string `json:"domain,omitempty"`
	// HeldRooms is the room muster-scheduler holds for members created
	// later, as it publishes it on the PodGroup.
	HeldRooms []HeldRoom  `json:"heldRooms,omitempty"`
	Created   metav1.Time `json:"created"`
	// WaitingFor names the dominant reason the gang is not running yet;
	// empty when nothing holds it.
	WaitingFor string `json:"waitingFor,omitempty"`

	Members        []Member  `json:"members,omitempty"`
	Workload       *Workload `json:"workload,omitempty"`
	Claims         []Claim   `json:"claims,omitempty"`
	Attempts       []Record  `json:"attempts,omitempty"`
	Preemptions    []Record  `json:"preemptions,omitempty"`
	ElasticChanges []Record  `json:"elasticChanges,omitempty"`
}

// Member is one pod of a gang.
type Member struct {
	Name  string `json:"name"`
	Role  string `json:"role,omitempty"`
	Node  string `json:"node,omitempty"`
	State string `json:"state"`
	// Since is when the member entered its state.
	Since metav1.Time `json:"since"`
	// WaitingFor is what an unbound member waits for.
	WaitingFor string `json:"waitingFor,omitempty"`
}

// Workload is what Kueue says of a gang.
type Workload struct {
	Name         string `json:"name"`
	Queue        string `json:"queue,omitempty"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	Admitted     bool   `json:"admitted"`
	// Message is Kueue's word on its admission, or why it waits.
	Message string `json:"message,omitempty"`
}

// Claim is a member's ResourceClaim and the devices allocated to it.
type Claim struct {
	Name    string   `json:"name"`
	Pods    []string `json:"pods,omitempty"`
	Devices []string `json:"devices,omitempty"`
}

// Record is one thing that happened to a gang, from an event.
type Record struct {
	Time   metav1.Time `json:"time"`
	Reason string      `json:"reason"`
	About  string      `json:"about"`
	Note   string      `json:"note"`
}

// Member states beyond a pod's phase.
const (
	StateHeld          = "Held"
	StateUnschedulable = "Unschedulable"
	StateGated         = "SchedulingGated"
	StateBound         = "Bound"
	StateReady         = "Ready"
	StateTerminating   = "Terminating"
)

// View reads the gang the objects make.
func View(o Objects) Gang {
	g := Gang{Namespace: o.Key.Namespace, Name: o.Key.Name, Source: sourceOf(o.PodGroup)}
	members := membersOf(o)
	events := sortedEvents(o.Events)
	p := ReadPublished(o.PodGroup)
	held := heldMembers(members, events, o.PodGroup, p)
	heldRoles := map[string]bool{}
	for i := range members {
		m := memberView(&members[i], held, o.Now)
		if m.State == StateHeld {
			heldRoles[m.Role] = true
		}
		g.Members = append(g.Members, m)
	}
	var topo *topology.Topology
	var topoErr string
	if o.PodGroup != nil {
		g.Created = o.PodGroup.CreationTimestamp
		g.MinMember = o.PodGroup.Spec.MinMember
		t, errs := topology.FromPodGroup(o.PodGroup)
		if len(errs) > 0 {
			topoErr = topology.InvalidMessage(o.Key, errs)
		} else {
			topo = t
		}
	} else if len(members) > 0 {
		g.Created = members[0].CreationTimestamp
	}
	if topo != nil && topo.Elastic != nil {
		g.Elastic = topo.Elastic
		g.MaxMember = g.MinMember + topo.Elastic.Max - topo.Elastic.Min
	}
	c := countOf(members, topo)
	g.Bound = c.Placed()
	g.Workload = workloadOf(o.Workload)
	g.LaunchStage = launchStage(topo, c, heldRoles)
	g.Domain = domainOf(topo, members, o.Nodes)
	g.Claims = claimsOf(members, o.Claims)
	g.HeldRooms = p.HeldRooms
	if g.Domain == "" {
		g.Domain = p.Domain
	}
	g.Attempts = records(events, o.Key.Name, ReasonGangAdmitted, ReasonGangRejected, ReasonGangEvicted)
	if len(g.Attempts) == 0 && p.LastAttempt != nil {
		// Events expire after an hour; the published result does not.
		reason := ReasonGangRejected
		if p.LastAttempt.Admitted {
			reason = ReasonGangAdmitted
		}
		g.Attempts = []Record{{Time: p.LastAttempt.Time, Reason: reason, About: "PodGroup/" + o.Key.Name, Note: p.LastAttempt.Message}}
	}
	g.Preemptions = records(events, o.Key.Name, ReasonPreempting, ReasonPreempted)
	g.ElasticChanges = records(events, "", ReasonElasticGrown, ReasonElasticShrunk)
	g.Phase, g.WaitingFor = phaseOf(o, topo, topoErr, c, members, g, p.NoDomain)
	return g
}

// sourceOf names where a group comes from.
func sourceOf(pg *v1alpha1.PodGroup) string {
	switch {
	case pg == nil:
		return "pods"
	case topology.IsUpstream(pg):
		return "scheduling.k8s.io"
	}
	if owner := metav1.GetControllerOfNoCopy(pg); owner != nil {
		if owner.Kind == "Workload" {
			return "Kueue/" + owner.Name
		}
		return owner.Kind + "/" + owner.Name
	}
	return "scheduling.x-k8s.io"
}

// membersOf are the pods of the group that are its members, by name.
func membersOf(o Objects) []corev1.Pod {
	ours := func(name string) bool { return o.SchedulerName == "" || name == o.SchedulerName }
	var members []corev1.Pod
	for i := range o.Pods {
		pod := &o.Pods[i]
		if o.PodGroup != nil && topology.NotAMember(pod, o.PodGroup, ours) != "" {
			continue
		}
		if o.PodGroup == nil && !ours(pod.Spec.SchedulerName) {
			continue
		}
		members = append(members, *pod)
	}
	slices.SortFunc(members, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return members
}

// count is what the members show: by phase, as both programs count them
// (topology.Census), and the active ones by role.
type count struct {
	topology.Census
	byRole        map[string]int32
	reached       map[string]int32
	unboundByRole map[string]int32
}

func countOf(members []corev1.Pod, topo *topology.Topology) count {
	c := count{Census: topology.CensusOf(members), byRole: map[string]int32{}, reached: map[string]int32{}, unboundByRole: map[string]int32{}}
	for i := range members {
		pod := &members[i]
		phase := topology.PhaseOf(pod)
		if !phase.IsActive() {
			continue
		}
		role, _ := topology.RoleOf(pod)
		c.byRole[role]++
		if !phase.IsBound() {
			c.unboundByRole[role]++
			continue
		}
		if topo != nil && topology.HasReached(pod, topo.StartAfter) {
			c.reached[role]++
		}
	}
	return c
}

// sortedEvents are the events, oldest first.
func sortedEvents(events []eventsv1.Event) []eventsv1.Event {
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b eventsv1.Event) int { return eventTime(&a).Compare(eventTime(&b).Time) })
	return sorted
}

// eventTime is when an event last happened, whichever API recorded it.
func eventTime(e *eventsv1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.NewTime(e.Series.LastObservedTime.Time)
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp
	}
	return e.CreationTimestamp
}

// heldMembers are the unbound members held for their predecessors, with
// the note of their last launch event: those muster-scheduler publishes
// as held, or, on a PodGroup with no record, those whose last launch
// event says so.
func heldMembers(members []corev1.Pod, events []eventsv1.Event, pg *v1alpha1.PodGroup, p Published) map[string]string {
	unbound := map[string]bool{}
	for i := range members {
		if members[i].Spec.NodeName == "" && topology.IsActiveMember(&members[i]) {
			unbound[members[i].Name] = true
		}
	}
	held := map[string]string{}
	notes := map[string]string{}
	for i := range events {
		e := &events[i]
		if e.Regarding.Kind != "Pod" || !unbound[e.Regarding.Name] {
			continue
		}
		switch e.Reason {
		case ReasonLaunchHeld:
			held[e.Regarding.Name], notes[e.Regarding.Name] = e.Note, e.Note
		case ReasonLaunchReleased, ReasonLaunchHoldTimedOut:
			delete(held, e.Regarding.Name)
		}
	}
	if pg == nil {
		return held
	}
	if _, recorded := pg.Annotations[PublishedAnnotation]; !recorded {
		return held
	}
	held = map[string]string{}
	for _, name := range p.Held {
		if !unbound[name] {
			continue
		}
		held[name] = notes[name]
		if held[name] == "" {
			held[name] = "held until its predecessors reach start-after"
		}
	}
	return held
}

func memberView(pod *corev1.Pod, held map[string]string, now time.Time) Member {
	m := Member{Name: pod.Name, Node: pod.Spec.NodeName, State: string(pod.Status.Phase), Since: pod.CreationTimestamp}
	m.Role, _ = topology.RoleOf(pod)
	scheduled := condition(pod, corev1.PodScheduled)
	switch {
	case pod.DeletionTimestamp != nil:
		m.State, m.Since = StateTerminating, *pod.DeletionTimestamp
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		if ready := condition(pod, corev1.PodReady); ready != nil {
			m.Since = ready.LastTransitionTime
		}
	case pod.Spec.NodeName != "":
		m.State = StateBound
		if scheduled != nil {
			m.Since = scheduled.LastTransitionTime
		}
		if topology.HasReached(pod, topology.StartAfterReady) {
			m.State, m.Since = StateReady, condition(pod, corev1.PodReady).LastTransitionTime
		} else if pod.Status.Phase == corev1.PodRunning {
			m.State = string(corev1.PodRunning)
		}
	case held[pod.Name] != "":
		m.State, m.WaitingFor = StateHeld, held[pod.Name]
	case scheduled != nil && scheduled.Status == corev1.ConditionFalse:
		m.Since, m.WaitingFor = scheduled.LastTransitionTime, scheduled.Message
		m.State = StateUnschedulable
		if scheduled.Reason == corev1.PodReasonSchedulingGated {
			m.State = StateGated
		}
	case len(pod.Spec.SchedulingGates) > 0:
		m.State, m.WaitingFor = StateGated, "scheduling gate "+pod.Spec.SchedulingGates[0].Name
	}
	if m.Since.IsZero() {
		m.Since = metav1.NewTime(now)
	}
	return m
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// workloadOf reads Kueue's Workload: its queue, and whether and where it
// is admitted.
func workloadOf(w *unstructured.Unstructured) *Workload {
	if w == nil {
		return nil
	}
	view := &Workload{Name: w.GetName()}
	view.Queue, _, _ = unstructured.NestedString(w.Object, "spec", "queueName")
	view.ClusterQueue, _, _ = unstructured.NestedString(w.Object, "status", "admission", "clusterQueue")
	conditions, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	var quota string
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		message, _ := m["message"].(string)
		switch typ {
		case "Admitted":
			view.Admitted = status == string(metav1.ConditionTrue)
			if view.Admitted {
				view.Message = message
			}
		case "QuotaReserved":
			quota = message
		}
	}
	if !view.Admitted {
		view.Message = quota
	}
	return view
}

// launchStage says how far a group's launch order has come: each
// predecessor role's members at start-after, then each successor role
// held, waiting or started.
func launchStage(topo *topology.Topology, c count, heldRoles map[string]bool) string {
	if topo == nil {
		return ""
	}
	var predecessors, successors []string
	for _, role := range topo.Roles {
		for _, pred := range topo.Predecessors(role) {
			if !slices.Contains(predecessors, pred) {
				predecessors = append(predecessors, pred)
			}
		}
		if len(topo.Predecessors(role)) > 0 {
			successors = append(successors, role)
		}
	}
	if len(successors) == 0 {
		return ""
	}
	var parts []string
	for _, role := range topo.Roles {
		if slices.Contains(predecessors, role) {
			parts = append(parts, fmt.Sprintf("%s %d/%d %s", role, c.reached[role], topo.AdmittedReplicas(role), topo.StartAfter))
		}
	}
	for _, role := range successors {
		if slices.Contains(predecessors, role) {
			continue
		}
		state := "started"
		switch {
		case heldRoles[role]:
			state = "held"
		case c.byRole[role] < topo.Replicas[role] && topo.IsLate(role):
			state = "not created"
		case c.unboundByRole[role] > 0:
			state = "waiting"
		}
		parts = append(parts, role+" "+state)
	}
	return strings.Join(parts, ", ")
}
