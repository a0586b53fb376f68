package gangpreemption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// victim is a unit of n pods of the priority, started minutes after
// epoch, labelled app=name.
func victim(name string, priority int32, minutes, n int) *unit {
	var pods []*corev1.Pod
	start := metav1.NewTime(epoch.Add(time.Duration(minutes) * time.Minute))
	for i := range n {
		pod := st.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-%d", name, i)).UID(fmt.Sprintf("%s-%d", name, i)).
			Label("app", name).Priority(priority).Obj()
		pod.Status.StartTime = &start
		pods = append(pods, pod)
	}
	keyType := fwk.PodKeyType
	if n > 1 {
		keyType = fwk.PodGroupKeyType
	}
	return newUnit("ns/"+name, pods, priority, keyType)
}

func elasticExtra(whole *unit, name string, index int32) *unit {
	u := victim(name, whole.priority, 0, 1)
	u.name, u.start, u.shrink, u.whole, u.index = whole.name, whole.start, true, whole, index
	return u
}

// budget allows no disruption of the pods labelled app=name.
func budget(name string) *policy.PodDisruptionBudget {
	return &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       policy.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
}

// room plays a node: fits holds while the units kept hold at most
// capacity pods.
type room struct {
	capacity int
	kept     map[*unit]bool
}

func (r *room) fits() bool {
	n := 0
	for u, kept := range r.kept {
		if kept {
			n += len(u.pods)
		}
	}
	return n <= r.capacity
}

func (r *room) give(u *unit) error { r.kept[u] = true; return nil }
func (r *room) take(u *unit) error { r.kept[u] = false; return nil }

func TestReprieveTakesTheCheapestUnitsThatMakeRoom(t *testing.T) {
	dear, cheap := victim("dear", 5, 0, 1), victim("cheap", 1, 0, 1)
	gang, pod := victim("gang", 1, 0, 2), victim("pod", 1, 0, 1)
	older, younger := victim("older", 1, 0, 1), victim("younger", 1, 10, 1)
	guarded, open := victim("guarded", 1, 0, 1), victim("open", 9, 0, 1)
	elastic := victim("elastic", 1, 0, 1)
	extra2, extra3 := elasticExtra(elastic, "elastic-2", 2), elasticExtra(elastic, "elastic-3", 3)
	tests := []struct {
		name     string
		units    []*unit
		pdbs     []*policy.PodDisruptionBudget
		capacity int
		want     []*unit
	}{
		{"the lowest priority first", []*unit{dear, cheap}, nil, 1, []*unit{cheap}},
		{"a pod of no group before a gang of the same priority", []*unit{gang, pod}, nil, 2, []*unit{pod}},
		{"the youngest first", []*unit{older, younger}, nil, 1, []*unit{younger}},
		{"a PodDisruptionBudget broken last, before priority", []*unit{guarded, open}, []*policy.PodDisruptionBudget{budget("guarded")}, 1, []*unit{open}},
		{"members above an elastic min before the whole group, the highest index first", []*unit{elastic, extra2, extra3}, nil, 2, []*unit{extra3}},
		{"a gang taken whole takes its members above its min with it", []*unit{elastic, extra2, extra3}, nil, 0, []*unit{elastic, extra2, extra3}},
		{"nothing needed, nothing taken", []*unit{dear, cheap}, nil, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &room{capacity: tt.capacity, kept: map[*unit]bool{}}
			taken, _, err := reprieve(slices.Clone(tt.units), tt.pdbs, r.give, func(*unit) bool { return r.fits() }, r.take)
			require.NoError(t, err)
			assert.ElementsMatch(t, names(tt.want), names(taken))
			assert.True(t, r.fits(), "what is kept fits")
		})
	}
}

func TestAGangWaitsForItsVictimsUntilTheSnapshotHasNoneLeft(t *testing.T) {
	g := newGoing()
	key := types.NamespacedName{Namespace: "ns", Name: "high"}
	victims := victimPods([]*unit{victim("low", 1, 0, 2)})
	g.start(key, victims, epoch, func(*corev1.Pod) bool { return true })
	inSnapshot := map[types.UID]bool{victims[0].UID: true, victims[1].UID: true}
	held := func(p *corev1.Pod) bool { return inSnapshot[p.UID] }

	assert.True(t, g.deleting(key), "no victim deleted yet")
	_, last := g.deleted(victims[0].UID)
	assert.False(t, last, "one victim is left")
	_, last = g.deleted(victims[1].UID)
	assert.True(t, last, "the last victim is deleted: the members are let in")
	assert.False(t, g.deleting(key))
	assert.True(t, g.waits(key, held), "the snapshot still has the victims: nothing more is taken")
	inSnapshot = nil
	assert.False(t, g.waits(key, held), "the victims are gone from the snapshot")
}

