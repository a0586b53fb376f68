package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPhaseOf(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		pod  corev1.Pod
		want MemberPhase
	}{
		{"gated", corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}}}}, MemberGated},
		{"pending", corev1.Pod{}, MemberPending},
		{"bound", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}, MemberBound},
		{"running", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, MemberRunning},
		{"succeeded", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, MemberSucceeded},
		{"failed", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}, MemberFailed},
		{"terminating", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n"}}, MemberTerminating},
		{"a finished pod being deleted is finished", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, MemberSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, PhaseOf(&tt.pod))
			assert.Equal(t, tt.want <= MemberRunning, tt.want.IsActive(), "active: neither finished nor being deleted")
			assert.Equal(t, tt.want == MemberBound || tt.want == MemberRunning, tt.want.IsBound(), "bound: active on a node")
		})
	}
}

func TestCensusOf(t *testing.T) {
	now := metav1.Now()
	running := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	runningTerminating := *running.DeepCopy()
	runningTerminating.DeletionTimestamp = &now
	cases := []struct {
		name                                               string
		members                                            []corev1.Pod
		active, bound, unbound, running, succeeded, failed int32
	}{
		{name: "no members count nothing"},
		{name: "a gated and a pending member are active and unbound", members: []corev1.Pod{{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}}}}, {}}, active: 2, unbound: 2},
		{name: "a bound and a running member are active and bound; only one runs", members: []corev1.Pod{{Spec: corev1.PodSpec{NodeName: "n"}}, running}, active: 2, bound: 2, running: 1},
		{name: "a running member being deleted counts for nothing but its phase", members: []corev1.Pod{runningTerminating}},
		{name: "finished members are counted apart from the active", members: []corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, {Status: corev1.PodStatus{Phase: corev1.PodFailed}}, running}, active: 1, bound: 1, running: 1, succeeded: 1, failed: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := CensusOf(tc.members)
			assert.Equal(t, []int32{tc.active, tc.bound, tc.unbound, tc.running, tc.succeeded, tc.failed},
				[]int32{c.Active(), c.Bound(), c.Unbound(), c.Running(), c.Succeeded(), c.Failed()}, "active, bound, unbound, running, succeeded, failed")
		})
	}
}
