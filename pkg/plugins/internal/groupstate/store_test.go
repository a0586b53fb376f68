package groupstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

var train = types.NamespacedName{Namespace: "ns", Name: "train"}

// pod is a member of ns/train: in role (none when ""), with index
// (none when ""), on node unless it is "", in phase, Ready when ready.
type pod struct {
	name, role, index, node string
	phase                   corev1.PodPhase
	ready, deleting         bool
}

func (p pod) obj() *corev1.Pod {
	o := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: train.Namespace, Name: p.name, UID: types.UID(p.name), Labels: map[string]string{topology.GroupLabel: train.Name}},
		Spec:       corev1.PodSpec{NodeName: p.node, SchedulerName: topology.SchedulerName},
		Status:     corev1.PodStatus{Phase: p.phase},
	}
	if p.role != "" {
		o.Labels[topology.RoleLabel] = p.role
	}
	if p.index != "" {
		o.Labels[topology.IndexLabel] = p.index
	}
	if p.ready {
		o.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if p.deleting {
		now := metav1.NewTime(epoch)
		o.DeletionTimestamp = &now
	}
	return o
}

func podGroupOf(minMember int32) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: train.Namespace, Name: train.Name, UID: "pg-1"}, Spec: v1alpha1.PodGroupSpec{MinMember: minMember}}
}

// storeOf is a Store that has observed the pods as members of a gang of
// minMember.
func storeOf(minMember int32, pods ...pod) *Store {
	s := NewStore(func(float64) {}, nil)
	for _, p := range pods {
		s.Observe(train, p.obj(), true, podGroupOf(minMember), epoch)
	}
	return s
}

func TestPlaceOf(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{name: "a role and an index", labels: map[string]string{topology.RoleLabel: "worker", topology.IndexLabel: "3"}, want: "worker/3"},
		{name: "a role with no index is its role's only replica", labels: map[string]string{topology.RoleLabel: "launcher"}, want: "launcher/0"},
		{name: "a JobSet's pods share a place per role", labels: map[string]string{topology.RoleLabel: "worker", topology.JobSetJobIndexLabel: "2"}, want: "worker/jobset"},
		{name: "no role is no place", labels: map[string]string{topology.IndexLabel: "3"}},
		{name: "an index that is no number is no place", labels: map[string]string{topology.RoleLabel: "worker", topology.IndexLabel: "three"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, PlaceOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}))
		})
	}
}

// TestTheCensusAndRolesFollowTheMembers pins how members in each phase
// are counted, by phase and by role.
func TestTheCensusAndRolesFollowTheMembers(t *testing.T) {
	tests := []struct {
		name                  string
		pods                  []pod
		wantActive, wantBound int32
		wantUnbound, wantAny  int32
		wantRoleActive        int32
		wantReached           [3]int32
		wantPending           []string
	}{
		{name: "no member counts nothing"},
		{
			name:       "pending members are active and unbound, and pending",
			pods:       []pod{{name: "a", role: "worker"}, {name: "b", role: "worker"}},
			wantActive: 2, wantUnbound: 2, wantAny: 2, wantRoleActive: 2, wantPending: []string{"a", "b"},
		},
		{
			name:       "a bound member reached Scheduled, a running one Running, a Ready one Ready",
			pods:       []pod{{name: "a", role: "worker", node: "n1"}, {name: "b", role: "worker", node: "n1", phase: corev1.PodRunning}, {name: "c", role: "worker", node: "n2", phase: corev1.PodRunning, ready: true}},
			wantActive: 3, wantBound: 3, wantAny: 3, wantRoleActive: 3, wantReached: [3]int32{3, 2, 1},
		},
		{
			name:    "a finished member counts for its role but reaches nothing",
			pods:    []pod{{name: "a", role: "worker", node: "n1", phase: corev1.PodSucceeded}},
			wantAny: 1,
		},
		{
			name:    "a member being deleted is no longer active",
			pods:    []pod{{name: "a", role: "worker", node: "n1", phase: corev1.PodRunning, deleting: true}},
			wantAny: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storeOf(2, tt.pods...)
			c := s.Census(train)
			assert.Equal(t, []int32{tt.wantActive, tt.wantBound, tt.wantUnbound}, []int32{c.Active(), c.Bound(), c.Unbound()}, "active, bound, unbound")
			assert.Equal(t, tt.wantBound, s.BoundCount(train))
			r := s.Role(train, "worker")
			assert.Equal(t, tt.wantAny, r.Any)
			assert.Equal(t, tt.wantRoleActive, r.Active)
			assert.Equal(t, tt.wantReached, [3]int32{r.ReachedCount(topology.StartAfterScheduled), r.ReachedCount(topology.StartAfterRunning), r.ReachedCount(topology.StartAfterReady)})
			var pending []string
			for _, p := range s.Pending(train) {
				pending = append(pending, p.Name)
			}
			assert.ElementsMatch(t, tt.wantPending, pending)
		})
	}
}

