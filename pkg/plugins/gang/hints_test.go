package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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
