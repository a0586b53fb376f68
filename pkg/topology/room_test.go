package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestWaitingForRoom(t *testing.T) {
	pod := func(name, node string, unschedulable bool, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if unschedulable {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}
		return p
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	tests := []struct {
		name      string
		minMember int32
		members   []*corev1.Pod
		lacking   []string
		waits     bool
	}{
		{"marked by the scheduler: waits for the members it lacks, first by name", 2,
			[]*corev1.Pod{pod("w2", "", true, ""), pod("w0", "node-1", false, ""), pod("w1", "", true, "")}, []string{"w1"}, true},
		{"never tried: lacks members, but does not wait for room", 2,
			[]*corev1.Pod{pod("w0", "", false, ""), pod("w1", "", false, "")}, nil, false},
		{"its min bound", 1, []*corev1.Pod{pod("w0", "node-1", false, ""), pod("w1", "", true, "")}, nil, false},
		{"too few members to reach its min: waits for members, not room", 3,
			[]*corev1.Pod{pod("w0", "", true, ""), pod("w1", "", true, "")}, nil, false},
		{"a member that succeeded counts as placed: nothing lacking", 2,
			[]*corev1.Pod{pod("w0", "node-1", false, ""), pod("w1", "node-1", false, corev1.PodSucceeded), pod("w2", "", true, "")}, nil, false},
		{"a member that succeeded leaves one fewer lacking", 3,
			[]*corev1.Pod{pod("w0", "node-1", false, corev1.PodSucceeded), pod("w1", "", true, ""), pod("w2", "", true, ""), pod("w3", "", true, "")}, []string{"w1", "w2"}, true},
		{"a member that failed counts for nothing", 2,
			[]*corev1.Pod{pod("w0", "", true, ""), pod("w1", "node-1", false, corev1.PodFailed)}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lacking, waits := WaitingForRoom(tt.minMember, tt.members)
			assert.Equal(t, tt.waits, waits)
			assert.Equal(t, tt.lacking, names(lacking))
		})
	}
	assert.Equal(t, []string{"w0", "w1"}, names(LackingMembers(2, []*corev1.Pod{pod("w1", "", false, ""), pod("w0", "", false, "")})),
		"a gang never tried still lacks its members: what preemption makes room for")
}

func TestUntriedMembers(t *testing.T) {
	pod := func(name, node string, scheduled *corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if scheduled != nil {
			p.Status.Conditions = []corev1.PodCondition{*scheduled}
		}
		return p
	}
	unschedulable := &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	gated := &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}
	tests := []struct {
		name      string
		minMember int32
		members   []*corev1.Pod
		want      []string
	}{
		{"a gang just created, every member there", 2, []*corev1.Pod{pod("w0", "", nil), pod("w1", "", nil)}, []string{"w0", "w1"}},
		{"a member tried and found no room is not untried", 2, []*corev1.Pod{pod("w0", "", unschedulable), pod("w1", "", nil)}, []string{"w1"}},
		{"a member held back for its missing siblings", 2, []*corev1.Pod{pod("w0", "", gated), pod("w1", "", gated)}, nil},
		{"too few members to reach its min", 3, []*corev1.Pod{pod("w0", "", nil), pod("w1", "", nil)}, nil},
		{"its min bound", 1, []*corev1.Pod{pod("w0", "node-1", nil), pod("w1", "", nil)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range UntriedMembers(tt.minMember, tt.members) {
				got = append(got, p.Name)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// waitingGang lacks n members of priority, each of cpu CPUs, that may run
// only in pool.
func waitingGang(n int, priority int32, cpu, pool string) WaitingGang {
	var g WaitingGang
	for range n {
		g.Lacking = append(g.Lacking, st.MakePod().Priority(priority).NodeSelector(map[string]string{"pool": pool}).
			Req(map[corev1.ResourceName]string{"cpu": cpu}).Obj())
	}
	return g
}

func poolNode(name, pool, cpu string) *corev1.Node {
	return st.MakeNode().Name(name).Label("pool", pool).Capacity(map[corev1.ResourceName]string{"cpu": cpu}).Obj()
}

func TestAWaitingGangKeepsRoomFromItsPriorityAndBelowAndShrinksOnlyItsOwn(t *testing.T) {
	g := waitingGang(2, 5, "1", "x")
	assert.Equal(t, int32(5), g.Priority())
	assert.True(t, g.KeepsRoomFrom(5))
	assert.True(t, g.KeepsRoomFrom(4))
	assert.False(t, g.KeepsRoomFrom(6))
	assert.True(t, g.Shrinks(5), "an elastic group of its priority is shrunk for it")
	assert.False(t, g.Shrinks(4), "one of lower priority is preempted, not shrunk")
	assert.False(t, g.Shrinks(6))
}

func TestAWaitingGangKeepsANodeItsMemberMayUseWhileTheClusterCouldHoldIt(t *testing.T) {
	x1, x2, y1, tiny := poolNode("x1", "x", "4"), poolNode("x2", "x", "4"), poolNode("y1", "y", "4"), poolNode("tiny", "x", "2")
	cluster := []*corev1.Node{x1, x2, y1, tiny}
	g := waitingGang(3, 0, "3", "x")
	assert.True(t, g.MayUse(x1))
	assert.False(t, g.MayUse(y1), "its members may not run there")
	assert.False(t, g.MayUse(tiny), "its member would not fit it empty")
	assert.True(t, g.CouldHold(cluster), "9 CPUs of the 10 in pool x")
	assert.True(t, g.KeepsNode(x1, 0, g.CouldHold(cluster)))
	assert.False(t, g.KeepsNode(x1, 1, true), "not from a higher priority")

	huge := waitingGang(4, 0, "3", "x")
	assert.False(t, huge.CouldHold(cluster), "12 CPUs, pool x has 10: it waits for room no one could give")
	assert.False(t, huge.KeepsNode(x1, 0, huge.CouldHold(cluster)))
	assert.False(t, WaitingGang{}.CouldHold(cluster), "a gang that lacks nothing keeps nothing")
	assert.Equal(t, "12", func() string { n := huge.Need(); return n.Cpu().String() }())
}