func TestAMemberSeenAgainReplacesWhatWasKeptOfIt(t *testing.T) {
	s := storeOf(2, pod{name: "a", role: "worker"})
	s.Observe(train, pod{name: "a", role: "worker", node: "n1", phase: corev1.PodRunning}.obj(), true, podGroupOf(2), epoch)
	c := s.Census(train)
	assert.Equal(t, int32(1), c.Active(), "counted once")
	assert.Equal(t, int32(1), c.Running())
	assert.Empty(t, s.Pending(train))

	s.Observe(train, pod{name: "a", role: "worker", node: "n1"}.obj(), false, podGroupOf(2), epoch)
	assert.Zero(t, s.Census(train).Active(), "a pod seen as no longer a member is forgotten")
	assert.Zero(t, s.Role(train, "worker").Any)
}

// TestTheQuorumCountsWhatItsCallerSays pins what counts toward the
// quorum by Counting: members bound, reserved or succeeded always, held
// rooms when the caller says so.
func TestTheQuorumCountsWhatItsCallerSays(t *testing.T) {
	members := []pod{
		{name: "bound", role: "worker", node: "n1"},
		{name: "reserved", role: "worker"},
		{name: "done", role: "worker", node: "n1", phase: corev1.PodSucceeded},
		{name: "pending", role: "worker"},
	}
	tests := []struct {
		name        string
		counting    Counting
		minMember   int32
		wantPlaced  int32
		wantReached bool
	}{
		{name: "bound, reserved and succeeded members count", minMember: 4, wantPlaced: 3},
		{name: "with the held rooms", counting: Counting{HeldRooms: true}, minMember: 4, wantPlaced: 4, wantReached: true},
		{name: "a quorum reached exactly", minMember: 3, wantPlaced: 3, wantReached: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storeOf(tt.minMember, members...)
			s.Attempts().Reserve(train, "reserved")
			s.Rooms().Add(&Room{Group: train, Role: "launcher", Node: "n2"})
			placed, reached := s.Quorum(train, tt.minMember, tt.counting)
			assert.Equal(t, tt.wantPlaced, placed)
			assert.Equal(t, tt.wantReached, reached)
		})
	}
}

func TestAMemberSeenBoundLeavesTheReservations(t *testing.T) {
	s := storeOf(2, pod{name: "a", role: "worker"})
	s.Attempts().Reserve(train, "a")
	placed, _ := s.Quorum(train, 2, Counting{})
	require.Equal(t, int32(1), placed)

	s.Observe(train, pod{name: "a", role: "worker", node: "n1"}.obj(), true, podGroupOf(2), epoch)
	placed, _ = s.Quorum(train, 2, Counting{})
	assert.Equal(t, int32(1), placed, "counted once, bound")
	assert.False(t, s.Attempts().IsReserved(train, "a"))
}

// TestTheQuorumIsNotedOnceAgainstItsPodGroup: Observe and Recount report
// the first time a PodGroup's gang has its quorum bound; QuorumHeld keeps
// it for good against that PodGroup, and only that one.
func TestTheQuorumIsNotedOnceAgainstItsPodGroup(t *testing.T) {
	pg := podGroupOf(2)
	s := NewStore(func(float64) {}, nil)
	noted, _ := s.Observe(train, pod{name: "a", node: "n1"}.obj(), true, pg, epoch)
	assert.False(t, noted, "one of two")
	noted, _ = s.Observe(train, pod{name: "b", node: "n1"}.obj(), true, pg, epoch)
	assert.True(t, noted, "two of two: noted")
	noted, _ = s.Observe(train, pod{name: "b", node: "n1", phase: corev1.PodRunning}.obj(), true, pg, epoch)
	assert.False(t, noted, "noted once")

	s.Forget(train, pod{name: "b"}.obj(), pg, epoch)
	assert.True(t, s.QuorumHeld(train, pg), "a gang that had its quorum keeps it")
	raised := pg.DeepCopy()
	raised.Spec.MinMember = 3
	assert.True(t, s.QuorumHeld(train, raised), "through a raised minMember")
	other := pg.DeepCopy()
	other.UID = "pg-2"
	assert.False(t, s.QuorumHeld(train, other), "not against a PodGroup made again")

	s.ForgetPodGroup(train)
	assert.False(t, s.QuorumHeld(train, pg), "forgotten with its PodGroup")
	assert.True(t, s.Recount(train, pg, []*corev1.Pod{pod{name: "a", node: "n1"}.obj(), pod{name: "c", node: "n2"}.obj()}), "a recount that finds the quorum bound notes it")
	assert.Equal(t, int32(2), s.BoundCount(train))
}

