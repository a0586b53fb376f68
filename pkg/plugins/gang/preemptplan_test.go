package gang

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

func cpus(n int) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(n), resource.DecimalSI)}
}

// full is a node of n CPUs with none free.
func full(name string, n int) nodeRoom {
	node := st.MakeNode().Name(name).Obj()
	node.Status.Allocatable = cpus(n)
	return nodeRoom{node: node, free: cpus(0)}
}

// unit is a gang (or a pod, or an elastic member) of pods of the given
// CPUs, each bound to the node named with it, created minutes after epoch.
func unit(name string, priority int32, minutes int, pods ...string) *victimUnit {
	u := &victimUnit{name: name, priority: priority, created: epoch.Add(time.Duration(minutes) * time.Minute)}
	for i, at := range pods {
		var node string
		var n int
		if _, err := fmt.Sscanf(at, "%d@%s", &n, &node); err != nil {
			panic(err)
		}
		u.pods = append(u.pods, st.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", name, i)).Node(node).Req(map[corev1.ResourceName]string{"cpu": fmt.Sprint(n)}).Obj())
	}
	return u
}

func preemptors(n, cpu int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, st.MakePod().Namespace(ns).Name(fmt.Sprintf("high-%d", i)).Req(map[corev1.ResourceName]string{"cpu": fmt.Sprint(cpu)}).Obj())
	}
	return pods
}

func TestPlanPreemption(t *testing.T) {
	shrink := func(u *victimUnit, index int32) *victimUnit {
		u.shrink, u.index = true, index
		return u
	}
	pdb := func(u *victimUnit) *victimUnit {
		u.pdbViolations = 1
		return u
	}
	tests := []struct {
		name    string
		members []*corev1.Pod
		nodes   []nodeRoom
		units   []*victimUnit
		want    []string // victims, in the order taken
	}{
		{
			name:    "one whole gang, the youngest, not members of two",
			members: preemptors(2, 2),
			nodes:   []nodeRoom{full("n1", 4), full("n2", 4)},
			units:   []*victimUnit{unit("a", 0, 1, "2@n1", "2@n1"), unit("b", 0, 2, "2@n2", "2@n2")},
			want:    []string{"b"},
		},
		{
			name:    "the lowest priority first",
			members: preemptors(2, 2),
			nodes:   []nodeRoom{full("n1", 4), full("n2", 4)},
			units:   []*victimUnit{unit("a", -5, 1, "2@n1", "2@n1"), unit("b", 0, 2, "2@n2", "2@n2")},
			want:    []string{"a"},
		},
		{
			name:    "an elastic group shrunk toward its min before a whole gang, its highest index first",
			members: preemptors(1, 2),
			nodes:   []nodeRoom{full("n1", 4), full("n2", 4)},
			units: []*victimUnit{
				unit("gang", 0, 5, "2@n1", "2@n1"),
				shrink(unit("elastic", 0, 1, "1@n2"), 2), shrink(unit("elastic", 0, 1, "1@n2"), 3),
			},
			want: []string{"elastic", "elastic"},
		},
		{
			name:    "nothing when even every victim would not make room",
			members: preemptors(3, 4),
			nodes:   []nodeRoom{full("n1", 4), full("n2", 4)},
			units:   []*victimUnit{unit("a", 0, 1, "4@n1"), unit("b", 0, 2, "4@n2")},
		},
		{
			name:    "never a gang of equal or higher priority",
			members: preemptors(1, 4),
			nodes:   []nodeRoom{full("n1", 4), full("n2", 4)},
			units:   []*victimUnit{unit("same", 10, 1, "4@n1"), unit("higher", 20, 2, "4@n2")},
		},
		{
			name:    "a gang whose PodDisruptionBudget allows no disruption last",
			members: preemptors(1, 4),
			nodes:   []nodeRoom{full("n1", 4), full("n2", 4)},
			units:   []*victimUnit{pdb(unit("guarded", -5, 1, "4@n1")), unit("free", 0, 2, "4@n2")},
			want:    []string{"free"},
		},
		{
			name:    "a cheap victim that does not help is given back",
			members: preemptors(1, 2),
			nodes:   []nodeRoom{full("n1", 4), full("n2", 4)},
			units:   []*victimUnit{unit("plain", 0, 9, "1@n1"), unit("gang", 0, 1, "1@n2", "1@n2")},
			want:    []string{"gang"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := planPreemption(tt.members, 10, tt.nodes, tt.units)
			if tt.want == nil {
				assert.Nil(t, plan)
				return
			}
			require.NotNil(t, plan)
			var got []string
			for _, u := range plan.victims {
				got = append(got, u.name)
			}
			assert.Equal(t, tt.want, got)
			assert.Len(t, plan.nodes, len(tt.members), "every member has a node")
		})
	}
}

