package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
)

func TestIsSiblingAdded(t *testing.T) {
	pending := member("job", "p0").Obj()
	tests := []struct {
		name  string
		added *corev1.Pod
		want  fwk.QueueingHint
	}{
		{"a sibling", member("job", "p1").Obj(), fwk.Queue},
		{"the pod itself", member("job", "p0").Obj(), fwk.QueueSkip},
		{"another group", member("other", "q0").Obj(), fwk.QueueSkip},
		{"the same group name in another namespace", member("job", "p1").Namespace("team-b").Obj(), fwk.QueueSkip},
		{"a pod without a group", st.MakePod().Namespace(ns).Name("plain").Obj(), fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			got, err := isSiblingAdded(logger, pending, nil, tt.added)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
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

func TestIsOwnPodGroup(t *testing.T) {
	podGroupEvent := func(namespace, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("scheduling.x-k8s.io/v1alpha1")
		u.SetKind("PodGroup")
		u.SetNamespace(namespace)
		u.SetName(name)
		return u
	}
	tests := []struct {
		name     string
		podGroup *unstructured.Unstructured
		want     fwk.QueueingHint
	}{
		{"its own", podGroupEvent(ns, "job"), fwk.Queue},
		{"another group", podGroupEvent(ns, "other"), fwk.QueueSkip},
		{"the same name in another namespace", podGroupEvent("team-b", "job"), fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			got, err := group.IsOwnPodGroup(logger, member("job", "p0").Obj(), nil, tt.podGroup)
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

func TestIsOwnPodGroupSkipsStatusOnlyWrites(t *testing.T) {
	stored := func(minMember int64, phase string, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"spec":   map[string]any{"minMember": minMember},
			"status": map[string]any{"phase": phase},
		}}
		u.SetNamespace(ns)
		u.SetName("job")
		u.SetAnnotations(annotations)
		return u
	}
	before := stored(3, "Pending", map[string]string{"team": "a"})
	tests := []struct {
		name  string
		after *unstructured.Unstructured
		want  fwk.QueueingHint
	}{
		{"a status write", stored(3, "Scheduling", map[string]string{"team": "a"}), fwk.QueueSkip},
		{"another annotation", stored(3, "Pending", map[string]string{"team": "b"}), fwk.QueueSkip},
		{"a lower minMember", stored(2, "Pending", map[string]string{"team": "a"}), fwk.Queue},
		{"a muster annotation", stored(3, "Pending", map[string]string{"team": "a", "muster.dev/start-after": "Running"}), fwk.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			got, err := group.IsOwnPodGroup(logger, member("job", "p0").Obj(), before, tt.after)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
