package gangpreemption

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/frameworktest"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/topology"
)

// boundMember is a running member of a gang of low priority.
func boundMember(gang, name, node, cpu string) *corev1.Pod {
	return gangMember(gang, name, cpu).Node(node).Priority(low).Obj()
}

// worker is a running worker of an elastic group, of low priority.
func worker(gang string, index int, node, cpu string) *corev1.Pod {
	return gangMember(gang, fmt.Sprintf("%s-%d", gang, index), cpu).Node(node).Priority(low).
		Label(topology.RoleLabel, topology.ElasticRole).Label(topology.IndexLabel, fmt.Sprint(index)).Obj()
}

// elastic makes the PodGroup an elastic group of workers.
func elastic(pg *v1alpha1.PodGroup, workers, scale string) *v1alpha1.PodGroup {
	pg.Annotations = map[string]string{topology.RolesAnnotation: "worker=" + workers, topology.ElasticAnnotation: scale}
	return pg
}

func TestAVictimGangIsTakenWhole(t *testing.T) {
	tests := []struct {
		name   string
		nodes  []*corev1.Node
		others []*corev1.Pod
		want   []string
	}{
		{
			name:  "a gang on two nodes goes whole where one node would do",
			nodes: []*corev1.Node{node("n1", "4"), node("n2", "4")},
			want:  []string{"old-0", "old-1"},
		},
		{
			name:   "a pod of no group is cheaper than a gang of two",
			nodes:  []*corev1.Node{node("n1", "4"), node("n2", "4"), node("n3", "4")},
			others: []*corev1.Pod{running("solo", "n3", low, "3").Obj()},
			want:   []string{"solo"},
		},
		{
			name:   "a gang of lower priority goes before a pod of higher",
			nodes:  []*corev1.Node{node("n1", "4"), node("n2", "4"), node("n3", "4")},
			others: []*corev1.Pod{running("dearer", "n3", low+1, "3").Obj()},
			want:   []string{"old-0", "old-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, preemptor := podGroup("old", 2), podGroup("new", 1)
			member := gangMember("new", "new-0", "3").Obj()
			pods := append([]*corev1.Pod{boundMember("old", "old-0", "n1", "3"), boundMember("old", "old-1", "n2", "3"), member}, tt.others...)
			s := newSearch(t, tt.nodes, pods, []*v1alpha1.PodGroup{old, preemptor})

			result, status := s.postFilter(t, member)
			require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
			require.NotNil(t, result)
			assert.Equal(t, tt.want, s.deleted(t, len(tt.want)))
		})
	}
}

// TestAnElasticGroupShrinksFromItsHighestWorker: a worker above the min
// goes before the group is taken whole, the highest index first. Its owner
// is shrunk to the victim's index, so taking a lower one takes every
// higher one too, and the search counts them as victims rather than
// leaving them to go unseen.
func TestAnElasticGroupShrinksFromItsHighestWorker(t *testing.T) {
	threeNodes := func(cpu string) []*corev1.Node {
		return []*corev1.Node{node("n0", cpu), node("n1", cpu), node("n2", cpu)}
	}
	tests := []struct {
		name  string
		nodes []*corev1.Node
		group *v1alpha1.PodGroup
		pods  []*corev1.Pod
		// members is the preempting gang's size, each member of memberCPU.
		members   int
		memberCPU string
		wantNode  string
		want      []string
	}{
		{
			name:  "the highest worker alone where its node is freed by it",
			nodes: threeNodes("4"), group: elastic(podGroup("el", 1), "3", "1:3"),
			pods:    []*corev1.Pod{worker("el", 0, "n0", "3"), worker("el", 1, "n1", "3"), worker("el", 2, "n2", "3")},
			members: 1, memberCPU: "3",
			wantNode: "n2", want: []string{"el-2"},
		},
		{
			name:  "a lower worker with every higher one",
			nodes: threeNodes("4"), group: elastic(podGroup("el", 1), "3", "1:3"),
			pods: []*corev1.Pod{
				worker("el", 0, "n0", "3"), worker("el", 1, "n1", "3"), worker("el", 2, "n2", "1"),
				// n2 cannot be freed: its other pod is as dear as the preemptor.
				running("dear", "n2", high, "3").Obj(),
			},
			members: 1, memberCPU: "3",
			wantNode: "n1", want: []string{"el-1", "el-2"},
		},
		{
			// A worker taken for one member is on another node than the
			// candidates kept for the members after it, whose victims
			// include it: they must not take it again.
			name:  "down to its min for a gang of several members",
			nodes: threeNodes("2"), group: elastic(podGroup("el", 2), "6", "2:6"),
			pods: []*corev1.Pod{
				worker("el", 0, "n0", "1"), worker("el", 1, "n0", "1"), worker("el", 2, "n1", "1"),
				worker("el", 3, "n1", "1"), worker("el", 4, "n2", "1"), worker("el", 5, "n2", "1"),
			},
			members: 4, memberCPU: "1",
			want: []string{"el-2", "el-3", "el-4", "el-5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			preemptor := podGroup("new", int32(tt.members))
			var members []*corev1.Pod
			for i := range tt.members {
				members = append(members, gangMember("new", fmt.Sprintf("new-%d", i), tt.memberCPU).Obj())
			}
			s := newSearch(t, tt.nodes, append(slices.Clone(tt.pods), members...), []*v1alpha1.PodGroup{tt.group, preemptor})

			result, status := s.postFilter(t, members[0])
			require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
			require.NotNil(t, result, status.Message())
			if tt.wantNode != "" {
				assert.Equal(t, tt.wantNode, result.NominatingInfo.NominatedNodeName)
			}
			assert.Equal(t, tt.want, s.deleted(t, len(tt.want)), "the group keeps its min")
		})
	}
}

