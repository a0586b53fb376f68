package groupstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/muster-dev/muster/pkg/gangview"
)

func TestWaitingGaugeFollowsTheGroups(t *testing.T) {
	var waiting float64
	s := NewAttempts(func(d float64) { waiting += d })
	a := types.NamespacedName{Namespace: "team-a", Name: "a"}
	b := types.NamespacedName{Namespace: "team-a", Name: "b"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Reserve(a, "a0")
	s.Reserve(a, "a1")
	s.Reserve(b, "b0")
	assert.Equal(t, 2.0, waiting, "two gangs wait")
	s.Admit(a, now)
	assert.Equal(t, 1.0, waiting, "an admitted gang no longer waits")
	s.Begin(b)
	s.Fail(b, now, 0, FoundNoRoom, "member x fits on no node")
	s.Unreserve(b, "b0")
	assert.Equal(t, 0.0, waiting)
}

// TestAFailedAttemptGivesUpTheRoomHeldForItsLateMembers: the attempt
// tells the rooms' releaser (HeldRooms, which alone releases them) that
// the failed gang's rooms end, and not another's.
func TestAFailedAttemptGivesUpTheRoomHeldForItsLateMembers(t *testing.T) {
	s := NewAttempts(func(float64) {})
	mpi := types.NamespacedName{Namespace: "team-a", Name: "mpi"}
	ended := map[types.NamespacedName]RoomsEnd{}
	s.rooms.OnEnd(func(key types.NamespacedName, why RoomsEnd) { ended[key] = why })
	s.Begin(mpi)
	s.Reserve(mpi, "w0")
	reserved, _ := s.Fail(mpi, time.Now(), 0, FoundNoRoom, "member w1 fits on no node")
	assert.Equal(t, []types.UID{"w0"}, reserved)
	assert.Equal(t, map[types.NamespacedName]RoomsEnd{mpi: AttemptEnded}, ended, "the failed gang's rooms end, and no other gang's")
}

func TestAnAttemptKeepsItsDomainOnlyWhenItEndsToWaitForItsVictims(t *testing.T) {
	s := NewAttempts(func(float64) {})
	key := types.NamespacedName{Namespace: "team-a", Name: "a"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Begin(key)
	s.ChooseDomain(key, Domain{Name: "rack-b"})
	s.Fail(key, now, 0, WaitsForVictims, "member x fits once the victims preempted for the gang are gone")
	d, chosen := s.Domain(key)
	assert.True(t, chosen)
	assert.Equal(t, "rack-b", d.Name, "the next attempt goes where the victims are going")

	s.Begin(key)
	s.Fail(key, now, time.Second, FoundNoRoom, "member x fits on no node")
	_, chosen = s.Domain(key)
	assert.False(t, chosen, "a failed attempt's domain is forgotten")
}

func TestAnAttemptThatLostItsDomainKeepsItsPlaceAndTriesAnother(t *testing.T) {
	s := NewAttempts(func(float64) {})
	key := types.NamespacedName{Namespace: "team-a", Name: "a"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Begin(key)
	s.Fail(key, now, time.Second, FoundNoRoom, "member x fits on no node")
	s.Begin(key)
	s.ChooseDomain(key, Domain{Name: "rack-b"})
	s.Fail(key, now.Add(time.Minute), time.Second, LostItsDomain, "member x fits in no node of the gang's domain rack-b")
	_, chosen := s.Domain(key)
	assert.False(t, chosen, "the next attempt chooses again")
	assert.ElementsMatch(t, []string{"rack-b"}, s.TriedDomains(key).UnsortedList(), "another domain")
	var queuedAt time.Time
	s.read(key, func(a *attempt) { queuedAt = a.queuedAt })
	assert.Equal(t, now, queuedAt, "queued by its last failure for want of room, as before")
}

func TestAFailedAttemptsDomainIsTriedUntilTheGangIsAdmittedOrFitsNone(t *testing.T) {
	s := NewAttempts(func(float64) {})
	key := types.NamespacedName{Namespace: "team-a", Name: "a"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := func(domain string) {
		s.Begin(key)
		s.ChooseDomain(key, Domain{Name: domain})
		s.Fail(key, now, time.Second, FoundNoRoom, "member x fits in no node of the gang's domain")
	}
	fail("rack-a")
	fail("rack-b")
	assert.ElementsMatch(t, []string{"rack-a", "rack-b"}, s.TriedDomains(key).UnsortedList())

	s.ChooseDomain(key, Domain{Unplaceable: "no domain has room"})
	assert.Zero(t, s.TriedDomains(key).Len(), "found to fit none, the gang may try every domain after its backoff")

	fail("rack-a")
	s.Admit(key, now)
	assert.Zero(t, s.TriedDomains(key).Len(), "admitted")
}

func TestTheFirstReservationTakesTheMembersTheBackoffTurnedAway(t *testing.T) {
	s := NewAttempts(func(float64) {})
	job := types.NamespacedName{Namespace: "team-a", Name: "job"}
	s.TurnAway(job, "p0")
	s.TurnAway(job, "p1")
	s.TurnAway(job, "p1")
	assert.ElementsMatch(t, []types.UID{"p1"}, s.Reserve(job, "p0"), "the member reserving is not woken")
	s.TurnAway(job, "p2")
	assert.Empty(t, s.Reserve(job, "p2"), "a later reservation takes none")

	s.Begin(job)
	s.Fail(job, time.Now(), 0, FoundNoRoom, "member p3 fits on no node")
	assert.ElementsMatch(t, []types.UID{"p2"}, s.Reserve(job, "p0"), "kept for the next attempt's first reservation")
	assert.Empty(t, s.Reserve(job, "p1"))
}

// TestHowAFailedAttemptEnds pins what each Ending keeps of the attempt:
// its domain, whether the domain counts as tried, and the group's backoff
// and reason, which every ending sets.
func TestHowAFailedAttemptEnds(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rackB := Domain{Name: "rack-b"}
	tests := []struct {
		name       string
		ending     Ending
		wantDomain bool
		wantTried  bool
	}{
		{name: "a gang that found no room forgets its domain and counts it tried", ending: FoundNoRoom, wantTried: true},
		{name: "a gang that lost its domain's room to another pod tries another", ending: LostItsDomain, wantTried: true},
		{name: "a gang waiting for its victims keeps the domain they free", ending: WaitsForVictims, wantDomain: true},
		{name: "a gang waiting for its claims to be made counts no domain tried", ending: WaitsForClaims},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAttempts(func(float64) {})
			key := types.NamespacedName{Namespace: "team-a", Name: "a"}
			s.Begin(key)
			s.ChooseDomain(key, rackB)
			s.Reserve(key, "a0")

			reserved, first := s.Fail(key, now, time.Minute, tt.ending, "member a1 fits on no node")

			assert.Equal(t, []types.UID{"a0"}, reserved, "the members still holding a reservation are rejected")
			assert.True(t, first)
			assert.False(t, s.IsReserved(key, "a0"), "the reservations are given up")
			_, chosen := s.Domain(key)
			assert.Equal(t, tt.wantDomain, chosen)
			assert.Equal(t, tt.wantTried, s.TriedDomains(key).Has("rack-b"))
			until, failure := s.Backoff(key)
			assert.Equal(t, now.Add(time.Minute), until)
			assert.Equal(t, "member a1 fits on no node", failure)
			assert.Equal(t, []types.NamespacedName{key}, s.Failed())

			_, again := s.Fail(key, now, time.Minute, tt.ending, "a sibling's failure")
			assert.False(t, again, "a sibling's failure does not end the attempt again")
		})
	}
}

func TestShortenBackoff(t *testing.T) {
	failedAt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name          string
		backoff       time.Duration
		after         time.Duration
		wantUntil     time.Time
		wantShortened bool
	}{
		{name: "a backoff longer than asked ends sooner", backoff: time.Minute, after: 5 * time.Second, wantUntil: failedAt.Add(5 * time.Second), wantShortened: true},
		{name: "a backoff as short as asked is kept", backoff: 5 * time.Second, after: 5 * time.Second, wantUntil: failedAt.Add(5 * time.Second)},
		{name: "a backoff shorter than asked is never lengthened", backoff: time.Second, after: 5 * time.Second, wantUntil: failedAt.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAttempts(func(float64) {})
			key := types.NamespacedName{Namespace: "team-a", Name: "a"}
			s.Begin(key)
			s.Fail(key, failedAt, tt.backoff, FoundNoRoom, "no room")
			until, shortened := s.ShortenBackoff(key, tt.after)
			assert.Equal(t, tt.wantUntil, until)
			assert.Equal(t, tt.wantShortened, shortened)
		})
	}
}

