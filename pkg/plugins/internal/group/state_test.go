package group

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
	"github.com/muster-dev/muster/pkg/topology"
)

// worker is a member of ns/train in the worker role, on node unless it is
// "", in phase, Ready when ready.
func worker(name, node string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{topology.GroupLabel: "train", topology.RoleLabel: "worker"}},
		Spec:   corev1.PodSpec{NodeName: node, SchedulerName: topology.SchedulerName},
		Status: corev1.PodStatus{Phase: phase},
	}
	if ready {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return pod
}

func TestTheStateFollowsEachMemberThroughItsPhases(t *testing.T) {
	g := newTestGroup(t, 2)
	a := worker("a", "", "", false)
	g.m.Take(Added(a))
	b := worker("b", "", "", false)
	g.m.Take(Added(b))
	census := g.m.Census(g.key)
	assert.Equal(t, int32(2), census[topology.MemberPending])
	assert.Equal(t, int32(2), census.Active())
	assert.Equal(t, groupstate.RoleCount{Any: 2, Active: 2}, g.m.Role(g.key, "worker"))

	g.m.Attempts().Reserve(g.key, a.UID)
	placed, reached := g.m.Quorum(g.key, 2, groupstate.Counting{})
	assert.Equal(t, int32(1), placed, "a reserved member counts")
	assert.False(t, reached)

	boundA := worker("a", "n1", "", false)
	g.m.Take(Updated(a, boundA))
	placed, _ = g.m.Quorum(g.key, 2, groupstate.Counting{})
	assert.Equal(t, int32(1), placed, "a member seen bound leaves the reservations: counted once")
	assert.False(t, g.m.Attempts().IsReserved(g.key, a.UID))
	assert.False(t, g.m.HadQuorum(g.key, g.pg))

	runningB := worker("b", "n1", corev1.PodRunning, true)
	g.m.Take(Updated(b, runningB))
	census = g.m.Census(g.key)
	assert.Equal(t, int32(1), census[topology.MemberBound])
	assert.Equal(t, int32(1), census[topology.MemberRunning])
	assert.Equal(t, int32(2), census.Bound())
	assert.True(t, g.m.HadQuorum(g.key, g.pg), "minMember bound at once")
	role := g.m.Role(g.key, "worker")
	assert.Equal(t, int32(2), role.ReachedCount(topology.StartAfterScheduled))
	assert.Equal(t, int32(1), role.ReachedCount(topology.StartAfterRunning))
	assert.Equal(t, int32(1), role.ReachedCount(topology.StartAfterReady))

	done := worker("b", "n1", corev1.PodSucceeded, false)
	g.m.Take(Updated(runningB, done))
	placed, reached = g.m.Quorum(g.key, 2, groupstate.Counting{})
	assert.Equal(t, int32(2), placed, "a member that succeeded counts toward the quorum")
	assert.True(t, reached)
	assert.Equal(t, groupstate.RoleCount{Any: 2, Active: 1, Reached: [3]int32{1, 0, 0}}, g.m.Role(g.key, "worker"), "a finished member reaches nothing")

	g.m.Take(Deleted(done))
	g.m.Take(Deleted(boundA))
	assert.Equal(t, topology.Census{}, g.m.Census(g.key))
	assert.Equal(t, groupstate.RoleCount{}, g.m.Role(g.key, "worker"))
	assert.True(t, g.m.HadQuorum(g.key, g.pg), "the gang had its quorum while its PodGroup lives")
}

func TestTheStateKnowsWhereItsBoundMembersAreAndForgetsTheDomainWithTheLast(t *testing.T) {
	g := newTestGroup(t, 2)
	a, b := worker("a", "", "", false), worker("b", "", "", false)
	g.m.Take(Added(a))
	g.m.Take(Added(b))
	_, ok := g.m.BoundNode(g.key)
	assert.False(t, ok, "no member bound")
	g.m.Attempts().ChooseDomain(g.key, groupstate.Domain{Name: "rack-a"})

	boundA := worker("a", "n1", corev1.PodRunning, true)
	g.m.Take(Updated(a, boundA))
	node, ok := g.m.BoundNode(g.key)
	assert.True(t, ok)
	assert.Equal(t, "n1", node)
	done := worker("a", "n1", corev1.PodSucceeded, false)
	g.m.Take(Updated(boundA, done))
	_, ok = g.m.BoundNode(g.key)
	assert.False(t, ok, "a finished member is on no node")
	_, chosen := g.m.Attempts().Domain(g.key)
	assert.True(t, chosen, "kept while a member is active")

	g.m.Take(Deleted(done))
	g.m.Take(Deleted(b))
	_, chosen = g.m.Attempts().Domain(g.key)
	assert.False(t, chosen, "the group's next pods choose a domain afresh")
}

