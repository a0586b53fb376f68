// Package groupstate is the scheduler's state of its groups, which no API
// object holds: each group's members counted by phase, role, place and
// node; its scheduling attempt; the rooms held for its late members; and
// what one scheduling cycle records of its pod's group. It has no client,
// informer, goroutine or clock: group.Model, the state's only owner, feeds
// it the informers' events and the time, and the plugins change the
// attempts and rooms through it. Every read is O(1) in a group's size.
package groupstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/topology"
)

// Store is the state of every group of one scheduler, with their attempts
// and held rooms.
type Store struct {
	states   *states
	attempts *Attempts
	rooms    *Rooms
	// beforeRead runs before each read of a group: the model counts the
	// group again while its pod informer has not delivered its initial
	// list. nil for none.
	beforeRead func(types.NamespacedName)
}

// NewStore returns the state of no group. onWaitingChange is told as a
// group starts (1) or stops (-1) waiting at Permit; beforeRead runs before
// each read of a group, and may be nil.
func NewStore(onWaitingChange func(float64), beforeRead func(types.NamespacedName)) *Store {
	s := &Store{states: newStates(onWaitingChange), rooms: NewRooms(), beforeRead: beforeRead}
	s.attempts = &Attempts{states: s.states, rooms: s.rooms}
	return s
}

// TellChanges has changed told of each group whose attempt's published
// part (its domain, its last result) or rooms changed.
func (s *Store) TellChanges(changed func(types.NamespacedName)) {
	s.attempts.changed = changed
	s.rooms.changed = changed
}

// Attempts changes and reads the groups' attempts.
func (s *Store) Attempts() *Attempts { return s.attempts }

// Rooms are the rooms held for the groups' late members.
func (s *Store) Rooms() *Rooms { return s.rooms }

func (s *Store) read(key types.NamespacedName, view func(*State)) {
	if s.beforeRead != nil {
		s.beforeRead(key)
	}
	s.states.read(key, view)
}

// Recount counts the group's members again: the members given, against
// the group's PodGroup pg (nil when it has none). It reports whether the
// gang is now noted to have its quorum for the first time against pg.
func (s *Store) Recount(key types.NamespacedName, pg *v1alpha1.PodGroup, members []*corev1.Pod) (quorumNoted bool) {
	s.states.update(key, func(st *State) {
		for uid := range st.members {
			st.remove(uid)
		}
		st.podGroup = ""
		if pg != nil {
			st.podGroup = pg.UID
		}
		for _, pod := range members {
			st.put(pod)
		}
		quorumNoted = st.noteQuorum(pg)
	})
	return quorumNoted
}

// Observe records the pod as the informer now shows it: as a member of
// the group of pg, or, when member is false, as no longer one. It reports
// whether the gang is noted to have its quorum for the first time against
// pg, and how long a stretch of being partly bound that ended now lasted.
func (s *Store) Observe(key types.NamespacedName, pod *corev1.Pod, member bool, pg *v1alpha1.PodGroup, now time.Time) (quorumNoted bool, partly time.Duration) {
	s.states.update(key, func(st *State) {
		if member {
			st.put(pod)
			quorumNoted = st.noteQuorum(pg)
		} else {
			st.remove(pod.UID)
		}
		partly = st.notePartly(pg, now)
	})
	return quorumNoted, partly
}

// Forget forgets a member the scheduler's informer no longer shows, and
// its reservation; a group with no active member left starts its next
// attempt afresh. A member seen succeeded is kept until a pod that
// succeeded is deleted: the scheduler's informer shows no finished pod,
// and tells of one that finished as deleted, as it last ran. It returns
// how long a stretch of being partly bound that ended now lasted.
func (s *Store) Forget(key types.NamespacedName, pod *corev1.Pod, pg *v1alpha1.PodGroup, now time.Time) (partly time.Duration) {
	s.states.update(key, func(st *State) {
		if !st.succeeded(pod.UID) || pod.Status.Phase == corev1.PodSucceeded {
			st.remove(pod.UID)
		}
		partly = st.notePartly(pg, now)
		st.attempt.reserved.Delete(pod.UID)
		if st.census.Active() == 0 {
			st.attempt.forget()
		}
	})
	return partly
}

// ForgetPodGroup forgets the attempt and the quorum of a group whose
// PodGroup was deleted; its members are counted again (Recount).
func (s *Store) ForgetPodGroup(key types.NamespacedName) {
	s.states.update(key, func(st *State) {
		st.attempt.forget()
		st.quorumHad = ""
	})
}

// QuorumHeld reports whether the gang of pg has had its quorum bound at
// once, as this scheduler saw it, or has it bound now.
func (s *Store) QuorumHeld(key types.NamespacedName, pg *v1alpha1.PodGroup) bool {
	var had bool
	s.read(key, func(st *State) { had = st.quorumHad == pg.UID || topology.QuorumOf(pg).ReachedBy(st.census.Bound()) })
	return had
}

// Quorum returns how many members count toward the group's minMember, as
// counting says, and whether they reach it. It is the one definition of a
// gang's quorum.
func (s *Store) Quorum(key types.NamespacedName, minMember int32, counting Counting) (placed int32, reached bool) {
	s.read(key, func(st *State) { placed = st.placed() })
	if counting.HeldRooms {
		placed += s.rooms.Count(key, "")
	}
	return placed, topology.Quorum{MinMember: minMember}.ReachedBy(placed)
}

