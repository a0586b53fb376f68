package heldrooms

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
	"github.com/muster-dev/muster/pkg/topology"
)

// handle is the part of the framework's handle HeldRooms uses for late
// rooms: the cycle's snapshot and the event recorder.
type handle struct {
	fwk.Handle
	snapshot  fwk.SharedLister
	events    *events.FakeRecorder
	activator *plugintest.Activator
	dra       fwk.SharedDRAManager
}

func (h handle) Activate(logger klog.Logger, pods map[string]*corev1.Pod) {
	h.activator.Activate(logger, pods)
}

func (h handle) SnapshotSharedLister() fwk.SharedLister    { return h.snapshot }
func (h handle) SharedDRAManager() fwk.SharedDRAManager    { return h.dra }
func (h handle) EventRecorder() events.EventRecorderLogger { return h.events }

// lateGang is an MPI gang of minMember 3: a launcher its operator creates
// once the two workers are Ready, with the given launcher template.
func lateGang(t *testing.T, g *groups, launcher string) *v1alpha1.PodGroup {
	t.Helper()
	annotations := map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
		topology.LateMembersAnnotation: launcher,
	}
	topo, errs := topology.Parse(annotations)
	require.Empty(t, errs)
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpi", UID: "mpi", Annotations: annotations},
		Spec: v1alpha1.PodGroupSpec{MinMember: 3}}
	g.topologies[key("mpi")], g.podGroups[key("mpi")] = topo, pg
	g.late[key("mpi")] = group.LateMembers{Missing: map[string]int32{"launcher": 1}}
	return pg
}

func nodeObj(name, pool, cpu string) *corev1.Node {
	return st.MakeNode().Name(name).Label("pool", pool).Capacity(map[corev1.ResourceName]string{"cpu": cpu, "pods": "110"}).Obj()
}

func TestReserveHoldsTheLateRoomWhenTheMemberCompletesTheGang(t *testing.T) {
	// w0 is on n1 (4 CPUs) already; the cycle's snapshot does not hold w1,
	// reserved now on n1.
	w0 := st.MakePod().Namespace(ns).Name("w0").UID("w0").Node("n1").Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj()
	tests := []struct {
		name     string
		launcher string
		placed   int32
		admitted bool
		// node is where the launcher's room is held, "" for none.
		node string
		// refused is why Reserve fails the gang's attempt, "" when it
		// does not.
		refused string
	}{
		{"the second worker completes the gang: beside the workers", `{"launcher":{"requests":{"cpu":"2"}}}`, 2, false, "n1", ""},
		{"it does not fit beside them: the next node", `{"launcher":{"requests":{"cpu":"3"}}}`, 2, false, "n2", ""},
		{"its template keeps it to the cpu pool", `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"cpu"}}}`, 2, false, "n2", ""},
		{"one worker is not enough", `{"launcher":{"requests":{"cpu":"1"}}}`, 1, false, "", ""},
		{"a gang admitted already holds nothing more", `{"launcher":{"requests":{"cpu":"1"}}}`, 2, true, "", ""},
		{"no node has room: nothing is held, and the attempt ends", `{"launcher":{"requests":{"cpu":"5"}}}`, 2, false, "",
			"the room of group team-a/mpi's late member launcher cannot be held: none of the 2 nodes it may run on has its requests (cpu: 5) free beside what is placed and held"},
		{"no node its template allows: nothing is held, and the attempt ends", `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"highmem"}}}`, 2, false, "",
			"the room of group team-a/mpi's late member launcher cannot be held: no node of the 2 it could use matches its node selector, node affinity and tolerations"},
		// A profile that runs HeldRooms' Reserve before Gang's: the member
		// is not counted yet, and still completes the gang.
		{"before Gang's Reserve counted the member", `{"launcher":{"requests":{"cpu":"2"}}}`, 1, false, "n1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroups()
			lateGang(t, g, tt.launcher)
			g.placed[key("mpi")] = tt.placed
			if tt.name != "before Gang's Reserve counted the member" {
				g.reserved.Insert("w1")
			}
			if tt.admitted {
				g.admitted.Insert(key("mpi"))
			}
			snapshot := internalcache.NewSnapshot([]*corev1.Pod{w0}, []*corev1.Node{nodeObj("n1", "gpu", "4"), nodeObj("n2", "cpu", "4")})
			clk := testingclock.NewFakeClock(time.Time{})
			h := NewWithModel(klog.Background(), g, handle{snapshot: snapshot, events: events.NewFakeRecorder(10)}, clk)

			w1 := member("mpi", "worker", "w1", "1")
			state := recorded(h, w1)
			status := h.Reserve(context.Background(), state, w1, "n1")
			if tt.refused != "" {
				assert.Equal(t, fwk.Unschedulable, status.Code())
				assert.Equal(t, tt.refused, status.Message())
				failed, ok := groupstate.AttemptFailedIn(state)
				require.True(t, ok, "Gang's Unreserve is told why")
				assert.Equal(t, tt.refused, failed.Reason)
			} else {
				require.True(t, status.IsSuccess(), "Reserve: %v", status)
			}
			node, held := heldNode(g.rooms, key("mpi"), "launcher")
			assert.Equal(t, tt.node, node)
			assert.Equal(t, tt.node != "", held)
		})
	}
}