func TestHeldRoomsCountTowardTheQuorumWhenTheCallerSaysSo(t *testing.T) {
	g := newTestGroup(t, 3)
	g.add(t, "a", "n1", topology.SchedulerName, "")
	g.add(t, "b", "n1", topology.SchedulerName, "")
	g.m.Rooms().Add(&groupstate.Room{Group: g.key, Role: "launcher", Node: "n2"})
	placed, reached := g.m.Quorum(g.key, 3, groupstate.Counting{})
	assert.Equal(t, int32(2), placed)
	assert.False(t, reached)
	placed, reached = g.m.Quorum(g.key, 3, groupstate.Counting{HeldRooms: true})
	assert.Equal(t, int32(3), placed)
	assert.True(t, reached)
}

func TestBoundTellsTheLastBind(t *testing.T) {
	g := newTestGroup(t, 3)
	at := func(name string, when time.Time) *corev1.Pod {
		pod := worker(name, "n1", "", false)
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(when)}}
		return pod
	}
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.m.Take(Added(at("a", epoch)))
	g.m.Take(Added(at("b", epoch.Add(time.Minute))))
	count, last := g.m.Bound(g.key)
	assert.Equal(t, int32(2), count)
	assert.Equal(t, epoch.Add(time.Minute), last)

	g.m.Take(Deleted(at("b", epoch.Add(time.Minute))))
	count, last = g.m.Bound(g.key)
	assert.Equal(t, int32(1), count)
	assert.Equal(t, epoch, last, "the last bound member gone, the one before it is the last")
}

func TestActivatePendingWakesTheUnboundMembersOnly(t *testing.T) {
	g := newTestGroup(t, 3)
	g.add(t, "bound", "n1", topology.SchedulerName, "")
	g.add(t, "waiting", "", topology.SchedulerName, "")
	g.add(t, "foreign", "", "other-scheduler", "")
	activator := &plugintest.Activator{}
	g.m.ActivatePending(klog.Background(), activator, g.key)
	assert.Equal(t, []string{"ns/waiting"}, activator.Activated)
}

func TestAPodGroupMadeAgainRecountsItsMembers(t *testing.T) {
	g := newTestGroup(t, 2)
	g.add(t, "old", "n1", topology.SchedulerName, "first")
	require.Equal(t, int32(1), g.m.BoundCount(g.key))

	g.m.podGroupEvents().OnDelete(g.pg)
	g.setPodGroup(t, func(pg *v1alpha1.PodGroup) { pg.UID = "second" })
	g.m.podGroupEvents().OnAdd(g.pg, false)
	assert.Equal(t, int32(0), g.m.BoundCount(g.key), "a member built for the first PodGroup is no member of the second")
}

func TestMayShareAnswersFromTheStateWhetherAnotherMemberHasThePodsPlace(t *testing.T) {
	g := newTestGroup(t, 2)
	indexed := func(name, index string) *corev1.Pod {
		pod := worker(name, "", "", false)
		pod.Labels[topology.IndexLabel] = index
		return pod
	}
	first := indexed("first", "0")
	g.m.Take(Added(first))
	g.m.Take(Added(indexed("other", "1")))
	assert.False(t, g.m.mayShare(g.key, first), "no other member says worker 0")

	twin := indexed("twin", "0")
	assert.True(t, g.m.mayShare(g.key, twin), "a pod the state has not seen yet shares worker 0 with first")
	g.m.Take(Added(twin))
	assert.True(t, g.m.mayShare(g.key, first))
	assert.True(t, g.m.mayShare(g.key, twin))

	done := indexed("twin", "0")
	done.Status.Phase = corev1.PodSucceeded
	g.m.Take(Updated(twin, done))
	assert.False(t, g.m.mayShare(g.key, first), "a finished member holds no place")

	jobset := worker("js", "", "", false)
	jobset.Labels[topology.JobSetJobIndexLabel] = "0"
	assert.False(t, g.m.mayShare(g.key, jobset), "no other JobSet pod of the role")
	g.m.Take(Added(jobset))
	other := worker("js-2", "", "", false)
	other.Labels[topology.JobSetJobIndexLabel] = "1"
	assert.True(t, g.m.mayShare(g.key, other), "a JobSet's pods of one role are compared by the topology")
}