// TestAGangsMembersWaitOutOfTheQueueUntilItsLastVictimIsGone: PreEnqueue
// holds the members while a victim taken for their gang is left, and the
// last victim's deletion activates them; no cluster event is registered
// to look at them before.
func TestAGangsMembersWaitOutOfTheQueueUntilItsLastVictimIsGone(t *testing.T) {
	pg := podGroup("new", 2)
	members := []*corev1.Pod{gangMember("new", "new-0", "3").Obj(), gangMember("new", "new-1", "3").Obj()}
	victims := []*corev1.Pod{running("v1", "n1", low, "3").Obj(), running("v2", "n2", low, "3").Obj()}
	c := frameworktest.NewCluster(t, []*corev1.Node{node("n1", "4"), node("n2", "4")}, append(slices.Clone(victims), members...), []*v1alpha1.PodGroup{pg})
	s := newSearchOn(t, c)
	require.Nil(t, s.pl.PreEnqueue(s.ctx, members[1]), "no preemption yet")
	events, err := s.pl.EventsToRegister(s.ctx)
	require.NoError(t, err)
	assert.Empty(t, events, "what PreEnqueue holds is let in by activation alone")

	_, status := s.postFilter(t, members[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
	assert.Equal(t, []string{"v1", "v2"}, s.deleted(t, 2))

	for i, v := range victims {
		waiting := s.pl.PreEnqueue(s.ctx, members[1])
		require.NotNil(t, waiting, "%d of 2 victims gone", i)
		assert.Equal(t, fwk.UnschedulableAndUnresolvable, waiting.Code())
		assert.Contains(t, waiting.Message(), "waiting for the victims preempted for its gang to go")
		assert.Empty(t, c.Activator.Activated, "%d of 2 victims gone: nothing activated", i)
		s.pl.victimGone(group.Deleted(v))
	}
	assert.ElementsMatch(t, []string{"ns/new-0", "ns/new-1"}, c.Activator.Activated, "the last victim's deletion activates the members")
	assert.Nil(t, s.pl.PreEnqueue(s.ctx, members[1]), "the last victim is gone")
	assert.Nil(t, s.pl.PreEnqueue(s.ctx, running("other", "", high, "1").Obj()), "a pod of no gang never waits for another's victims")
}

func TestWhoMayPreemptOthers(t *testing.T) {
	never := corev1.PreemptNever
	el := elastic(podGroup("el", 1), "3", "1:3")
	pods := []*corev1.Pod{worker("el", 0, "n1", "1")}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a gang's member", gangMember("gang", "gang-0", "1").Obj(), true},
		{"a pod with preemptionPolicy Never", gangMember("gang", "gang-0", "1").PreemptionPolicy(never).Obj(), false},
		{"a worker above an admitted elastic group's min", gangMember("el", "el-1", "1").Label(topology.RoleLabel, topology.ElasticRole).Label(topology.IndexLabel, "1").Obj(), false},
		{"a pod of no group", running("plain", "", high, "1").Obj(), true},
	}
	s := newSearch(t, []*corev1.Node{node("n1", "4")}, pods, []*v1alpha1.PodGroup{el, podGroup("gang", 1)})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eligible, reason := s.pl.PodEligibleToPreemptOthers(s.ctx, tt.pod, nil)
			assert.Equal(t, tt.want, eligible, reason)
			if !tt.want {
				assert.NotEmpty(t, reason, "a refusal says why")
			}
		})
	}
}

