package groupstate

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// RoleCount is what a group knows of one role's members.
type RoleCount struct {
	// Any counts its members in any phase, finished ones too.
	Any int32
	// Active counts those neither finished nor being deleted.
	Active int32
	// Reached counts its active members that reached each launch-order
	// state: bound, running, ready.
	Reached [3]int32
}

// reachedIndex is where a launch-order state is counted in
// RoleCount.Reached.
func reachedIndex(state topology.StartAfter) int {
	switch state {
	case topology.StartAfterScheduled:
		return 0
	case topology.StartAfterRunning:
		return 1
	}
	return 2
}

// ReachedCount counts the role's active members that reached state.
func (r RoleCount) ReachedCount(state topology.StartAfter) int32 {
	return r.Reached[reachedIndex(state)]
}

// member is what a group keeps of one of its pods.
type member struct {
	phase   topology.MemberPhase
	role    string
	hasRole bool
	// reached is the launch-order states the pod reached, as indexes of
	// RoleCount.Reached.
	reached [3]bool
	boundAt time.Time
	// node is the node an active member is bound to.
	node string
	// place is the member's role and index as its labels say (PlaceOf),
	// "" when they say none.
	place string
}

// PlaceOf keys a pod by the role and index its labels give it, without the
// group's topology: two members Identify puts in one place have one key.
// A JobSet's pods, whose index the topology computes, share a key per
// role; a pod whose index is invalid has none.
func PlaceOf(pod *corev1.Pod) string {
	role, ok := topology.RoleOf(pod)
	if !ok {
		return ""
	}
	if pod.Labels[topology.IndexLabel] == "" && pod.Labels[topology.JobSetJobIndexLabel] != "" {
		return role + "/jobset"
	}
	// A pod with no index is its role's only replica: index 0.
	index, _, err := topology.IndexOf(pod)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s/%d", role, index)
}

func memberOf(pod *corev1.Pod) member {
	m := member{phase: topology.PhaseOf(pod), place: PlaceOf(pod)}
	m.role, m.hasRole = topology.RoleOf(pod)
	if topology.IsActiveMember(pod) {
		m.reached = [3]bool{topology.HasReached(pod, topology.StartAfterScheduled), topology.HasReached(pod, topology.StartAfterRunning), topology.HasReached(pod, topology.StartAfterReady)}
	}
	if pod.Spec.NodeName != "" {
		m.boundAt = boundAt(pod)
		if m.phase.IsBound() {
			m.node = pod.Spec.NodeName
		}
	}
	return m
}

// State is everything that changes about one group: its members by phase
// and by role, their bind times, the PodGroup (by UID) they were counted
// against, whether the gang ever had its quorum, and its scheduling
// attempt. The model's pod handler keeps the members; the plugins change
// the attempt through Attempts. Every read is O(1) in the group's size.
type State struct {
	// podGroup is the UID of the PodGroup the members were counted
	// against: which pods are members depends on it (topology.NotAMember).
	podGroup types.UID
	members  map[types.UID]*member
	// unbound holds the active members not bound to a node, to be woken.
	unbound map[types.UID]*corev1.Pod
	census  topology.Census
	roles   map[string]*RoleCount
	// places counts the active members by place (PlaceOf).
	places map[string]int32
	// nodes counts the active bound members by node: where a gang that
	// must stay in one topology domain already is.
	nodes map[string]int32
	// last is when the last of the bound members was bound; stale when
	// that member has left, to be found again at the next read.
	last      time.Time
	lastStale bool
	// quorumHad is the UID of the PodGroup once minMember of its members
	// were bound at once: the gang is admitted for good.
	quorumHad types.UID
	// partlySince is when the gang, short of its quorum, last came to have
	// a member bound; zero while it has none bound or has had its quorum.
	partlySince time.Time
	attempt     attempt
}

func newState() *State {
	return &State{members: map[types.UID]*member{}, unbound: map[types.UID]*corev1.Pod{}, roles: map[string]*RoleCount{}, places: map[string]int32{}, nodes: map[string]int32{}, attempt: attempt{reserved: sets.New[types.UID]()}}
}

// put records a member as an informer now shows it; it replaces what was
// kept of it. A member seen succeeded stays so: the scheduler's informer,
// which sees no finished pod, may still tell of it as it ran.
func (s *State) put(pod *corev1.Pod) {
	if s.succeeded(pod.UID) && pod.Status.Phase != corev1.PodSucceeded {
		return
	}
	s.remove(pod.UID)
	m := memberOf(pod)
	s.members[pod.UID] = &m
	s.count(&m, 1)
	if m.phase == topology.MemberGated || m.phase == topology.MemberPending {
		s.unbound[pod.UID] = pod
		return
	}
	// A member seen bound holds its place itself: its reservation is over.
	s.attempt.reserved.Delete(pod.UID)
}

// succeeded reports whether the member was seen succeeded.
func (s *State) succeeded(uid types.UID) bool {
	m, ok := s.members[uid]
	return ok && m.phase == topology.MemberSucceeded
}