func TestAGangStopsWaitingForVictimsThatNeverGoWhenItsTimerEnds(t *testing.T) {
	g := newGoing()
	key := types.NamespacedName{Namespace: "ns", Name: "high"}
	always := func(*corev1.Pod) bool { return true }
	g.start(key, victimPods([]*unit{victim("stuck", 1, 0, 1)}), epoch, always)
	assert.True(t, g.waits(key, always))
	assert.False(t, g.end(key, epoch.Add(time.Second)), "a later wait is not ended by an earlier one's timer")
	assert.True(t, g.end(key, epoch), "the wait ends with a victim undeleted: its members are to be let in")
	assert.False(t, g.deleting(key), "and it is forgotten")
	assert.False(t, g.waits(key, always), "the gang may preempt again")
}

func TestVictimListNamesTheFirstVictimsAndCountsTheRest(t *testing.T) {
	assert.Equal(t, "ns/a", victimList([]string{"ns/a"}))
	assert.Equal(t, "ns/a, ns/b, ns/c, ns/d, ns/e and 2 more", victimList([]string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e", "ns/f", "ns/g"}))
}

func TestVictimListKeepsThePreemptingEventWithinTheAPIsLimit(t *testing.T) {
	// The longest names there are: a namespace of 63 characters and a pod
	// name of 253.
	long := strings.Repeat("n", 63) + "/" + strings.Repeat("p", 253)
	list := victimList([]string{long, long, long, long, long, long})
	assert.Equal(t, long+" and 5 more", list, "six victims of the longest names: the first named and 5 counted")
	note := fmt.Sprintf("took %s (priority below %d) so that its %d missing members fit at once", list, int32(-2147483648), 1<<30)
	assert.LessOrEqual(t, len(note), 1024, "an event's note holds at most 1,024 characters")
	assert.Equal(t, long+long, victimList([]string{long + long}), "one victim is named whatever its length")
}

func TestAVictimAlreadyGoneIsNotWaitedFor(t *testing.T) {
	g := newGoing()
	key := types.NamespacedName{Namespace: "ns", Name: "high"}
	victims := victimPods([]*unit{victim("low", 1, 0, 2)})
	g.start(key, victims, epoch, func(p *corev1.Pod) bool { return p.UID != victims[0].UID })
	_, last := g.deleted(victims[1].UID)
	assert.True(t, last, "the victim another preemption deleted first is not waited for")
}

func TestTheNodesOfVictimsAnotherGangWaitsForAreLeftAlone(t *testing.T) {
	g := newGoing()
	mine, theirs := types.NamespacedName{Namespace: "ns", Name: "mine"}, types.NamespacedName{Namespace: "ns", Name: "theirs"}
	victims := victimPods([]*unit{victim("low", 1, 0, 1)})
	victims[0].Spec.NodeName = "node-1"
	waiting := true
	waits := func(types.NamespacedName) bool { return waiting }
	g.start(theirs, victims, epoch, func(*corev1.Pod) bool { return true })
	assert.True(t, g.promised(mine, waits).Has("node-1"), "another gang's room")
	assert.False(t, g.promised(theirs, waits).Has("node-1"), "a gang's own room")
	g.deleted(victims[0].UID)
	assert.True(t, g.promised(mine, waits).Has("node-1"), "the victim is gone, but the gang's members do not hold the room yet")
	waiting = false
	assert.False(t, g.promised(mine, waits).Has("node-1"), "admitted: its members hold the room, which is no longer promised")
	waiting = true
	assert.False(t, g.promised(mine, waits).Has("node-1"), "a gang that stopped waiting is forgotten: a later look at it (its attempt forgotten, its PodGroup made again) promises it nothing")
}

// TestReprieveTakesAnElasticGroupsHigherIndicesWithALowerOne: the owner of
// a member above an elastic min is shrunk to its index, so when the member
// a node needs gone is not the highest, every higher one goes with it,
// whenever each started and whatever budgets guard them.
func TestReprieveTakesAnElasticGroupsHigherIndicesWithALowerOne(t *testing.T) {
	elastic := victim("elastic", 1, 0, 1)
	extra2, extra3 := elasticExtra(elastic, "elastic-2", 2), elasticExtra(elastic, "elastic-3", 3)
	// elastic-3 started first: the index decides, not the start.
	extra3.start = &metav1.Time{Time: epoch.Add(-time.Hour)}
	tests := []struct {
		name           string
		pdbs           []*policy.PodDisruptionBudget
		wantViolations int
	}{
		{"no budget", nil, 0},
		{"the higher member guarded by a budget, so given back first", []*policy.PodDisruptionBudget{budget("elastic-3")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept := map[*unit]bool{}
			// The node needs elastic-2 gone, and nothing else.
			fits := func(*unit) bool { return !kept[extra2] }
			give := func(u *unit) error { kept[u] = true; return nil }
			take := func(u *unit) error { kept[u] = false; return nil }
			taken, violations, err := reprieve([]*unit{extra3, extra2, elastic}, tt.pdbs, give, fits, take)
			require.NoError(t, err)
			var pods []string
			for _, p := range victimPods(taken) {
				pods = append(pods, p.Name)
			}
			assert.ElementsMatch(t, []string{"elastic-2-0", "elastic-3-0"}, pods)
			assert.False(t, kept[extra3], "elastic-3 is off the node's room too")
			assert.True(t, kept[elastic], "the group keeps its min")
			assert.Equal(t, tt.wantViolations, violations)
		})
	}
}
