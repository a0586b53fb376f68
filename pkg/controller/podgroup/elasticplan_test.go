package podgroup

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

func cpu(n string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
}

// elastic is a group of min:max workers of one CPU each, with the bound
// workers of these indices.
func elastic(name string, priority, lo, hi int32, indices ...int32) *elasticGroup {
	g := &elasticGroup{key: types.NamespacedName{Namespace: ns, Name: name}, priority: priority, elastic: topology.Range{Min: lo, Max: hi}}
	for _, i := range indices {
		g.workers = append(g.workers, elasticWorker{pod: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i)}, index: i, requests: cpu("1")})
	}
	return g
}

func TestPlanShrink(t *testing.T) {
	type taken struct {
		group string
		index int32
	}
	tests := []struct {
		name    string
		deficit corev1.ResourceList
		waiting int32
		groups  []*elasticGroup
		want    []taken
	}{
		{
			name:    "from the most fulfilled group, its highest index first",
			deficit: cpu("1"),
			groups:  []*elasticGroup{elastic("a", 0, 1, 5, 0, 1), elastic("b", 0, 1, 5, 0, 1, 2, 3)},
			want:    []taken{{"b", 3}},
		},
		{
			name:    "each member from whichever group is most fulfilled then",
			deficit: cpu("3"),
			groups:  []*elasticGroup{elastic("a", 0, 1, 3, 0, 1, 2), elastic("b", 0, 1, 5, 0, 1, 2, 3)},
			want:    []taken{{"a", 2}, {"b", 3}, {"b", 2}},
		},
		{
			name:    "never below min",
			deficit: cpu("2"),
			groups:  []*elasticGroup{elastic("a", 0, 2, 4, 0, 1, 2), elastic("b", 0, 1, 2, 0, 1)},
			want:    []taken{{"b", 1}, {"a", 2}},
		},
		{
			name:    "nothing when the groups cannot cover the deficit",
			deficit: cpu("3"),
			groups:  []*elasticGroup{elastic("a", 0, 2, 4, 0, 1, 2), elastic("b", 0, 1, 2, 0, 1)},
		},
		{
			name:    "not from a group of higher priority than the gang",
			deficit: cpu("1"),
			groups:  []*elasticGroup{elastic("high", 10, 1, 3, 0, 1, 2), elastic("low", 0, 1, 3, 0, 1)},
			want:    []taken{{"low", 1}},
		},
		{
			name:    "not from a group of lower priority, which muster-scheduler preempts",
			deficit: cpu("1"),
			waiting: 10,
			groups:  []*elasticGroup{elastic("high", 10, 1, 3, 0, 1, 2), elastic("low", 0, 1, 3, 0, 1, 2)},
			want:    []taken{{"high", 2}},
		},
		{
			name:    "a resource the members do not request cannot be covered",
			deficit: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			groups:  []*elasticGroup{elastic("a", 0, 1, 3, 0, 1, 2)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []taken
			for _, s := range planShrink(tt.deficit, gangOfPriority(tt.waiting), tt.groups) {
				got = append(got, taken{s.group.key.Name, s.worker.index})
				assert.Greater(t, s.before, s.after, "a shrink lowers the fulfillment")
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestWaitingForRoom(t *testing.T) {
	unschedulable := func(w *corev1.Pod) *corev1.Pod {
		w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		return w
	}
	pod := func(name string) *corev1.Pod {
		p := member(name).Obj()
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}}
		return p
	}
	bound := pod("a")
	bound.Spec.NodeName = "node-1"
	pg := podGroup(3, v1alpha1.PodGroupStatus{})

	gang, waits := waitingForRoom(pg, []corev1.Pod{*bound, *unschedulable(pod("b")), *pod("c")})
	assert.True(t, waits)
	need := gang.Need()
	assert.True(t, need.Cpu().Equal(resource.MustParse("2")), "the two members missing from the min: %v", need)
	assert.Equal(t, "b", gang.Lacking[0].Name)

	_, waits = waitingForRoom(pg, []corev1.Pod{*bound, *pod("b"), *pod("c")})
	assert.False(t, waits, "the scheduler has not found it short of room")
	_, waits = waitingForRoom(pg, []corev1.Pod{*bound, *unschedulable(pod("b"))})
	assert.False(t, waits, "a member is missing: the gang waits for pods, not room")
}

// withTemplate gives a group a worker template that requests perMember
// and may run only on nodes labelled pool=pool, when pool is set.
func withTemplate(g *elasticGroup, perMember corev1.ResourceList, pool string) *elasticGroup {
	template := st.MakePod().Name(g.key.Name + "-0").Obj()
	template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: perMember}}}
	if pool != "" {
		template.Spec.NodeSelector = map[string]string{"pool": pool}
	}
	g.template = template
	return g
}