// TestAPartlyBoundStretchIsTimed pins what Observe and Forget return: how
// long a gang was partly bound, once the stretch ends.
func TestAPartlyBoundStretchIsTimed(t *testing.T) {
	pg := podGroupOf(2)
	s := NewStore(func(float64) {}, nil)
	_, partly := s.Observe(train, pod{name: "a", node: "n1"}.obj(), true, pg, epoch)
	assert.Zero(t, partly, "a stretch begins")
	_, partly = s.Observe(train, pod{name: "b", node: "n1"}.obj(), true, pg, epoch.Add(3*time.Second))
	assert.Equal(t, 3*time.Second, partly, "it ends with the quorum bound")

	s = NewStore(func(float64) {}, nil)
	s.Observe(train, pod{name: "a", node: "n1"}.obj(), true, pg, epoch)
	assert.Equal(t, 5*time.Second, s.Forget(train, pod{name: "a"}.obj(), pg, epoch.Add(5*time.Second)), "or with its last bound member gone")
}

func TestAGroupWithNoActiveMemberLeftStartsAfresh(t *testing.T) {
	s := storeOf(2, pod{name: "a"}, pod{name: "b"})
	s.Attempts().Begin(train)
	s.Attempts().Reserve(train, "a")
	s.Attempts().Fail(train, epoch, time.Minute, FoundNoRoom, "no room")

	s.Forget(train, pod{name: "a"}.obj(), podGroupOf(2), epoch)
	until, _ := s.Attempts().Backoff(train)
	assert.False(t, until.IsZero(), "a member left keeps the attempt")

	s.Forget(train, pod{name: "b"}.obj(), podGroupOf(2), epoch)
	until, _ = s.Attempts().Backoff(train)
	assert.True(t, until.IsZero(), "the last gone forgets it")
}

func TestBoundNodeAndLastBind(t *testing.T) {
	s := NewStore(func(float64) {}, nil)
	_, found := s.BoundNode(train)
	assert.False(t, found, "a group with none bound is on no node")

	for i, p := range []pod{{name: "a", node: "n1"}, {name: "b", node: "n2"}} {
		o := p.obj()
		o.Status.Conditions = append(o.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(epoch.Add(time.Duration(i) * time.Second))})
		s.Observe(train, o, true, podGroupOf(2), epoch)
	}
	node, found := s.BoundNode(train)
	assert.True(t, found)
	assert.Contains(t, []string{"n1", "n2"}, node)
	count, last := s.Bound(train)
	assert.Equal(t, int32(2), count)
	assert.Equal(t, epoch.Add(time.Second), last, "the last bind, by the PodScheduled condition")

	s.Forget(train, pod{name: "b"}.obj(), podGroupOf(2), epoch)
	count, last = s.Bound(train)
	assert.Equal(t, int32(1), count)
	assert.Equal(t, epoch, last, "found again once the last bound has left")
	node, _ = s.BoundNode(train)
	assert.Equal(t, "n1", node)
}

func TestActiveOfRoles(t *testing.T) {
	tests := []struct {
		name       string
		pods       []pod
		wantActive map[string]int32
		wantAny    bool
	}{
		{name: "no pod of the roles", pods: []pod{{name: "w", role: "worker"}}, wantActive: map[string]int32{}},
		{name: "an active launcher", pods: []pod{{name: "l", role: "launcher"}}, wantActive: map[string]int32{"launcher": 1}, wantAny: true},
		{name: "a launcher that finished exists but is not active", pods: []pod{{name: "l", role: "launcher", node: "n1", phase: corev1.PodSucceeded}}, wantActive: map[string]int32{"launcher": 0}, wantAny: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			active, any := storeOf(2, tt.pods...).ActiveOf(train, []string{"launcher"})
			assert.Equal(t, tt.wantActive, active)
			assert.Equal(t, tt.wantAny, any)
		})
	}
}

