package heldrooms

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestABoundMemberWakesThePodsKeptOutOfHeldRoom: a member of a group bound
// may end the wait of the gang a pod was kept off room for; nothing else
// added does.
func TestABoundMemberWakesThePodsKeptOutOfHeldRoom(t *testing.T) {
	bound := member("train", "worker", "train-0", "1")
	bound.Spec.NodeName = "n1"
	plain := st.MakePod().Namespace(ns).Name("plain").Node("n1").Obj()
	kept := member("other", "", "other-0", "1")
	tests := []struct {
		name  string
		added any
		want  fwk.QueueingHint
	}{
		{"a group's member bound", bound, fwk.Queue},
		{"a group's member still pending", member("train", "worker", "train-1", "1"), fwk.QueueSkip},
		{"a pod of no group bound", plain, fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hint, err := isMemberBound(klog.Background(), kept, nil, tt.added)
			require.NoError(t, err)
			assert.Equal(t, tt.want, hint)
		})
	}

	hint, err := isMemberBound(klog.Background(), kept, nil, &corev1.Node{})
	assert.Error(t, err, "an object that is no pod is an error")
	assert.Equal(t, fwk.Queue, hint, "and wakes the pod rather than strand it")
}