// remove forgets a member.
func (s *State) remove(uid types.UID) {
	if old, ok := s.members[uid]; ok {
		s.count(old, -1)
		delete(s.members, uid)
		delete(s.unbound, uid)
	}
}

// noteQuorum records that the gang of pg has its quorum bound, for good,
// and reports whether this is the first it is noted for pg.
func (s *State) noteQuorum(pg *v1alpha1.PodGroup) bool {
	if pg == nil || !topology.QuorumOf(pg).ReachedBy(s.census.Bound()) {
		return false
	}
	first := s.quorumHad != pg.UID
	s.quorumHad = pg.UID
	return first
}

// notePartly keeps the time the gang spends partly bound, and returns
// how long a stretch that ends now lasted, or 0.
func (s *State) notePartly(pg *v1alpha1.PodGroup, now time.Time) time.Duration {
	bound := s.census.Bound()
	had := pg != nil && s.quorumHad == pg.UID
	switch {
	case s.partlySince.IsZero():
		if bound > 0 && !had {
			s.partlySince = now
		}
	case had || bound == 0:
		lasted := now.Sub(s.partlySince)
		s.partlySince = time.Time{}
		return lasted
	}
	return 0
}

// Counting says what counts toward a gang's quorum beyond its members
// bound, holding a reservation or succeeded. docs/gang-scheduling.md says
// why each caller counts what it does.
type Counting struct {
	// HeldRooms counts the rooms held for members their owner creates
	// later: Permit admits a gang with them.
	HeldRooms bool
}

// placed counts the members toward the quorum, as counting says, but the
// held rooms, which the Store's Rooms keeps: the members placed
// (topology.Census.Placed) and those holding a reservation.
func (s *State) placed() int32 {
	return s.census.Placed() + int32(s.attempt.reserved.Len())
}

func (s *State) count(m *member, delta int32) {
	s.census[m.phase] += delta
	if m.phase.IsBound() {
		switch {
		case delta > 0 && m.boundAt.After(s.last):
			s.last = m.boundAt
		case delta < 0 && !m.boundAt.Before(s.last):
			s.lastStale = true
		}
	}
	if m.place != "" && m.phase.IsActive() {
		if s.places[m.place] += delta; s.places[m.place] == 0 {
			delete(s.places, m.place)
		}
	}
	if m.node != "" {
		if s.nodes[m.node] += delta; s.nodes[m.node] == 0 {
			delete(s.nodes, m.node)
		}
	}
	if !m.hasRole {
		return
	}
	r := s.roles[m.role]
	if r == nil {
		r = &RoleCount{}
		s.roles[m.role] = r
	}
	r.Any += delta
	if m.phase.IsActive() {
		r.Active += delta
	}
	for i, reached := range m.reached {
		if reached {
			r.Reached[i] += delta
		}
	}
	if r.Any == 0 {
		delete(s.roles, m.role)
	}
}

// boundNode returns a node an active member of the group is bound to.
func (s *State) boundNode() (string, bool) {
	for node := range s.nodes {
		return node, true
	}
	return "", false
}

// lastBind is when the last of the bound members was bound. It walks the
// members only when that member has left since the last read.
func (s *State) lastBind() time.Time {
	if s.lastStale {
		s.last, s.lastStale = time.Time{}, false
		for _, m := range s.members {
			if (m.phase.IsBound()) && m.boundAt.After(s.last) {
				s.last = m.boundAt
			}
		}
	}
	return s.last
}

// empty reports whether the state holds nothing worth keeping.
func (s *State) empty() bool {
	return len(s.members) == 0 && s.quorumHad == "" && s.attempt.isFresh()
}

// states is the state of every group, under one lock. It is never held
// while calling into the framework, whose queue lock is held while it
// calls Less.
type states struct {
	mu      sync.Mutex
	byGroup map[types.NamespacedName]*State
	// onWaitingChange is told when a group starts or stops waiting at
	// Permit, to keep the gauge of waiting gangs.
	onWaitingChange func(delta float64)
}

func newStates(onWaitingChange func(float64)) *states {
	return &states{byGroup: map[types.NamespacedName]*State{}, onWaitingChange: onWaitingChange}
}

// update runs change on the group's state, creating it when needed, keeps
// the waiting gauge in step, and drops a state left empty.
func (s *states) update(key types.NamespacedName, change func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.byGroup[key]
	if st == nil {
		st = newState()
		s.byGroup[key] = st
	}
	wasWaiting := st.attempt.waiting()
	change(st)
	switch isWaiting := st.attempt.waiting(); {
	case isWaiting && !wasWaiting:
		s.onWaitingChange(1)
	case !isWaiting && wasWaiting:
		s.onWaitingChange(-1)
	}
	if st.empty() {
		delete(s.byGroup, key)
	}
}

// read runs view on the group's state; a group without one reads as
// empty.
func (s *states) read(key types.NamespacedName, view func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.byGroup[key]; st != nil {
		view(st)
		return
	}
	view(emptyState)
}

// emptyState is what a group without a state reads as; it is never
// written.
var emptyState = newState()

// boundAt is when a pod was bound: the API server sets its PodScheduled
// condition then. A pod created with its node set has none; its creation
// is when it took the room.
func boundAt(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}