func TestPendingOfAndUnplaced(t *testing.T) {
	s := storeOf(3, pod{name: "a"}, pod{name: "b"}, pod{name: "c", node: "n1"})
	var names []string
	for _, p := range s.PendingOf(train, []types.UID{"a", "c", "gone"}) {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"a"}, names, "only the given members that are unbound")

	s.Attempts().Reserve(train, "a")
	unplaced, need := s.Unplaced(train, podGroupOf(3))
	require.Len(t, unplaced, 1)
	assert.Equal(t, "b", unplaced[0].Name, "neither bound nor reserved")
	assert.Equal(t, int32(1), need, "one bound and one reserved of three")
}

func TestOthersInPlace(t *testing.T) {
	tests := []struct {
		name string
		pods []pod
		pod  pod
		want int32
	}{
		{name: "alone in its place", pods: []pod{{name: "a", role: "worker", index: "0"}}, pod: pod{name: "a", role: "worker", index: "0"}},
		{name: "a twin holds its place", pods: []pod{{name: "a", role: "worker", index: "0"}, {name: "b", role: "worker", index: "0"}}, pod: pod{name: "a", role: "worker", index: "0"}, want: 1},
		{name: "a pod not yet counted sees every member there", pods: []pod{{name: "a", role: "worker", index: "0"}}, pod: pod{name: "new", role: "worker", index: "0"}, want: 1},
		{name: "a twin that finished holds no place", pods: []pod{{name: "a", role: "worker", index: "0"}, {name: "b", role: "worker", index: "0", node: "n1", phase: corev1.PodFailed}}, pod: pod{name: "a", role: "worker", index: "0"}},
		{name: "a pod of no place", pods: []pod{{name: "a"}}, pod: pod{name: "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, storeOf(2, tt.pods...).OthersInPlace(train, tt.pod.obj()))
		})
	}
}

func TestQueueStateOf(t *testing.T) {
	s := storeOf(2, pod{name: "a", node: "n1"}, pod{name: "b"})
	s.Attempts().Seen(train, epoch)
	s.Attempts().Reserve(train, "b")
	q := s.QueueStateOf(train, "pg-1")
	assert.Equal(t, QueueState{Bound: 1, Reserving: true, SeenAt: epoch}, q)

	s.Attempts().Begin(train)
	s.Attempts().Fail(train, epoch.Add(time.Second), time.Minute, FoundNoRoom, "no room")
	s.Observe(train, pod{name: "b", node: "n1"}.obj(), true, podGroupOf(2), epoch)
	q = s.QueueStateOf(train, "pg-1")
	assert.Equal(t, QueueState{Bound: 2, QuorumHad: true, QueuedAt: epoch.Add(time.Second), SeenAt: epoch}, q)
	assert.False(t, s.QueueStateOf(train, "pg-2").QuorumHad, "against another PodGroup")
}

func TestPublishedReadsTheAttemptsDomainAndResult(t *testing.T) {
	s := storeOf(2, pod{name: "a"})
	domain, result := s.Published(train)
	assert.Nil(t, domain)
	assert.Nil(t, result)

	s.Attempts().Begin(train)
	s.Attempts().ChooseDomain(train, Domain{Name: "rack-a"})
	s.Attempts().Record(train, epoch, false, "member a fits on no node")
	domain, result = s.Published(train)
	require.NotNil(t, domain)
	assert.Equal(t, "rack-a", domain.Name)
	require.NotNil(t, result)
	assert.Equal(t, "member a fits on no node", result.Message)
	result.Message = "changed by the reader"
	_, again := s.Published(train)
	assert.Equal(t, "member a fits on no node", again.Message, "the reader has a copy")
}

func TestEveryReadRunsTheHookFirst(t *testing.T) {
	var hooked []types.NamespacedName
	s := NewStore(func(float64) {}, func(key types.NamespacedName) { hooked = append(hooked, key) })
	s.Census(train)
	s.Pending(train)
	s.Quorum(train, 1, Counting{})
	assert.Equal(t, []types.NamespacedName{train, train, train}, hooked)
}

func TestTheStoreTellsWhatChanged(t *testing.T) {
	s := NewStore(func(float64) {}, nil)
	var told []types.NamespacedName
	s.TellChanges(func(key types.NamespacedName) { told = append(told, key) })
	s.Attempts().Begin(train)
	s.Attempts().ChooseDomain(train, Domain{Name: "rack-a"})
	s.Rooms().Add(&Room{Group: train, Role: "launcher", Node: "n1"})
	assert.Equal(t, []types.NamespacedName{train, train}, told, "the attempt's domain and the rooms")
}

