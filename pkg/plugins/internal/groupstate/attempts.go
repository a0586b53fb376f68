package groupstate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/muster-dev/muster/pkg/gangview"
)

// attempt is the scheduler's in-memory state of one group between the
// informer's view and the bind: which members hold a reservation, and how
// the last attempt ended. Everything else is derived from API objects, so a
// restarted scheduler loses nothing it needs.
type attempt struct {
	// reserved holds the members that passed Reserve and are not yet seen
	// bound by the informer.
	reserved sets.Set[types.UID]
	// firstSeen is when a member first passed PreEnqueue in this attempt,
	// the start of the admission latency.
	firstSeen time.Time
	// inProgress is set when a member enters a scheduling cycle and
	// cleared when the attempt fails, so that the siblings' failures that
	// follow from the same teardown are not counted again.
	inProgress bool
	// admitted is set once the group reached quorum at Permit.
	admitted bool
	// failedAt is the end of the last failed attempt.
	failedAt time.Time
	// queuedAt is the time the group is queued by after a failed attempt,
	// behind others of its priority: the failure's, but for an attempt
	// that ended to wait for the victims preempted for it, which keeps the
	// group's place.
	queuedAt     time.Time
	backoffUntil time.Time
	// failure says why the last attempt failed, for the members that
	// back off.
	failure string
	// preemptedAt is when victims were last preempted for the group, until
	// it is admitted.
	preemptedAt time.Time
	// domain is the topology domain chosen for the attempt, until it fails
	// but to wait for the victims preempted for it; nil until one is
	// chosen, or found to be missing.
	domain *Domain
	// tried are the domains whose attempts failed since the group was
	// last admitted or found no domain: the next attempt tries another.
	tried sets.Set[string]
	// result is the last attempt's result, as muster-scheduler
	// publishes it.
	result *gangview.Attempt
	// turnedAway holds the members the group's backoff turned away since
	// an attempt of it last began holding room. Each turn grows the
	// queue's own backoff of the member, which it then sits out while its
	// siblings hold their domain's room at Permit: they are brought back
	// when an attempt begins holding room (Reserve).
	turnedAway sets.Set[types.UID]
}

// Domain is where a gang with a topology constraint was placed for its
// attempt: the value of its required label (Name) and of its preferred
// one (Preferred), each "" where it has none or fits no single value of
// the preferred one; or none, and then Unplaceable says why.
type Domain struct {
	Name        string
	Preferred   string
	Unplaceable string
	// WaitsForClaims marks an Unplaceable that is no failure: some of the
	// members' ResourceClaims are not made from their templates yet, so
	// no trial can count the gang's devices.
	WaitsForClaims bool
	// Nodes are the domain's nodes as it was chosen, so that each member
	// of the attempt is not matched against every node again.
	Nodes sets.Set[string]
}

// IsSet reports whether the domain narrows the gang's nodes.
func (d Domain) IsSet() bool { return d.Name != "" || d.Preferred != "" }

// String names the domain, "rack-1" or "block-0/rack-1".
func (d Domain) String() string {
	switch {
	case d.Name == "":
		return d.Preferred
	case d.Preferred == "":
		return d.Name
	}
	return d.Name + "/" + d.Preferred
}

func (a *attempt) waiting() bool { return len(a.reserved) > 0 && !a.admitted }

// isFresh reports whether the attempt is as a new group's.
func (a *attempt) isFresh() bool {
	return len(a.reserved) == 0 && a.firstSeen.IsZero() && !a.inProgress && !a.admitted &&
		a.failedAt.IsZero() && a.queuedAt.IsZero() && a.backoffUntil.IsZero() && a.preemptedAt.IsZero() && a.domain == nil && a.tried.Len() == 0 &&
		a.turnedAway.Len() == 0
}

// Attempts changes and reads the attempt of every group the scheduler is
// working on, in the groups' State.
type Attempts struct {
	// changed is told of each group whose published state (its domain,
	// its last result) changed; nil for none.
	changed func(types.NamespacedName)
	states  *states
	// rooms are the rooms held for late members, which a failed attempt
	// ends with its reservations.
	rooms *Rooms
}

// NewAttempts returns the attempts of groups with no state yet.
func NewAttempts(onWaitingChange func(float64)) *Attempts {
	return &Attempts{states: newStates(onWaitingChange), rooms: NewRooms()}
}

func (s *Attempts) update(key types.NamespacedName, change func(*attempt)) {
	s.states.update(key, func(st *State) { change(&st.attempt) })
}

func (s *Attempts) read(key types.NamespacedName, view func(*attempt)) {
	s.states.read(key, func(st *State) { view(&st.attempt) })
}

// Seen records that a member passed PreEnqueue.
func (s *Attempts) Seen(key types.NamespacedName, now time.Time) {
	s.update(key, func(a *attempt) {
		if a.firstSeen.IsZero() {
			a.firstSeen = now
		}
	})
}