func TestAdmissionLatencyAndWhatAdmissionClears(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		seen        bool
		wantLatency time.Duration
	}{
		{name: "the latency runs from the first member seen at PreEnqueue", seen: true, wantLatency: 3 * time.Second},
		{name: "a group no member of which was seen, as after a restart, has none", wantLatency: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAttempts(func(float64) {})
			key := types.NamespacedName{Namespace: "team-a", Name: "a"}
			if tt.seen {
				s.Seen(key, start)
				s.Seen(key, start.Add(time.Second))
			}
			s.Begin(key)
			s.ChooseDomain(key, Domain{Name: "rack-a"})
			s.Fail(key, start, time.Minute, FoundNoRoom, "no room")
			s.Begin(key)
			s.Reserve(key, "a0")

			waiting, latency, first := s.Admit(key, start.Add(3*time.Second))

			assert.Equal(t, []types.UID{"a0"}, waiting)
			assert.Equal(t, tt.wantLatency, latency)
			assert.True(t, first)
			assert.True(t, s.IsAdmitted(key))
			until, _ := s.Backoff(key)
			assert.True(t, until.IsZero(), "an admitted gang has no backoff")
			assert.Empty(t, s.TriedDomains(key), "an admitted gang has tried no domain")
			assert.Empty(t, s.Failed())

			_, latency, first = s.Admit(key, start.Add(time.Hour))
			assert.False(t, first, "admitted once")
			assert.Zero(t, latency)
		})
	}
}