func TestAHighPriorityGangPreemptsOneWholeGangAndNominatesItsRoom(t *testing.T) {
	cpu := func(w *st.PodWrapper, n string) *st.PodWrapper {
		return w.Req(map[corev1.ResourceName]string{"cpu": n})
	}
	low := func(group, name, node string) *corev1.Pod { return cpu(member(group, name), "2").Node(node).Obj() }
	high := func(name, n string) *corev1.Pod { return cpu(member("high", name), n).Priority(10).Obj() }
	tests := []struct {
		name        string
		perMember   string
		never       bool
		wantNode    string
		wantDeleted []string
	}{
		{"room for the gang: the youngest gang goes whole", "2", false, "node-2", []string{"lb0", "lb1"}},
		{"no room even with every victim gone: nothing is taken", "5", false, "", nil},
		{"preemptionPolicy Never: nothing is taken", "2", true, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h0, h1 := high("h0", tt.perMember), high("h1", tt.perMember)
			if tt.never {
				never := corev1.PreemptNever
				h0.Spec.PreemptionPolicy, h1.Spec.PreemptionPolicy = &never, &never
			}
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{
				podGroup("low-a", 2).Obj(), podGroup("low-b", 2).Time(epoch.Add(time.Minute)).Obj(), podGroup("high", 2).Obj(),
			}, []*corev1.Pod{
				low("low-a", "la0", "node-1"), low("low-a", "la1", "node-1"),
				low("low-b", "lb0", "node-2"), low("low-b", "lb1", "node-2"),
				h0, h1,
			})
			f.gang.attempts.begin(types.NamespacedName{Namespace: ns, Name: "high"})
			result, status := f.gang.PostFilter(f.ctx, nil, h0, nil)
			pods, err := f.client.CoreV1().Pods(ns).List(f.ctx, metav1.ListOptions{})
			require.NoError(t, err)
			var deleted []string
			for _, name := range []string{"la0", "la1", "lb0", "lb1"} {
				if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == name }) {
					deleted = append(deleted, name)
				}
			}
			assert.Equal(t, tt.wantDeleted, deleted)
			if tt.wantNode == "" {
				assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "rejected as a gang that cannot fit: %v", status)
				return
			}
			require.True(t, status.IsSuccess(), "%v", status)
			assert.Equal(t, tt.wantNode, result.NominatingInfo.NominatedNodeName)
			sibling, err := f.client.CoreV1().Pods(ns).Get(f.ctx, "h1", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.wantNode, sibling.Status.NominatedNodeName, "the sibling is nominated onto the room too")
			assert.Nil(t, f.gang.backoffStatus(types.NamespacedName{Namespace: ns, Name: "high"}), "the gang retries as the victims go")
		})
	}
}

func TestAPodOfNoGroupTakesAVictimGangWholeOrShrinksAnElasticOne(t *testing.T) {
	cpu := func(w *st.PodWrapper, n string) *st.PodWrapper {
		return w.Req(map[corev1.ResourceName]string{"cpu": n})
	}
	worker := func(name, index, node string) *corev1.Pod {
		return cpu(member("elastic", name), "1").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, index).Node(node).Obj()
	}
	tests := []struct {
		name        string
		groups      []*v1alpha1.PodGroup
		pods        []*corev1.Pod
		wantDeleted []string
	}{
		{
			name:   "a gang's member is never taken alone",
			groups: []*v1alpha1.PodGroup{podGroup("low-a", 2).Obj(), podGroup("low-b", 2).Time(epoch.Add(time.Minute)).Obj()},
			pods: []*corev1.Pod{
				cpu(member("low-a", "la0"), "2").Node("node-1").Obj(), cpu(member("low-a", "la1"), "2").Node("node-1").Obj(),
				cpu(member("low-b", "lb0"), "2").Node("node-2").Obj(), cpu(member("low-b", "lb1"), "2").Node("node-2").Obj(),
			},
			wantDeleted: []string{"lb0", "lb1"},
		},
		{
			name:   "an elastic group gives members above its min, the highest index first, before a gang goes",
			groups: []*v1alpha1.PodGroup{podGroup("elastic", 1).Elastic("worker=4", "1:4").Obj(), podGroup("low", 2).Time(epoch.Add(time.Minute)).Obj()},
			pods: []*corev1.Pod{
				worker("e0", "0", "node-1"), worker("e1", "1", "node-1"), worker("e2", "2", "node-1"), worker("e3", "3", "node-1"),
				cpu(member("low", "l0"), "2").Node("node-2").Obj(), cpu(member("low", "l1"), "2").Node("node-2").Obj(),
			},
			wantDeleted: []string{"e2", "e3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			solo := cpu(st.MakePod().Namespace(ns).Name("solo").UID("solo"), "2").Priority(10).Obj()
			f := newFixture(t, Args{}, tt.groups, append(tt.pods, solo))
			result, status := f.gang.PostFilter(f.ctx, nil, solo, nil)
			require.True(t, status.IsSuccess(), "%v", status)
			require.NotNil(t, result)
			pods, err := f.client.CoreV1().Pods(ns).List(f.ctx, metav1.ListOptions{})
			require.NoError(t, err)
			var deleted []string
			for _, p := range tt.pods {
				if !slices.ContainsFunc(pods.Items, func(left corev1.Pod) bool { return left.Name == p.Name }) {
					deleted = append(deleted, p.Name)
				}
			}
			slices.Sort(deleted)
			assert.Equal(t, tt.wantDeleted, deleted)
		})
	}
}