// rackedNode is a node of 4 CPUs in a rack.
func rackedNode(name, rack string) *corev1.Node {
	return st.MakeNode().Name(name).Label(rackLabel, rack).Capacity(map[corev1.ResourceName]string{"cpu": "4", "pods": "110"}).Obj()
}

const rackLabel = "topology.kubernetes.io/rack"

// domainGang is lateGang required to stay in one rack.
func domainGang(t *testing.T, g *groups) {
	t.Helper()
	pg := lateGang(t, g, `{"launcher":{"requests":{"cpu":"2"}}}`)
	pg.Annotations[topology.DomainRequiredAnnotation] = rackLabel
	topo, errs := topology.Parse(pg.Annotations)
	require.Empty(t, errs)
	g.topologies[key("mpi")] = topo
}

func TestTheLateRoomOfAGangInOneDomainIsHeldInThatDomain(t *testing.T) {
	// The workers fill n1 of rack-a; n2, the next node, is in rack-b, and
	// n3 in rack-a has room.
	w0 := st.MakePod().Namespace(ns).Name("w0").UID("w0").Node("n1").Req(map[corev1.ResourceName]string{"cpu": "3"}).Obj()
	nodes := []*corev1.Node{rackedNode("n1", "rack-a"), rackedNode("n2", "rack-b"), rackedNode("n3", "rack-a")}
	t.Run("held as the member completing the gang is reserved", func(t *testing.T) {
		g := newGroups()
		domainGang(t, g)
		g.placed[key("mpi")] = 2
		g.reserved.Insert("w1")
		snapshot := internalcache.NewSnapshot([]*corev1.Pod{w0}, nodes)
		h := NewWithModel(klog.Background(), g, handle{snapshot: snapshot, events: events.NewFakeRecorder(10)}, testingclock.NewFakeClock(time.Time{}))
		require.True(t, h.Reserve(context.Background(), recorded(h, member("mpi", "worker", "w1", "1")), member("mpi", "worker", "w1", "1"), "n1").IsSuccess())
		node, held := heldNode(g.rooms, key("mpi"), "launcher")
		require.True(t, held)
		assert.Equal(t, "n3", node, "the launcher's room is in its workers' rack, not on the next node")
	})
	t.Run("held again for a gang found bound", func(t *testing.T) {
		g := newGroups()
		domainGang(t, g)
		g.bound[key("mpi")], g.boundOn[key("mpi")] = 2, "n1"
		h := NewWithModel(klog.Background(), g, handle{events: events.NewFakeRecorder(10)}, testingclock.NewFakeClock(time.Time{}))
		// The restarted scheduler's informer lists a bound worker.
		worker := member("mpi", "worker", "w0", "3")
		worker.Spec.NodeName = "n1"
		for _, listener := range g.listeners {
			listener(group.Added(worker))
		}
		infos := []fwk.NodeInfo{nodeInfo(nodes[0], w0), nodeInfo(nodes[1]), nodeInfo(nodes[2])}
		_, status := h.PreFilter(context.Background(), recorded(h, st.MakePod().Namespace(ns).Name("other").Obj()), st.MakePod().Namespace(ns).Name("other").Obj(), infos)
		require.True(t, status.IsSuccess())
		node, held := heldNode(g.rooms, key("mpi"), "launcher")
		require.True(t, held)
		assert.Equal(t, "n3", node)
	})
}