func TestDomain(t *testing.T) {
	tests := []struct {
		name    string
		domain  Domain
		wantSet bool
		want    string
	}{
		{name: "none"},
		{name: "a required domain", domain: Domain{Name: "rack-1"}, wantSet: true, want: "rack-1"},
		{name: "a preferred domain", domain: Domain{Preferred: "block-0"}, wantSet: true, want: "block-0"},
		{name: "both", domain: Domain{Name: "block-0", Preferred: "rack-1"}, wantSet: true, want: "block-0/rack-1"},
		{name: "none that fits narrows nothing", domain: Domain{Unplaceable: "no rack holds 4 members"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantSet, tt.domain.IsSet())
			assert.Equal(t, tt.want, tt.domain.String())
		})
	}
}

// TestAGroupsStateIsKeptWhileAnythingIsWorthKeeping pins when a group's
// state is dropped: with no member, no quorum had and a fresh attempt.
// A dropped group reads as empty; one kept reads what it holds.
func TestAGroupsStateIsKeptWhileAnythingIsWorthKeeping(t *testing.T) {
	tests := []struct {
		name     string
		act      func(*Store)
		wantKept bool
	}{
		{name: "a member", act: func(s *Store) { s.Observe(train, pod{name: "a"}.obj(), true, podGroupOf(2), epoch) }, wantKept: true},
		{name: "a member gone, and nothing else", act: func(s *Store) {
			s.Observe(train, pod{name: "a"}.obj(), true, podGroupOf(2), epoch)
			s.Forget(train, pod{name: "a"}.obj(), podGroupOf(2), epoch)
		}},
		{name: "a quorum had, its members gone", act: func(s *Store) {
			s.Observe(train, pod{name: "a", node: "n1"}.obj(), true, podGroupOf(1), epoch)
			s.Forget(train, pod{name: "a"}.obj(), podGroupOf(1), epoch)
		}, wantKept: true},
		{name: "a reservation", act: func(s *Store) { s.Attempts().Reserve(train, "a") }, wantKept: true},
		{name: "a reservation given back", act: func(s *Store) { s.Attempts().Reserve(train, "a"); s.Attempts().Unreserve(train, "a") }},
		{name: "a member seen at PreEnqueue", act: func(s *Store) { s.Attempts().Seen(train, epoch) }, wantKept: true},
		{name: "a failed attempt's backoff", act: func(s *Store) {
			s.Attempts().Begin(train)
			s.Attempts().Fail(train, epoch, time.Minute, FoundNoRoom, "no room")
		}, wantKept: true},
		{name: "a PodGroup deleted with no member left", act: func(s *Store) {
			s.Attempts().Seen(train, epoch)
			s.ForgetPodGroup(train)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(func(float64) {}, nil)
			tt.act(s)
			s.states.mu.Lock()
			_, kept := s.states.byGroup[train]
			s.states.mu.Unlock()
			assert.Equal(t, tt.wantKept, kept)
		})
	}
}

// TestTheWaitingGaugeCountsTheGangsWaitingAtPermit: the gauge moves as a
// gang starts and stops holding reservations short of admission.
func TestTheWaitingGaugeCountsTheGangsWaitingAtPermit(t *testing.T) {
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	tests := []struct {
		name string
		act  func(*Store)
		want float64
	}{
		{name: "a gang with a reservation waits", act: func(s *Store) { s.Attempts().Reserve(train, "a") }, want: 1},
		{name: "two reservations of one gang are one gang waiting", act: func(s *Store) { s.Attempts().Reserve(train, "a"); s.Attempts().Reserve(train, "b") }, want: 1},
		{name: "two gangs", act: func(s *Store) { s.Attempts().Reserve(train, "a"); s.Attempts().Reserve(other, "x") }, want: 2},
		{name: "an admitted gang waits no more", act: func(s *Store) { s.Attempts().Reserve(train, "a"); s.Attempts().Admit(train, epoch) }},
		{name: "a failed attempt gives its reservations up", act: func(s *Store) {
			s.Attempts().Reserve(train, "a")
			s.Attempts().Begin(train)
			s.Attempts().Fail(train, epoch, 0, FoundNoRoom, "no room")
		}},
		{name: "a reserved member seen bound holds no reservation", act: func(s *Store) {
			s.Attempts().Reserve(train, "a")
			s.Observe(train, pod{name: "a", node: "n1"}.obj(), true, podGroupOf(2), epoch)
		}},
		{name: "a reserved member deleted", act: func(s *Store) {
			s.Observe(train, pod{name: "a"}.obj(), true, podGroupOf(2), epoch)
			s.Attempts().Reserve(train, "a")
			s.Forget(train, pod{name: "a"}.obj(), podGroupOf(2), epoch)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var waiting float64
			s := NewStore(func(d float64) { waiting += d }, nil)
			tt.act(s)
			assert.Equal(t, tt.want, waiting)
		})
	}
}

