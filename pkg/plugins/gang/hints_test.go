package gang

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/topology"
)

func TestTheMemberThatCompletesAGroupWakesItsSiblingsOnce(t *testing.T) {
	w0 := member("job", "p0").Obj()
	w1 := member("job", "p1").Obj()
	bound := member("job", "p1").Node("node-1").Obj()
	tests := []struct {
		name   string
		pods   []*corev1.Pod
		change group.PodChange
		woken  []string
	}{
		{"an unscheduled sibling completes it", []*corev1.Pod{w0, w1}, group.Added(w1), []string{"team-a/p0", "team-a/p1"}},
		{"a sibling created already bound completes it", []*corev1.Pod{w0, bound}, group.Added(bound), []string{"team-a/p0"}},
		{"a sibling that leaves the group short", []*corev1.Pod{w0}, group.Added(w0), nil},
		{"a member bound: no member is added", []*corev1.Pod{w0, bound}, group.Updated(w1, bound), nil},
		{"a pod of another group", []*corev1.Pod{w0, w1, member("other", "q0").Obj()}, group.Added(member("other", "q0").Obj()), nil},
		{"a pod without a group", []*corev1.Pod{w0, w1}, group.Added(st.MakePod().Namespace(ns).Name("plain").Obj()), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj(), podGroup("other", 2).Obj()}, tt.pods)
			for _, pod := range tt.pods {
				f.model.Take(group.Added(pod))
			}
			f.gang.podChanged(klog.Background())(tt.change)
			assert.ElementsMatch(t, tt.woken, f.activator.Activated)
		})
	}
}

func TestAMemberWithTwinsBoundWakesItsGroupToTellThemTheyAreHeld(t *testing.T) {
	pg := podGroup("job", 2).Obj()
	pg.Annotations = map[string]string{topology.RolesAnnotation: "worker=2"}
	worker := func(name string, index int) *st.PodWrapper {
		return member("job", name).Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, fmt.Sprint(index))
	}
	twinA, twinB, other := worker("a", 0).Obj(), worker("b", 0).Obj(), worker("c", 1).Obj()
	boundA := worker("a", 0).Node("node-1").Obj()
	boundC := worker("c", 1).Node("node-1").Obj()
	for _, tt := range []struct {
		name  string
		pods  []*corev1.Pod
		bind  group.PodChange
		woken []string
	}{
		{"a twin bound: the other is told it is held", []*corev1.Pod{boundA, twinB, other}, group.Updated(twinA, boundA), []string{"team-a/b", "team-a/c"}},
		{"a member with no twin bound: nothing to tell", []*corev1.Pod{twinA, boundC}, group.Updated(other, boundC), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, tt.pods)
			for _, pod := range tt.pods {
				f.model.Take(group.Added(pod))
			}
			f.gang.podChanged(klog.Background())(tt.bind)
			assert.ElementsMatch(t, tt.woken, f.activator.Activated)
		})
	}
}

func TestIsRoomFreed(t *testing.T) {
	tests := []struct {
		name    string
		deleted *corev1.Pod
		want    fwk.QueueingHint
	}{
		{"a bound pod", st.MakePod().Namespace(ns).Name("x").Node("node-1").Obj(), fwk.Queue},
		{"a pod that held no node", st.MakePod().Namespace(ns).Name("x").Obj(), fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			got, err := group.IsRoomFreed(logger, member("job", "p0").Obj(), tt.deleted, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestIsAllocatableGrown(t *testing.T) {
	node := func(cpu, gpus string) *corev1.Node {
		resources := map[corev1.ResourceName]string{"cpu": cpu}
		if gpus != "" {
			resources["nvidia.com/gpu"] = gpus
		}
		return st.MakeNode().Name("n").Capacity(resources).Obj()
	}
	tests := []struct {
		name     string
		old, new *corev1.Node
		want     fwk.QueueingHint
	}{
		{"more CPU", node("8", ""), node("16", ""), fwk.Queue},
		{"a new resource", node("8", ""), node("8", "4"), fwk.Queue},
		{"less CPU", node("16", ""), node("8", ""), fwk.QueueSkip},
		{"unchanged", node("8", "4"), node("8", "4"), fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			got, err := group.IsAllocatableGrown(logger, member("job", "p0").Obj(), tt.old, tt.new)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
