package topology

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestHasReached(t *testing.T) {
	pending := corev1.Pod{}
	bound := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}
	running := *bound.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	notReady := *running.DeepCopy()
	notReady.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	ready := *running.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	tests := []struct {
		name  string
		state StartAfter
		pod   corev1.Pod
		want  bool
	}{
		{"an unbound pod is not scheduled", StartAfterScheduled, pending, false},
		{"a bound pod is scheduled", StartAfterScheduled, bound, true},
		{"a bound pod is not running yet", StartAfterRunning, bound, false},
		{"a running pod is running", StartAfterRunning, running, true},
		{"a running pod with no Ready condition is not ready", StartAfterReady, running, false},
		{"a running pod Ready=False is not ready", StartAfterReady, notReady, false},
		{"a running pod Ready=True is ready", StartAfterReady, ready, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HasReached(&tt.pod, tt.state); got != tt.want {
				t.Errorf("HasReached(%s) = %v, want %v", tt.state, got, tt.want)
			}
		})
	}
}
