package gangpreemption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

var gangA, gangB = types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}

// boundTo is a victim pod bound to the node.
func boundTo(name, node string) *corev1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Obj()
}

func allExist(*corev1.Pod) bool { return true }

func allWait(types.NamespacedName) bool { return true }

func noneHeld(*corev1.Pod) bool { return false }

func TestAGangWaitsUntilItsLastVictimIsDeleted(t *testing.T) {
	g := newGoing()
	assert.False(t, g.any(), "no victims taken: PreEnqueue reads no pod's group")
	g.start(gangA, []*corev1.Pod{boundTo("v1", "n1"), boundTo("v2", "n1"), boundTo("v3", "n2")}, epoch, allExist)
	assert.True(t, g.deleting(gangA))
	assert.True(t, g.any())

	for _, uid := range []types.UID{"v1", "v2"} {
		key, last := g.deleted(uid)
		assert.Equal(t, gangA, key)
		assert.False(t, last, "%s is not the last victim", uid)
		assert.True(t, g.deleting(gangA))
	}
	key, last := g.deleted("v3")
	assert.Equal(t, gangA, key)
	assert.True(t, last, "v3 is the last victim: the gang's members are let in")
	assert.False(t, g.deleting(gangA))
	assert.False(t, g.any(), "no victim is left to go, though the gang may still wait for their room")

	_, last = g.deleted("v3")
	assert.False(t, last, "a deletion seen twice ends the wait once")
}

func TestAVictimAlreadyGoneWhenTakenIsNotWaitedFor(t *testing.T) {
	g := newGoing()
	gone := boundTo("gone", "n1")
	g.start(gangA, []*corev1.Pod{gone, boundTo("v", "n2")}, epoch, func(p *corev1.Pod) bool { return p != gone })

	_, last := g.deleted("gone")
	assert.False(t, last, "the informer no longer had it: its deletion was never waited for")
	assert.True(t, g.deleting(gangA))
	_, last = g.deleted("v")
	assert.True(t, last)

	g.start(gangB, []*corev1.Pod{boundTo("w", "n3")}, epoch, func(*corev1.Pod) bool { return false })
	assert.False(t, g.deleting(gangB), "every victim was gone when taken: nothing keeps the members out of the queue")
}

func TestAGangWaitsWhileAVictimStillHoldsRoomInTheSnapshot(t *testing.T) {
	g := newGoing()
	v := boundTo("v", "n1")
	g.start(gangA, []*corev1.Pod{v}, epoch, allExist)
	assert.True(t, g.waits(gangA, noneHeld), "the victim's deletion is not seen yet")

	g.deleted("v")
	assert.True(t, g.waits(gangA, func(p *corev1.Pod) bool { return p == v }), "deleted, but the snapshot still has it")
	assert.False(t, g.waits(gangA, noneHeld))
	assert.Empty(t, g.promised(gangB, allWait), "a gang that waits for nothing more is forgotten")
	assert.False(t, g.waits(gangA, func(*corev1.Pod) bool { return true }), "forgotten: nothing is waited for again")
}

func TestTheRoomVictimsLeaveIsPromisedToTheGangTheyWereTakenFor(t *testing.T) {
	tests := []struct {
		name   string
		except types.NamespacedName
		waits  func(types.NamespacedName) bool
		want   []string
	}{
		{"to another gang's search, both gangs' nodes", types.NamespacedName{Namespace: "ns", Name: "c"}, allWait, []string{"n1", "n2", "n3"}},
		{"to a gang's own search, only the other gang's", gangA, allWait, []string{"n3"}},
		{"not for a gang that no longer waits for room", types.NamespacedName{}, func(k types.NamespacedName) bool { return k != gangB }, []string{"n1", "n2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGoing()
			g.start(gangA, []*corev1.Pod{boundTo("a1", "n1"), boundTo("a2", "n2")}, epoch, allExist)
			g.start(gangB, []*corev1.Pod{boundTo("b1", "n3")}, epoch, allExist)
			g.deleted("a1")
			g.deleted("a2")
			assert.Equal(t, sets.New(tt.want...), g.promised(tt.except, tt.waits), "the room stays promised after its victims are deleted")
		})
	}
}