// Reserve records that a member holds a reservation. When it is the
// first of the group's members that do, it returns the members the group's
// backoff turned away (TurnAway), and forgets them.
func (s *Attempts) Reserve(key types.NamespacedName, uid types.UID) (turnedAway []types.UID) {
	s.update(key, func(a *attempt) {
		if a.reserved.Len() == 0 {
			a.turnedAway.Delete(uid)
			turnedAway = a.turnedAway.UnsortedList()
			a.turnedAway = nil
		}
		a.reserved.Insert(uid)
	})
	return turnedAway
}

// TurnAway records that the group's backoff turned a member away.
func (s *Attempts) TurnAway(key types.NamespacedName, uid types.UID) {
	s.update(key, func(a *attempt) {
		if a.turnedAway == nil {
			a.turnedAway = sets.New[types.UID]()
		}
		a.turnedAway.Insert(uid)
	})
}

// Unreserve records that a member gave its reservation up, and reports
// whether it still held one: a member the group's failed attempt
// rejected (Fail) holds none.
func (s *Attempts) Unreserve(key types.NamespacedName, uid types.UID) (held bool) {
	s.update(key, func(a *attempt) {
		held = a.reserved.Has(uid)
		a.reserved.Delete(uid)
	})
	return held
}

// IsReserved reports whether a member holds a reservation.
func (s *Attempts) IsReserved(key types.NamespacedName, uid types.UID) bool {
	var reserved bool
	s.read(key, func(a *attempt) { reserved = a.reserved.Has(uid) })
	return reserved
}

// Admit marks the group admitted. It returns the members waiting at Permit
// and, the first time only, how long admission took since firstSeen (0 when
// no member was seen passing PreEnqueue, as after a scheduler restart).
func (s *Attempts) Admit(key types.NamespacedName, now time.Time) (waiting []types.UID, latency time.Duration, first bool) {
	s.update(key, func(a *attempt) {
		waiting = a.reserved.UnsortedList()
		if a.admitted {
			return
		}
		a.admitted, first = true, true
		if !a.firstSeen.IsZero() {
			latency = now.Sub(a.firstSeen)
		}
		a.failedAt, a.queuedAt, a.backoffUntil = time.Time{}, time.Time{}, time.Time{}
		a.tried = nil
	})
	return waiting, latency, first
}

// Begin records that a member entered a scheduling cycle.
func (s *Attempts) Begin(key types.NamespacedName) {
	s.update(key, func(a *attempt) { a.inProgress = true })
}

// Ending is how a failed attempt leaves the group's place in the queue
// and the topology domain it chose.
type Ending int

const (
	// FoundNoRoom: the gang goes behind the gangs not tried since, and its
	// domain counts as tried.
	FoundNoRoom Ending = iota
	// LostItsDomain: another pod took room the attempt's domain was chosen
	// for. The gang lost a race, not for want of room: it keeps its place,
	// so that its members stay back to back in the queue, and tries another
	// domain.
	LostItsDomain
	// WaitsForVictims: the attempt ended only to wait for the victims
	// preempted for the gang. It keeps its place and the domain they free.
	WaitsForVictims
	// WaitsForClaims: the attempt ended only to wait for its members'
	// ResourceClaims to be made (Domain.WaitsForClaims). It keeps its
	// place, and no domain counts as tried.
	WaitsForClaims
)

// Fail ends the group's attempt, which failed for reason: it ends the
// rooms held for the group's late members (Rooms.End), returns the members still
// holding a reservation, to be rejected, which gives their reservations
// up, and whether this call ended the attempt (false when a
// sibling's failure already did).
func (s *Attempts) Fail(key types.NamespacedName, now time.Time, backoff time.Duration, ending Ending, reason string) (reserved []types.UID, first bool) {
	s.update(key, func(a *attempt) {
		reserved = a.reserved.UnsortedList()
		a.reserved.Clear()
		if !a.inProgress {
			return
		}
		first = true
		a.inProgress, a.admitted = false, false
		a.failedAt, a.backoffUntil, a.failure = now, now.Add(backoff), reason
		if ending == WaitsForVictims {
			return
		}
		if ending == WaitsForClaims {
			a.domain = nil
			return
		}
		if a.domain != nil && a.domain.IsSet() {
			if a.tried == nil {
				a.tried = sets.New[string]()
			}
			a.tried.Insert(a.domain.String())
		}
		a.domain = nil
		if ending == FoundNoRoom {
			a.queuedAt = now
		}
	})
	s.rooms.End(key, AttemptEnded)
	if first {
		s.tell(key)
	}
	return reserved, first
}