// ActiveOf counts the group's active members of each role given, and
// reports whether a pod of any of them exists, in any phase.
func (s *Store) ActiveOf(key types.NamespacedName, roles []string) (active map[string]int32, any bool) {
	active = map[string]int32{}
	s.read(key, func(st *State) {
		for _, role := range roles {
			if c := st.roles[role]; c != nil {
				active[role] = c.Active
				any = any || c.Any > 0
			}
		}
	})
	return active, any
}

// Census counts the group's members by phase.
func (s *Store) Census(key types.NamespacedName) topology.Census {
	var c topology.Census
	s.read(key, func(st *State) { c = st.census })
	return c
}

// Role is what the group knows of one role's members.
func (s *Store) Role(key types.NamespacedName, role string) RoleCount {
	var r RoleCount
	s.read(key, func(st *State) {
		if c := st.roles[role]; c != nil {
			r = *c
		}
	})
	return r
}

// BoundCount returns how many of the group's active members are bound;
// the queue's Less asks it for every comparison.
func (s *Store) BoundCount(key types.NamespacedName) int32 {
	return s.Census(key).Bound()
}

// BoundNode returns a node one of the group's active members is bound to.
func (s *Store) BoundNode(key types.NamespacedName) (node string, ok bool) {
	s.read(key, func(st *State) { node, ok = st.boundNode() })
	return node, ok
}

// Bound returns how many of the group's active members are bound, and when
// the last of them was.
func (s *Store) Bound(key types.NamespacedName) (count int32, last time.Time) {
	s.read(key, func(st *State) { count, last = st.census.Bound(), st.lastBind() })
	return count, last
}

// Pending returns the group's active members not bound to a node, in no
// order: the state keeps them as members change, so nothing is scanned.
func (s *Store) Pending(key types.NamespacedName) []*corev1.Pod {
	var pending []*corev1.Pod
	s.read(key, func(st *State) {
		for _, pod := range st.unbound {
			pending = append(pending, pod)
		}
	})
	return pending
}

// PendingOf returns those of the given members that are active and not
// bound to a node.
func (s *Store) PendingOf(key types.NamespacedName, uids []types.UID) []*corev1.Pod {
	var pods []*corev1.Pod
	s.read(key, func(st *State) {
		for _, uid := range uids {
			if pod, ok := st.unbound[uid]; ok {
				pods = append(pods, pod)
			}
		}
	})
	return pods
}

// Unplaced returns the group's active members neither bound nor holding
// a reservation, and how many more placed members the gang of pg needs.
func (s *Store) Unplaced(key types.NamespacedName, pg *v1alpha1.PodGroup) (unplaced []*corev1.Pod, need int32) {
	s.read(key, func(st *State) {
		need = topology.QuorumOf(pg).Short(st.placed())
		for uid, pod := range st.unbound {
			if !st.attempt.reserved.Has(uid) {
				unplaced = append(unplaced, pod)
			}
		}
	})
	return unplaced, need
}

// OthersInPlace counts the group's active members other than pod in the
// place (role and index, by its labels) pod's labels give it; none when
// they give it none.
func (s *Store) OthersInPlace(key types.NamespacedName, pod *corev1.Pod) int32 {
	place := PlaceOf(pod)
	if place == "" {
		return 0
	}
	var others int32
	s.read(key, func(st *State) {
		others = st.places[place]
		if own, counted := st.members[pod.UID]; counted && own.place == place && own.phase.IsActive() {
			others--
		}
	})
	return others
}

// QueueState is what the queue's order reads of a group's state.
type QueueState struct {
	// Bound counts the active members bound.
	Bound int32
	// QuorumHad reports whether the gang was seen with its quorum bound
	// against the PodGroup asked about.
	QuorumHad bool
	// Reserving: the attempt holds reservations, not yet admitted.
	Reserving bool
	// QueuedAt is the time the group is queued by after a failed attempt,
	// or zero; SeenAt is when a member first passed PreEnqueue.
	QueuedAt, SeenAt time.Time
}

// QueueStateOf reads the group's QueueState against the PodGroup of UID
// podGroup, in one read.
func (s *Store) QueueStateOf(key types.NamespacedName, podGroup types.UID) QueueState {
	var q QueueState
	s.read(key, func(st *State) {
		q.Bound, q.QuorumHad = st.census.Bound(), st.quorumHad == podGroup
		q.QueuedAt, q.SeenAt = st.attempt.queuedAt, st.attempt.firstSeen
		q.Reserving = st.attempt.waiting()
	})
	return q
}

// Published reads what the scheduler publishes of the group's attempt:
// its domain, nil when none was chosen or found missing, and its last
// result, nil before any.
func (s *Store) Published(key types.NamespacedName) (domain *Domain, result *gangview.Attempt) {
	s.states.read(key, func(st *State) {
		domain = st.attempt.domain
		if r := st.attempt.result; r != nil {
			copied := *r
			result = &copied
		}
	})
	return domain, result
}