func TestTheLateRoomOfAGangIsHeldInTheRackItsAttemptPrefersFirst(t *testing.T) {
	// The workers fill n1; in their block-0, n2 is in rack-b and n3 in
	// rack-a: the room goes to the rack the gang's attempt prefers.
	node := func(name, rack string) *corev1.Node {
		n := rackedNode(name, rack)
		n.Labels[topology.BlockLabel] = "block-0"
		return n
	}
	nodes := []*corev1.Node{node("n1", "rack-a"), node("n2", "rack-b"), node("n3", "rack-a")}
	w0 := st.MakePod().Namespace(ns).Name("w0").UID("w0").Node("n1").Req(map[corev1.ResourceName]string{"cpu": "3"}).Obj()
	for _, tt := range []struct {
		name   string
		domain groupstate.Domain
		want   string
	}{
		{"rack-a preferred", groupstate.Domain{Name: "block-0", Preferred: "rack-a"}, "n3"},
		{"rack-b preferred", groupstate.Domain{Name: "block-0", Preferred: "rack-b"}, "n2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroups()
			pg := lateGang(t, g, `{"launcher":{"requests":{"cpu":"2"}}}`)
			pg.Annotations[topology.DomainRequiredAnnotation] = topology.BlockLabel
			pg.Annotations[topology.DomainPreferredAnnotation] = rackLabel
			topo, errs := topology.Parse(pg.Annotations)
			require.Empty(t, errs)
			g.topologies[key("mpi")] = topo
			g.placed[key("mpi")] = 2
			g.reserved.Insert("w1")
			g.attempts.ChooseDomain(key("mpi"), tt.domain)
			snapshot := internalcache.NewSnapshot([]*corev1.Pod{w0}, nodes)
			h := NewWithModel(klog.Background(), g, handle{snapshot: snapshot, events: events.NewFakeRecorder(10)}, testingclock.NewFakeClock(time.Time{}))
			require.True(t, h.Reserve(context.Background(), recorded(h, member("mpi", "worker", "w1", "1")), member("mpi", "worker", "w1", "1"), "n1").IsSuccess())
			got, held := heldNode(g.rooms, key("mpi"), "launcher")
			require.True(t, held)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTheLateRoomIsReleasedWithAnEventWhenItsMemberDoesNotCome(t *testing.T) {
	for _, came := range []bool{false, true} {
		g := newGroups()
		lateGang(t, g, `{"launcher":{"requests":{"cpu":"1"}}}`)
		g.placed[key("mpi")] = 2
		g.reserved.Insert("w1")
		snapshot := internalcache.NewSnapshot(nil, []*corev1.Node{nodeObj("n1", "gpu", "4")})
		clk := testingclock.NewFakeClock(time.Time{})
		recorder := events.NewFakeRecorder(10)
		h := NewWithModel(klog.Background(), g, handle{snapshot: snapshot, events: recorder}, clk)
		require.True(t, h.Reserve(context.Background(), recorded(h, member("mpi", "worker", "w1", "1")), member("mpi", "worker", "w1", "1"), "n1").IsSuccess())
		require.Equal(t, int32(1), g.rooms.Count(key("mpi"), ""))
		if came {
			require.True(t, h.Reserve(context.Background(), recorded(h, member("mpi", "launcher", "l0", "1")), member("mpi", "launcher", "l0", "1"), "n1").IsSuccess())
			require.Zero(t, g.rooms.Count(key("mpi"), ""), "the launcher took its room")
		}

		clk.Step(59 * time.Second)
		if !came {
			assert.Equal(t, int32(1), g.rooms.Count(key("mpi"), ""), "held until the schedule timeout")
		}
		clk.Step(time.Second)
		assert.Zero(t, g.rooms.Count(key("mpi"), ""))
		if came {
			assert.Empty(t, recorder.Events, "a launcher that came took its room: nothing to tell")
			continue
		}
		require.Len(t, recorder.Events, 1)
		assert.Equal(t, "Warning LateMemberMissing 1 late members were not created within 1m0s of the gang's admission; released the room held for them", <-recorder.Events)
	}
}

func TestPreFilterHoldsAgainTheLateRoomOfAGangFoundBound(t *testing.T) {
	bound := func(name string) *corev1.Pod {
		return member("mpi", "worker", name, "1")
	}
	tests := []struct {
		name  string
		bound int32
		late  group.LateMembers
		held  bool
	}{
		{"both workers bound, the launcher to come", 2, group.LateMembers{Missing: map[string]int32{"launcher": 1}}, true},
		{"one worker bound: the gang was never admitted", 1, group.LateMembers{Missing: map[string]int32{"launcher": 1}}, false},
		{"the launcher has finished", 2, group.LateMembers{Missing: map[string]int32{"launcher": 1}, Came: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroups()
			lateGang(t, g, `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"cpu"}}}`)
			g.bound[key("mpi")], g.late[key("mpi")] = tt.bound, tt.late
			h := NewWithModel(klog.Background(), g, handle{events: events.NewFakeRecorder(10)}, testingclock.NewFakeClock(time.Time{}))
			// The restarted scheduler's informer lists a bound worker.
			w0 := bound("w0")
			w0.Spec.NodeName = "n1"
			for _, listener := range g.listeners {
				listener(group.Added(w0))
			}
			nodes := []fwk.NodeInfo{node("n1", "gpu", "4", w0), node("n2", "cpu", "4")}
			_, status := h.PreFilter(context.Background(), recorded(h, st.MakePod().Namespace(ns).Name("other").Obj()), st.MakePod().Namespace(ns).Name("other").Obj(), nodes)
			require.True(t, status.IsSuccess())
			room, held := heldNode(g.rooms, key("mpi"), "launcher")
			assert.Equal(t, tt.held, held)
			if tt.held {
				assert.Equal(t, "n2", room, "where the launcher's template lets it run")
			}
		})
	}
}

// TestPodsKeptOutOfAGangsRoomAreWokenWhenItIsFreed: Filter kept two pods
// out of the launcher's room; one was bound elsewhere since. When the
// room is released, past its timeout or with its PodGroup, the other is
// moved back to the queue, once.
func TestPodsKeptOutOfAGangsRoomAreWokenWhenItIsFreed(t *testing.T) {
	for _, freed := range []string{"the room expires", "the PodGroup is deleted"} {
		t.Run(freed, func(t *testing.T) {
			g := newGroups()
			pg := lateGang(t, g, `{"launcher":{"requests":{"cpu":"1"}}}`)
			g.placed[key("mpi")] = 2
			g.reserved.Insert("w1")
			snapshot := internalcache.NewSnapshot(nil, []*corev1.Node{nodeObj("n1", "gpu", "4")})
			clk := testingclock.NewFakeClock(time.Time{})
			activator := &plugintest.Activator{}
			h := NewWithModel(klog.Background(), g, handle{snapshot: snapshot, events: events.NewFakeRecorder(10), activator: activator}, clk)
			require.True(t, h.Reserve(context.Background(), recorded(h, member("mpi", "worker", "w1", "1")), member("mpi", "worker", "w1", "1"), "n1").IsSuccess())

			full := node("n1", "gpu", "4", st.MakePod().Req(map[corev1.ResourceName]string{"cpu": "3"}).Obj())
			for _, name := range []string{"a", "b"} {
				pod := st.MakePod().Namespace(ns).Name(name).UID(name).Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj()
				require.Equal(t, fwk.Unschedulable, h.Filter(context.Background(), recorded(h, pod), pod, full).Code())
			}
			boundElsewhere := st.MakePod().Namespace(ns).Name("b").UID("b").Node("n2").Obj()
			for _, listener := range g.listeners {
				listener(group.Updated(boundElsewhere, boundElsewhere))
			}
			assert.Empty(t, activator.Activated)

			if freed == "the room expires" {
				clk.Step(time.Minute)
			} else {
				g.rooms.Release(key("mpi"))
				for _, handler := range g.podGroupsSeen {
					handler.OnDelete(pg)
				}
			}
			assert.Equal(t, []string{"team-a/a"}, activator.Activated)
			for _, handler := range g.podGroupsSeen {
				handler.OnDelete(pg)
			}
			assert.Len(t, activator.Activated, 1, "a pod is woken once")
		})
	}
}

// heldNode returns the node of a room the group holds for role.
func heldNode(rooms *groupstate.Rooms, key types.NamespacedName, role string) (string, bool) {
	if r := rooms.Held(key, role); r != nil {
		return r.Node, true
	}
	return "", false
}

func TestAGangWhoseLastBoundMemberHasGoneGivesUpItsLateRooms(t *testing.T) {
	bound := func() *corev1.Pod {
		pod := member("mpi", "worker", "w0", "1")
		pod.Spec.NodeName = "n1"
		return pod
	}
	terminating := bound()
	terminating.DeletionTimestamp = &metav1.Time{}
	finished := bound()
	finished.Status.Phase = corev1.PodSucceeded
	tests := []struct {
		name string
		// stillBound is how many of the gang's members are bound after the
		// change.
		stillBound int32
		change     group.PodChange
		released   bool
	}{
		{"its last bound member is deleted", 0, group.Deleted(bound()), true},
		{"its last bound member is being deleted", 0, group.Updated(bound(), terminating), true},
		{"its last bound member has finished", 0, group.Updated(bound(), finished), true},
		{"a bound member is deleted, another is bound", 1, group.Deleted(bound()), false},
		{"a member never bound is deleted while the gang is admitted", 0, group.Deleted(member("mpi", "worker", "w2", "1")), false},
		{"its bound member is updated, still running", 0, group.Updated(bound(), bound()), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, g, _ := deviceRooms(t)
			require.NotNil(t, g.rooms.Held(key("mpi"), "launcher"), "no room held for the launcher to begin with")
			recorder := h.handle.(handle).events
			g.bound[key("mpi")] = tt.stillBound

			h.podChanged(tt.change)
			held := g.rooms.Held(key("mpi"), "launcher") != nil
			assert.Equal(t, !tt.released, held, "the launcher's room is held after the change")
			select {
			case event := <-recorder.Events:
				assert.True(t, tt.released, "an event was recorded for a room kept: %s", event)
				assert.Contains(t, event, RoomReleasedReason)
				assert.Contains(t, event, "the gang's last bound member w0 has gone; released the room held for 1 late members")
			default:
				assert.False(t, tt.released, "no event says the room was released")
			}
		})
	}
}