func TestAGangThatNoLongerWaitsIsForgottenWithItsVictims(t *testing.T) {
	g := newGoing()
	g.start(gangB, []*corev1.Pod{boundTo("b1", "n3")}, epoch, allExist)
	g.promised(gangA, func(types.NamespacedName) bool { return false })

	assert.False(t, g.deleting(gangB))
	_, last := g.deleted("b1")
	assert.False(t, last, "the victim of a forgotten gang activates nobody")
	assert.Empty(t, g.promised(gangA, allWait))
}

func TestANewPreemptionForAGangReplacesItsLast(t *testing.T) {
	g := newGoing()
	g.start(gangA, []*corev1.Pod{boundTo("old", "n1")}, epoch, allExist)
	g.start(gangA, []*corev1.Pod{boundTo("new", "n2")}, epoch.Add(time.Second), allExist)

	_, last := g.deleted("old")
	assert.False(t, last, "the first preemption's victim is no longer waited for")
	assert.Equal(t, sets.New("n2"), g.promised(gangB, allWait))
	_, last = g.deleted("new")
	assert.True(t, last)
}

func TestEndForgetsOnlyTheWaitItStarted(t *testing.T) {
	first, second := epoch, epoch.Add(time.Second)
	g := newGoing()
	g.start(gangA, []*corev1.Pod{boundTo("v", "n1")}, second, allExist)

	assert.False(t, g.end(gangA, first), "a timer of an earlier preemption leaves the later one alone")
	assert.True(t, g.deleting(gangA))
	assert.True(t, g.end(gangA, second), "its victim was still to be deleted: the members held at PreEnqueue are let in")
	assert.False(t, g.deleting(gangA))
	assert.Empty(t, g.promised(gangB, allWait))
	_, last := g.deleted("v")
	assert.False(t, last, "a deletion after the wait ended activates nobody again")

	g.start(gangB, []*corev1.Pod{boundTo("w", "n2")}, first, allExist)
	g.deleted("w")
	assert.False(t, g.end(gangB, first), "every victim was deleted: the last deletion already let the members in")
}

func TestAVictimsCostIsComparedAsKubeSchedulerComparesCandidates(t *testing.T) {
	tests := []struct {
		name          string
		cheap, dear   []*unit
		budgetsOnDear []string
	}{
		{"a budget violated is dearer than any priority", []*unit{victim("high", 9, 0, 4)}, []*unit{victim("guarded", 1, 0, 1)}, []string{"guarded"}},
		{"then the lower highest priority", []*unit{victim("mid", 3, 0, 4)}, []*unit{victim("low", 1, 0, 1), victim("high", 5, 0, 1)}, nil},
		{"then the lower sum of priorities, each pod counted", []*unit{victim("one", 3, 0, 1)}, []*unit{victim("gang", 3, 0, 2)}, nil},
		{"then the fewer pods", []*unit{victim("one", 2, 0, 1)}, []*unit{victim("one", 2, 0, 1), victim("free", 0, 0, 3)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pdbs []*policy.PodDisruptionBudget
			for _, name := range tt.budgetsOnDear {
				pdbs = append(pdbs, budget(name))
			}
			cheap, dear := costOf(tt.cheap, pdbs), costOf(tt.dear, pdbs)
			assert.Negative(t, cheap.compare(dear))
			assert.Positive(t, dear.compare(cheap))
			assert.Zero(t, cheap.compare(cheap))
		})
	}
}

func TestAVictimsCostCountsEveryPodOfAGang(t *testing.T) {
	c := costOf([]*unit{victim("gang", 2, 0, 3), victim("pod", 5, 0, 1)}, nil)
	assert.Equal(t, cost{violations: 0, highest: 5, sum: 11, pods: 4}, c)
}