// TestFailedListsTheGangsWhoseLastAttemptFailed: until admitted, or until
// their attempt is forgotten with their last member.
func TestFailedListsTheGangsWhoseLastAttemptFailed(t *testing.T) {
	fail := func(s *Store) {
		s.Observe(train, pod{name: "a"}.obj(), true, podGroupOf(2), epoch)
		s.Attempts().Begin(train)
		s.Attempts().Fail(train, epoch, time.Minute, FoundNoRoom, "member a fits on no node")
	}
	tests := []struct {
		name string
		act  func(*Store)
		want []types.NamespacedName
	}{
		{name: "none failed", act: func(s *Store) { s.Attempts().Begin(train) }},
		{name: "a failed attempt", act: fail, want: []types.NamespacedName{train}},
		{name: "admitted since", act: func(s *Store) { fail(s); s.Attempts().Admit(train, epoch) }},
		{name: "its last member gone", act: func(s *Store) { fail(s); s.Forget(train, pod{name: "a"}.obj(), podGroupOf(2), epoch) }},
		{name: "its PodGroup deleted", act: func(s *Store) { fail(s); s.ForgetPodGroup(train) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(func(float64) {}, nil)
			tt.act(s)
			assert.ElementsMatch(t, tt.want, s.Attempts().Failed())
		})
	}
}

// TestARecountCountsOnlyTheMembersItIsGiven: what was counted before is
// replaced, against the PodGroup given.
func TestARecountCountsOnlyTheMembersItIsGiven(t *testing.T) {
	s := storeOf(2, pod{name: "a"}, pod{name: "b", node: "n1"})
	s.Recount(train, podGroupOf(2), []*corev1.Pod{pod{name: "c", role: "launcher"}.obj()})
	c := s.Census(train)
	assert.Equal(t, int32(1), c.Active())
	assert.Zero(t, c.Bound())
	assert.Equal(t, int32(1), s.Role(train, "launcher").Active)

	s.Recount(train, nil, nil)
	assert.Zero(t, s.Census(train).Active(), "a group without its PodGroup has no member counted")
}

// TestAFailedGangsPlaceInTheQueue pins, per ending, whether a failed
// gang goes behind the gangs not tried since (QueuedAt is the failure's
// time) or keeps its place, and that admission clears it.
func TestAFailedGangsPlaceInTheQueue(t *testing.T) {
	failedAt := epoch.Add(time.Minute)
	tests := []struct {
		name         string
		ending       Ending
		admit        bool
		wantQueuedAt time.Time
	}{
		{name: "a gang that found no room goes behind", ending: FoundNoRoom, wantQueuedAt: failedAt},
		{name: "a gang that lost a race for its domain keeps its place", ending: LostItsDomain},
		{name: "a gang waiting for its victims keeps its place", ending: WaitsForVictims},
		{name: "a gang waiting for its claims keeps its place", ending: WaitsForClaims},
		{name: "an admitted gang has no place behind", ending: FoundNoRoom, admit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storeOf(2, pod{name: "a"}, pod{name: "b"})
			s.Attempts().Begin(train)
			s.Attempts().Fail(train, failedAt, time.Minute, tt.ending, "why")
			if tt.admit {
				s.Attempts().Admit(train, failedAt.Add(time.Second))
			}
			assert.Equal(t, tt.wantQueuedAt, s.QueueStateOf(train, "pg-1").QueuedAt)
		})
	}
}

func TestRoomsAreReadAsCopies(t *testing.T) {
	l := roomsOf(Room{Group: mpiGang, Role: "launcher", Node: "n1"})
	rooms := l.Of(mpiGang)
	require.Len(t, rooms, 1)
	rooms[0].Node = "elsewhere"
	assert.Equal(t, "n1", l.Of(mpiGang)[0].Node, "a reader's copy changes nothing held")
	assert.Equal(t, "n1", l.Held(mpiGang, "launcher").Node)
	assert.Empty(t, l.Of(otherGang))
}