func room(name, pool string, free corev1.ResourceList) resources.Room {
	node := st.MakeNode().Name(name).Label("pool", pool).Obj()
	node.Status.Allocatable = free.DeepCopy()
	return resources.Room{Node: node, Free: free}
}

func TestPlanGrowth(t *testing.T) {
	gpu := func(n string) corev1.ResourceList {
		return corev1.ResourceList{envinject.GPUResource: resource.MustParse(n), corev1.ResourceCPU: resource.MustParse("1")}
	}
	tests := []struct {
		name   string
		groups []*elasticGroup
		nodes  []resources.Room
		want   map[string]int
	}{
		{
			name: "the least fulfilled group first, one worker at a time",
			groups: []*elasticGroup{
				withTemplate(elastic("a", 0, 1, 5, 0, 1, 2), cpu("1"), ""),
				withTemplate(elastic("b", 0, 1, 5, 0), cpu("1"), ""),
			},
			nodes: []resources.Room{room("n1", "x", cpu("3"))},
			// b 0.00 → 0.25 → 0.50 = a's 0.50; the tie goes to a by name.
			want: map[string]int{"a": 1, "b": 2},
		},
		{
			name: "never beyond max",
			groups: []*elasticGroup{
				withTemplate(elastic("a", 0, 1, 2, 0), cpu("1"), ""),
			},
			nodes: []resources.Room{room("n1", "x", cpu("8"))},
			want:  map[string]int{"a": 1},
		},
		{
			name: "a worker fits on one node, not across two",
			groups: []*elasticGroup{
				withTemplate(elastic("a", 0, 1, 3, 0), cpu("2"), ""),
			},
			nodes: []resources.Room{room("n1", "x", cpu("1")), room("n2", "x", cpu("1"))},
			want:  map[string]int{},
		},
		{
			name: "only on the nodes its workers may run on",
			groups: []*elasticGroup{
				withTemplate(elastic("a", 0, 1, 3, 0), cpu("1"), "x"),
				withTemplate(elastic("b", 0, 1, 3, 0, 1), cpu("1"), ""),
			},
			nodes: []resources.Room{room("n1", "y", cpu("1"))},
			want:  map[string]int{"b": 1},
		},
		{
			name: "at equal fulfillment, fewer GPUs per member first",
			groups: []*elasticGroup{
				withTemplate(elastic("big", 0, 1, 3, 0), gpu("2"), ""),
				withTemplate(elastic("small", 0, 1, 3, 0), gpu("1"), ""),
			},
			nodes: []resources.Room{room("n1", "x", gpu("2"))},
			want:  map[string]int{"small": 1},
		},
		{
			name: "a group whose next worker does not fit leaves the room to the others",
			groups: []*elasticGroup{
				withTemplate(elastic("wide", 0, 1, 3, 0), cpu("4"), ""),
				withTemplate(elastic("narrow", 0, 1, 5, 0, 1, 2), cpu("1"), ""),
			},
			nodes: []resources.Room{room("n1", "x", cpu("2"))},
			want:  map[string]int{"narrow": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]int{}
			for g, n := range planGrowth(tt.groups, tt.nodes) {
				got[g.key.Name] = n
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAGroupInOneDomainGrowsOnlyIntoIdleRoomOfItsDomain(t *testing.T) {
	racked := func(name, rack string) resources.Room {
		r := room(name, "x", cpu("2"))
		r.Node.Labels[topology.RackLabel] = rack
		return r
	}
	// Its worker is on a1, which is full; b1 of the other rack is idle,
	// then a2 of its own.
	nodes := []resources.Room{room("a1", "x", cpu("0")), racked("b1", "rack-b"), racked("a2", "rack-a")}
	nodes[0].Node.Labels[topology.RackLabel] = "rack-a"
	g := withTemplate(elastic("a", 0, 1, 5, 0), cpu("1"), "")
	g.domainKey, g.anchor = topology.RackLabel, "a1"
	gains := planGrowth([]*elasticGroup{g}, nodes)
	assert.Equal(t, 2, gains[g], "a2's two CPUs, none of b1's")

	free := withTemplate(elastic("free", 0, 1, 5, 0), cpu("1"), "")
	nodes = []resources.Room{room("a1", "x", cpu("0")), racked("b1", "rack-b"), racked("a2", "rack-a")}
	assert.Equal(t, 4, planGrowth([]*elasticGroup{free}, nodes)[free], "a group free to span domains takes both")
}

func TestRoomIsTakenBackInTheReverseOfTheOrderItIsGiven(t *testing.T) {
	// Equally fulfilled: growth serves the smaller member first, so room
	// is taken back from the larger first.
	big := withTemplate(elastic("big", 0, 1, 3, 0, 1), cpu("2"), "")
	small := withTemplate(elastic("small", 0, 1, 3, 0, 1), cpu("1"), "")
	plan := planShrink(cpu("1"), gangOfPriority(0), []*elasticGroup{small, big})
	if assert.Len(t, plan, 1) {
		assert.Equal(t, "big", plan[0].group.key.Name)
	}
}

func TestIdleRoomIsOnlyWhereNoGangWaits(t *testing.T) {
	// waiting is a gang of the priority lacking n members of 3 CPUs that
	// may run only in pool.
	waiting := func(pool string, n int, priority int32) topology.WaitingGang {
		var lacking []*corev1.Pod
		for i := range n {
			pod := st.MakePod().Name(fmt.Sprintf("gang-%d", i)).Priority(priority).NodeSelector(map[string]string{"pool": pool}).
				Req(map[corev1.ResourceName]string{"cpu": "3"}).Obj()
			lacking = append(lacking, pod)
		}
		return topology.WaitingGang{Lacking: lacking}
	}
	nodes := []resources.Room{room("x1", "x", cpu("4")), room("x2", "x", cpu("4")), room("y1", "y", cpu("4"))}
	names := func(rooms []resources.Room) []string {
		var out []string
		for _, r := range rooms {
			out = append(out, r.Node.Name)
		}
		return out
	}
	assert.Equal(t, []string{"y1"}, names(roomNoGangWaitsFor(nodes, []topology.WaitingGang{waiting("x", 2, 0)}, 0)),
		"the nodes a waiting gang may use are its")
	assert.Equal(t, []string{"x1", "x2", "y1"}, names(roomNoGangWaitsFor(nodes, []topology.WaitingGang{waiting("x", 3, 0)}, 0)),
		"a gang its nodes could never hold keeps no room")
	assert.Equal(t, []string{"x1", "x2", "y1"}, names(roomNoGangWaitsFor(nodes, []topology.WaitingGang{waiting("x", 2, 0)}, 5)),
		"a gang keeps no room from groups of higher priority")
	assert.Equal(t, []string{"y1"}, names(roomNoGangWaitsFor(nodes, []topology.WaitingGang{waiting("x", 2, 5)}, 0)),
		"a gang keeps room from groups of lower priority")
}

// gangOfPriority is a waiting gang lacking one member of the priority.
func gangOfPriority(priority int32) topology.WaitingGang {
	return topology.WaitingGang{Lacking: []*corev1.Pod{st.MakePod().Name("gang-0").Priority(priority).Obj()}}
}