// TestAnAttemptEndingAsTheLastDidChangesNothing: the published result
// keeps the time its attempts began to end so, and the publisher is told
// only of a change, so that a gang retried while it waits costs no write.
func TestAnAttemptEndingAsTheLastDidChangesNothing(t *testing.T) {
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := first.Add(time.Minute)
	tests := []struct {
		name        string
		admitted    bool
		message     string
		wantTime    time.Time
		wantChanges int
	}{
		{name: "the same result again keeps its first time and tells nothing", message: "member x fits on no node", wantTime: first, wantChanges: 1},
		{name: "another reason is a new result", message: "member y fits on no node", wantTime: later, wantChanges: 2},
		{name: "admission after a rejection is a new result", admitted: true, message: "member x fits on no node", wantTime: later, wantChanges: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAttempts(func(float64) {})
			changes := 0
			s.changed = func(types.NamespacedName) { changes++ }
			key := types.NamespacedName{Namespace: "team-a", Name: "a"}
			s.Begin(key) // a group with an attempt, whose state is kept
			s.Record(key, first, false, "member x fits on no node")
			s.Record(key, later, tt.admitted, tt.message)
			var got *gangview.Attempt
			s.read(key, func(a *attempt) { got = a.result })
			require.NotNil(t, got)
			assert.Equal(t, tt.wantTime, got.Time.Time)
			assert.Equal(t, tt.admitted, got.Admitted)
			assert.Equal(t, tt.message, got.Message)
			assert.Equal(t, tt.wantChanges, changes)
		})
	}
}

// TestReservationsAndTheMembersTurnedAway pins what a reservation does to
// the members the group's backoff turned away: the first reservation of
// an attempt brings them back, once, but for itself.
func TestReservationsAndTheMembersTurnedAway(t *testing.T) {
	tests := []struct {
		name       string
		turnedAway []types.UID
		reserve    []types.UID
		want       []types.UID
	}{
		{name: "none turned away, none brought back", reserve: []types.UID{"a0"}},
		{name: "the first reservation brings back the others turned away", turnedAway: []types.UID{"a1", "a2"}, reserve: []types.UID{"a0"}, want: []types.UID{"a1", "a2"}},
		{name: "a member turned away and then reserved is not brought back", turnedAway: []types.UID{"a0", "a1"}, reserve: []types.UID{"a0"}, want: []types.UID{"a1"}},
		{name: "a second reservation brings back nothing more", turnedAway: []types.UID{"a2"}, reserve: []types.UID{"a0", "a1"}, want: []types.UID{"a2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAttempts(func(float64) {})
			key := types.NamespacedName{Namespace: "team-a", Name: "a"}
			for _, uid := range tt.turnedAway {
				s.TurnAway(key, uid)
			}
			var back []types.UID
			for _, uid := range tt.reserve {
				back = append(back, s.Reserve(key, uid)...)
				assert.True(t, s.IsReserved(key, uid))
			}
			assert.ElementsMatch(t, tt.want, back)
			assert.True(t, s.IsWaiting(key), "reserved and not admitted: waiting at Permit")
		})
	}
}