// TestAGangWithABoundMemberFreesRoomOnlyInThatMembersDomain: the rest of a
// gang that must stay in one rack goes where its bound member is, so its
// victims are taken there, though another rack's would be cheaper.
func TestAGangWithABoundMemberFreesRoomOnlyInThatMembersDomain(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", "4"), racked("a2", "rack-a", "4"), racked("b1", "rack-b", "4"), racked("b2", "rack-b", "4")}
	pg := podGroup("job", 2)
	pg.Annotations = map[string]string{topology.DomainRequiredAnnotation: rackLabel}
	bound := gangMember("job", "job-0", "4").Node("a1").Obj()
	pending := gangMember("job", "job-1", "4").Obj()
	pods := []*corev1.Pod{
		bound, pending,
		running("va2", "a2", low+1, "4").Obj(),
		running("vb1", "b1", low, "4").Obj(),
		running("vb2", "b2", low, "4").Obj(),
	}
	s := newSearch(t, nodes, pods, []*v1alpha1.PodGroup{pg})

	result, status := s.postFilter(t, pending)
	require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
	require.NotNil(t, result)
	assert.Equal(t, "a2", result.NominatingInfo.NominatedNodeName)
	assert.Equal(t, []string{"va2"}, s.deleted(t, 1), "rack-b's cheaper pods are of no use to a gang bound in rack-a")
}

// TestEachVictimGangIsToldOnceWhatItLost: the victims of one gang's
// preemption are told by one event on each victim gang, naming what it
// lost, however many of its members went.
func TestEachVictimGangIsToldOnceWhatItLost(t *testing.T) {
	tests := []struct {
		name    string
		group   *v1alpha1.PodGroup
		pods    []*corev1.Pod
		victims []string
		want    string
	}{
		{
			name:    "a gang taken whole",
			group:   podGroup("old", 3),
			pods:    []*corev1.Pod{boundMember("old", "old-0", "n0", "3"), boundMember("old", "old-1", "n1", "3"), boundMember("old", "old-2", "n2", "3")},
			victims: []string{"old-0", "old-1", "old-2"},
			want:    "Warning Preempted all 3 members preempted by gang ns/new (priority 10): a gang is taken whole",
		},
		{
			name:    "workers above an elastic min",
			group:   elastic(podGroup("el", 1), "3", "1:3"),
			pods:    []*corev1.Pod{worker("el", 0, "n0", "3"), worker("el", 1, "n1", "3"), worker("el", 2, "n2", "3")},
			victims: []string{"el-2", "el-1"},
			want:    "Warning Preempted members el-1, el-2 above the elastic min preempted by gang ns/new (priority 10)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []*corev1.Node{node("n0", "4"), node("n1", "4"), node("n2", "4")}
			preemptorGroup := podGroup("new", 1)
			member := gangMember("new", "new-0", "3").Priority(high).Obj()
			s := newSearch(t, nodes, append(slices.Clone(tt.pods), member), []*v1alpha1.PodGroup{tt.group, preemptorGroup})
			var victims []*corev1.Pod
			for _, p := range tt.pods {
				if slices.Contains(tt.victims, p.Name) {
					victims = append(victims, p)
				}
			}

			s.pl.sendVictims(s.ctx, preemptorGroup, &gangPreemptor{pg: preemptorGroup, pod: member, members: []*corev1.Pod{member}, priority: high}, victims)

			assert.Len(t, s.deleted(t, len(victims)), len(victims))
			var told []string
			recorder := s.fw.EventRecorder().(*events.FakeRecorder)
			for len(recorder.Events) > 0 {
				if e := <-recorder.Events; strings.HasPrefix(e, "Warning Preempted") {
					told = append(told, e)
				}
			}
			require.Len(t, told, 1, "one event for the victim gang: %q", told)
			assert.True(t, strings.HasPrefix(told[0], tt.want), "the gang was told %q; want it to start %q", told[0], tt.want)
		})
	}
}