// TestAMemberMovesThroughThePhases follows one member from gated to
// finished: what the census, its role and the pending list read at each
// step.
func TestAMemberMovesThroughThePhases(t *testing.T) {
	gated := pod{name: "a", role: "worker"}.obj()
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
	steps := []struct {
		name        string
		pod         *corev1.Pod
		wantPhase   topology.MemberPhase
		wantPending bool
		wantActive  int32
		wantReached [3]int32
	}{
		{name: "gated", pod: gated, wantPhase: topology.MemberGated, wantPending: true, wantActive: 1},
		{name: "pending", pod: pod{name: "a", role: "worker"}.obj(), wantPhase: topology.MemberPending, wantPending: true, wantActive: 1},
		{name: "bound", pod: pod{name: "a", role: "worker", node: "n1"}.obj(), wantPhase: topology.MemberBound, wantActive: 1, wantReached: [3]int32{1, 0, 0}},
		{name: "running", pod: pod{name: "a", role: "worker", node: "n1", phase: corev1.PodRunning}.obj(), wantPhase: topology.MemberRunning, wantActive: 1, wantReached: [3]int32{1, 1, 0}},
		{name: "ready", pod: pod{name: "a", role: "worker", node: "n1", phase: corev1.PodRunning, ready: true}.obj(), wantPhase: topology.MemberRunning, wantActive: 1, wantReached: [3]int32{1, 1, 1}},
		{name: "succeeded", pod: pod{name: "a", role: "worker", node: "n1", phase: corev1.PodSucceeded}.obj(), wantPhase: topology.MemberSucceeded},
	}
	s := NewStore(func(float64) {}, nil)
	for _, step := range steps {
		s.Observe(train, step.pod, true, podGroupOf(1), epoch)
		c := s.Census(train)
		var total int32
		for _, n := range c {
			total += n
		}
		assert.Equal(t, int32(1), c[step.wantPhase], "%s: counted in its phase", step.name)
		assert.Equal(t, int32(1), total, "%s: counted once", step.name)
		assert.Equal(t, step.wantPending, len(s.Pending(train)) == 1, "%s: pending", step.name)
		r := s.Role(train, "worker")
		assert.Equal(t, step.wantActive, r.Active, "%s: active in its role", step.name)
		assert.Equal(t, step.wantReached, r.Reached, "%s: the launch-order states reached", step.name)
	}
}

// TestQuorumHeld pins when a gang counts as having had its quorum, for
// good, against its PodGroup.
func TestQuorumHeld(t *testing.T) {
	tests := []struct {
		name      string
		pods      []pod
		gone      []string
		minMember int32
		asked     func(*v1alpha1.PodGroup)
		want      bool
	}{
		{name: "none bound", pods: []pod{{name: "a"}, {name: "b"}}, minMember: 2},
		{name: "fewer bound than minMember", pods: []pod{{name: "a", node: "n1"}, {name: "b"}}, minMember: 2},
		{name: "minMember bound now", pods: []pod{{name: "a", node: "n1"}, {name: "b", node: "n1"}}, minMember: 2, want: true},
		{name: "minMember bound once, a member gone since", pods: []pod{{name: "a", node: "n1"}, {name: "b", node: "n1"}}, gone: []string{"b"}, minMember: 2, want: true},
		{name: "finished members bound once", pods: []pod{{name: "a", node: "n1"}, {name: "b", node: "n1"}, {name: "a", node: "n1", phase: corev1.PodSucceeded}, {name: "b", node: "n1", phase: corev1.PodSucceeded}}, minMember: 2, want: true},
		{name: "asked of a PodGroup made again with the quorum had against the old one", pods: []pod{{name: "a", node: "n1"}, {name: "b", node: "n1"}}, gone: []string{"b"}, minMember: 2,
			asked: func(pg *v1alpha1.PodGroup) { pg.UID = "pg-2" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storeOf(tt.minMember, tt.pods...)
			for _, name := range tt.gone {
				s.Forget(train, pod{name: name}.obj(), podGroupOf(tt.minMember), epoch)
			}
			asked := podGroupOf(tt.minMember)
			if tt.asked != nil {
				tt.asked(asked)
			}
			assert.Equal(t, tt.want, s.QuorumHeld(train, asked))
		})
	}
}

