package groupstate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-dev/muster/pkg/topology"
)

// TestACyclesRecordIsReadWhereItWasLeft pins each record a plugin leaves
// in a cycle for the others: found in the cycle it was written to, and
// not in another, nor in no cycle at all.
func TestACyclesRecordIsReadWhereItWasLeft(t *testing.T) {
	searchErr := errors.New("listing nodes: the snapshot is gone")
	tests := []struct {
		name  string
		write func(fwk.CycleState)
		read  func(fwk.CycleState) (any, bool)
		want  any
	}{
		{
			name:  "the group the member's gang entered its attempt with",
			write: func(s fwk.CycleState) { EnterCycle(s, train, podGroupOf(2)) },
			read:  func(s fwk.CycleState) (any, bool) { c, ok := CycleOf(s); return c, ok },
			want:  &Cycle{Key: train, PodGroup: podGroupOf(2)},
		},
		{
			name: "why the gang's attempt cannot go on",
			write: func(s fwk.CycleState) {
				s.Write(AttemptFailedKey, &AttemptFailed{Reason: "the launcher's room cannot be held"})
			},
			read: func(s fwk.CycleState) (any, bool) { f, ok := AttemptFailedIn(s); return f, ok },
			want: &AttemptFailed{Reason: "the launcher's room cannot be held"},
		},
		{
			name:  "the victims going for the gang",
			write: func(s fwk.CycleState) { s.Write(RoomMadeKey, &RoomMade{At: epoch, Pending: true}) },
			read:  func(s fwk.CycleState) (any, bool) { r, ok := RoomMadeIn(s); return r, ok },
			want:  &RoomMade{At: epoch, Pending: true},
		},
		{
			name:  "a search for victims that failed with an error",
			write: func(s fwk.CycleState) { s.Write(SearchFailedKey, &SearchFailed{Err: searchErr}) },
			read:  func(s fwk.CycleState) (any, bool) { f, ok := SearchFailedIn(s); return f, ok },
			want:  &SearchFailed{Err: searchErr},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			written := framework.NewCycleState()
			tt.write(written)
			got, found := tt.read(written)
			assert.True(t, found)
			assert.Equal(t, tt.want, got)

			_, found = tt.read(framework.NewCycleState())
			assert.False(t, found, "another cycle has none")
			_, found = tt.read(nil)
			assert.False(t, found, "no cycle has none")

			cloned := written.Clone()
			got, found = tt.read(cloned)
			assert.True(t, found, "a clone of the cycle, as preemption's dry runs make, keeps it")
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestKeyInReadsTheCycleElseThePodsLabels(t *testing.T) {
	labelled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w0", Labels: map[string]string{topology.GroupLabel: "from-labels"}}}
	tests := []struct {
		name      string
		entered   bool
		pod       *corev1.Pod
		wantKey   types.NamespacedName
		wantFound bool
	}{
		{name: "the cycle's record", entered: true, pod: labelled, wantKey: train, wantFound: true},
		{name: "with no record, the pod's labels", pod: labelled, wantKey: types.NamespacedName{Namespace: "ns", Name: "from-labels"}, wantFound: true},
		{name: "a pod of no group", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := framework.NewCycleState()
			if tt.entered {
				EnterCycle(state, train, podGroupOf(2))
			}
			key, found := KeyIn(state, tt.pod)
			assert.Equal(t, tt.wantFound, found)
			if tt.wantFound {
				assert.Equal(t, tt.wantKey, key)
			}
		})
	}
}