// Domain returns the topology domain chosen for the group's attempt, and
// whether one was chosen or found missing.
func (s *Attempts) Domain(key types.NamespacedName) (Domain, bool) {
	var d *Domain
	s.read(key, func(a *attempt) { d = a.domain })
	if d == nil {
		return Domain{}, false
	}
	return *d, true
}

// ChooseDomain records the topology domain of the group's attempt, kept
// until the attempt fails, unless it fails to wait for its victims. A
// gang found to fit no domain forgets the domains it tried: after its
// backoff it may try them all again.
func (s *Attempts) ChooseDomain(key types.NamespacedName, d Domain) {
	s.update(key, func(a *attempt) {
		a.domain = &d
		if d.Unplaceable != "" {
			a.tried = nil
		}
	})
	s.tell(key)
}

// Record records the result of the group's attempt, which the scheduler
// publishes. An attempt that ends as the last one did changes nothing, its
// time included: a gang waiting for room is tried again and again, and
// each retry would otherwise be a write of its record.
func (s *Attempts) Record(key types.NamespacedName, now time.Time, admitted bool, message string) {
	var changed bool
	s.update(key, func(a *attempt) {
		if r := a.result; r != nil && r.Admitted == admitted && r.Message == message {
			return
		}
		a.result, changed = &gangview.Attempt{Time: metav1.NewTime(now), Admitted: admitted, Message: message}, true
	})
	if changed {
		s.tell(key)
	}
}

func (s *Attempts) tell(key types.NamespacedName) {
	if s.changed != nil {
		s.changed(key)
	}
}

// TriedDomains returns the domains (Domain.String) whose attempts failed
// since the group was last admitted or found to fit no domain.
func (s *Attempts) TriedDomains(key types.NamespacedName) sets.Set[string] {
	var tried sets.Set[string]
	s.read(key, func(a *attempt) { tried = a.tried.Clone() })
	return tried
}

// IsAdmitted reports whether the group reached quorum in this attempt.
func (s *Attempts) IsAdmitted(key types.NamespacedName) bool {
	var admitted bool
	s.read(key, func(a *attempt) { admitted = a.admitted })
	return admitted
}

// IsWaiting reports whether members of the group wait at Permit for the
// rest of their quorum.
func (s *Attempts) IsWaiting(key types.NamespacedName) bool {
	var waiting bool
	s.read(key, func(a *attempt) { waiting = a.waiting() })
	return waiting
}

// Preempted records that victims were preempted for the group.
func (s *Attempts) Preempted(key types.NamespacedName, now time.Time) {
	s.update(key, func(a *attempt) { a.preemptedAt = now })
}

// TakePreempted returns when victims were last preempted for the group,
// or zero, and forgets it: the group is admitted.
func (s *Attempts) TakePreempted(key types.NamespacedName) time.Time {
	var at time.Time
	s.update(key, func(a *attempt) { at, a.preemptedAt = a.preemptedAt, time.Time{} })
	return at
}

// ShortenBackoff lets the group be tried again at most after past its
// failure, which still orders it in the queue; it returns the new end of
// its backoff, and whether this call moved it.
func (s *Attempts) ShortenBackoff(key types.NamespacedName, after time.Duration) (until time.Time, shortened bool) {
	s.update(key, func(a *attempt) {
		if end := a.failedAt.Add(after); end.Before(a.backoffUntil) {
			a.backoffUntil, shortened = end, true
		}
		until = a.backoffUntil
	})
	return until, shortened
}

// Backoff is when the group may be tried again, and why its last attempt
// failed.
func (s *Attempts) Backoff(key types.NamespacedName) (until time.Time, failure string) {
	s.read(key, func(a *attempt) { until, failure = a.backoffUntil, a.failure })
	return until, failure
}

// Failed lists the groups whose last attempt failed: the scheduler found
// no room for a member and the group has not been admitted since.
func (s *Attempts) Failed() []types.NamespacedName {
	s.states.mu.Lock()
	defer s.states.mu.Unlock()
	var keys []types.NamespacedName
	for key, st := range s.states.byGroup {
		if a := &st.attempt; !a.admitted && !a.failedAt.IsZero() {
			keys = append(keys, key)
		}
	}
	return keys
}

// Holding returns the domains of the attempts that hold reservations in
// one, by group.
func (s *Attempts) Holding() map[types.NamespacedName]Domain {
	s.states.mu.Lock()
	defer s.states.mu.Unlock()
	holding := map[types.NamespacedName]Domain{}
	for key, st := range s.states.byGroup {
		if a := &st.attempt; a.waiting() && a.domain != nil && a.domain.Nodes != nil {
			holding[key] = *a.domain
		}
	}
	return holding
}

// forget ends the group's attempt, when the group has no active member
// left; the caller holds the lock.
func (a *attempt) forget() { *a = attempt{reserved: sets.New[types.UID]()} }