// TestARoomGivenBackIsHeldAgain: Unreserve of a late member that failed
// to bind gives its room back, on its node, counted as before.
func TestARoomGivenBackIsHeldAgain(t *testing.T) {
	l := roomsOf(Room{Group: mpiGang, Role: "launcher", Node: "n1", Request: cpus("2")})
	taken := l.Take(mpiGang, "launcher")
	require.NotNil(t, taken)
	held, _ := l.HeldOn("n1", types.NamespacedName{}, "")
	assert.Nil(t, held, "taken: nothing held on its node")

	l.Add(taken)
	held, groups := l.HeldOn("n1", types.NamespacedName{}, "")
	assert.True(t, held.Cpu().Equal(resource.MustParse("2")))
	assert.Equal(t, []types.NamespacedName{mpiGang}, groups)
	assert.Equal(t, int32(1), l.Count(mpiGang, "launcher"))
}

// TestAPodThatIsNoMemberIsNotCounted: a pod the model finds is no member
// (another scheduler's, or built for another PodGroup) is forgotten if it
// was counted, and changes nothing if it was not.
func TestAPodThatIsNoMemberIsNotCounted(t *testing.T) {
	tests := []struct {
		name       string
		counted    []pod
		notMember  pod
		wantActive int32
	}{
		{name: "never counted: nothing changes", counted: []pod{{name: "a"}}, notMember: pod{name: "stranger"}, wantActive: 1},
		{name: "counted before: forgotten", counted: []pod{{name: "a"}, {name: "b"}}, notMember: pod{name: "b"}, wantActive: 1},
		{name: "a group with no member stays empty", notMember: pod{name: "stranger"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storeOf(2, tt.counted...)
			noted, partly := s.Observe(train, tt.notMember.obj(), false, podGroupOf(2), epoch)
			assert.False(t, noted)
			assert.Zero(t, partly)
			assert.Equal(t, tt.wantActive, s.Census(train).Active())
		})
	}
}

func TestReachedCountReadsEachLaunchOrderState(t *testing.T) {
	r := RoleCount{Reached: [3]int32{3, 2, 1}}
	tests := []struct {
		state topology.StartAfter
		want  int32
	}{
		{state: topology.StartAfterScheduled, want: 3},
		{state: topology.StartAfterRunning, want: 2},
		{state: topology.StartAfterReady, want: 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			assert.Equal(t, tt.want, r.ReachedCount(tt.state))
		})
	}
}

// TestAMemberThatSucceededCountsUntilItIsDeleted: the scheduler's informer
// shows no finished pod and tells of one that finished as deleted, as it
// last ran; another informer shows the pods that succeeded. In whichever
// order the two tell of a member that finished, it ends counted once, as
// succeeded, toward the quorum, until the pod that succeeded is deleted.
func TestAMemberThatSucceededCountsUntilItIsDeleted(t *testing.T) {
	running := pod{name: "a", role: "worker", node: "n1", phase: corev1.PodRunning}
	succeeded := pod{name: "a", role: "worker", node: "n1", phase: corev1.PodSucceeded}
	seenGone := func(s *Store) { s.Forget(train, running.obj(), podGroupOf(2), epoch) }
	seenSucceeded := func(s *Store) { s.Observe(train, succeeded.obj(), true, podGroupOf(2), epoch) }
	seenRunning := func(s *Store) { s.Observe(train, running.obj(), true, podGroupOf(2), epoch) }
	tests := []struct {
		name  string
		steps []func(*Store)
	}{
		{name: "gone from the scheduler's informer, then seen succeeded", steps: []func(*Store){seenGone, seenSucceeded}},
		{name: "seen succeeded, then gone from the scheduler's informer", steps: []func(*Store){seenSucceeded, seenGone}},
		{name: "seen succeeded, then a late view of it running", steps: []func(*Store){seenSucceeded, seenRunning, seenGone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storeOf(2, running, pod{name: "b", role: "worker"})
			for _, step := range tt.steps {
				step(s)
			}
			c := s.Census(train)
			assert.Equal(t, int32(1), c.Succeeded())
			assert.Equal(t, int32(1), c.Active(), "b alone is active")
			assert.Equal(t, int32(2), c.TowardQuorum())
			placed, _ := s.Quorum(train, 2, Counting{})
			assert.Equal(t, int32(1), placed, "a succeeded, b not placed")
			unplaced, need := s.Unplaced(train, podGroupOf(2))
			assert.Equal(t, int32(1), need, "a domain's promise is b alone")
			assert.Len(t, unplaced, 1)

			s.Forget(train, succeeded.obj(), podGroupOf(2), epoch)
			assert.Zero(t, s.Census(train).Succeeded(), "forgotten once the pod that succeeded is deleted")
		})
	}
}