func TestUnreserveSaysWhetherTheMemberStillHeldItsReservation(t *testing.T) {
	s := NewAttempts(func(float64) {})
	key := types.NamespacedName{Namespace: "team-a", Name: "a"}
	s.Reserve(key, "a0")
	s.Reserve(key, "a1")
	s.Begin(key)
	s.Fail(key, time.Now(), 0, FoundNoRoom, "no room")
	assert.False(t, s.Unreserve(key, "a0"), "the failed attempt rejected it: it held none")

	s.Reserve(key, "a2")
	assert.True(t, s.Unreserve(key, "a2"))
	assert.False(t, s.IsReserved(key, "a2"))
	assert.False(t, s.IsWaiting(key))
}

func TestPreemptedIsTakenOnce(t *testing.T) {
	s := NewAttempts(func(float64) {})
	key := types.NamespacedName{Namespace: "team-a", Name: "a"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.True(t, s.TakePreempted(key).IsZero(), "none preempted")
	s.Begin(key)
	s.Preempted(key, at)
	assert.Equal(t, at, s.TakePreempted(key))
	assert.True(t, s.TakePreempted(key).IsZero(), "forgotten once taken")
}

// TestHoldingListsTheAttemptsHoldingRoomInADomain: the attempts that hold
// reservations, not admitted, in a domain whose nodes were chosen.
func TestHoldingListsTheAttemptsHoldingRoomInADomain(t *testing.T) {
	nodes := sets.New("n1", "n2")
	tests := []struct {
		name   string
		domain *Domain
		admit  bool
		want   bool
	}{
		{name: "reserved in a domain with its nodes", domain: &Domain{Name: "rack-a", Nodes: nodes}, want: true},
		{name: "no domain chosen"},
		{name: "a domain with no nodes recorded", domain: &Domain{Name: "rack-a"}},
		{name: "admitted: holding no longer", domain: &Domain{Name: "rack-a", Nodes: nodes}, admit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAttempts(func(float64) {})
			key := types.NamespacedName{Namespace: "team-a", Name: "a"}
			s.Begin(key)
			if tt.domain != nil {
				s.ChooseDomain(key, *tt.domain)
			}
			s.Reserve(key, "a0")
			if tt.admit {
				s.Admit(key, time.Now())
			}
			d, holding := s.Holding()[key]
			assert.Equal(t, tt.want, holding)
			if tt.want {
				assert.Equal(t, *tt.domain, d)
			}
		})
	}
}

func TestAGangFoundToFitNoDomainForgetsTheDomainsItTried(t *testing.T) {
	s := NewAttempts(func(float64) {})
	key := types.NamespacedName{Namespace: "team-a", Name: "a"}
	for _, rack := range []string{"rack-a", "rack-b"} {
		s.Begin(key)
		s.ChooseDomain(key, Domain{Name: rack})
		s.Fail(key, time.Now(), 0, FoundNoRoom, "no room")
	}
	assert.Equal(t, sets.New("rack-a", "rack-b"), s.TriedDomains(key))
	s.Begin(key)
	s.ChooseDomain(key, Domain{Unplaceable: "no rack holds 4 members"})
	assert.Empty(t, s.TriedDomains(key), "after its backoff it may try them all again")
}

// TestTheLastFailureSetsTheBackoffAndItsReason: each attempt that fails
// sets the group's backoff from its own end and says why; a sibling's
// failure within the same attempt changes neither.
func TestTheLastFailureSetsTheBackoffAndItsReason(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		secondBegin bool
		wantUntil   time.Time
		wantReason  string
	}{
		{name: "a second attempt's failure replaces the first's", secondBegin: true, wantUntil: start.Add(time.Minute + 30*time.Second), wantReason: "member b fits on no node"},
		{name: "a sibling's failure in the same attempt changes nothing", wantUntil: start.Add(30 * time.Second), wantReason: "member a fits on no node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAttempts(func(float64) {})
			key := types.NamespacedName{Namespace: "team-a", Name: "a"}
			s.Begin(key)
			s.Fail(key, start, 30*time.Second, FoundNoRoom, "member a fits on no node")
			if tt.secondBegin {
				s.Begin(key)
			}
			s.Fail(key, start.Add(time.Minute), 30*time.Second, FoundNoRoom, "member b fits on no node")
			until, reason := s.Backoff(key)
			assert.Equal(t, tt.wantUntil, until)
			assert.Equal(t, tt.wantReason, reason)
		})
	}
}
