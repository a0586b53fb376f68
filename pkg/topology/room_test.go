package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		{"a finished member counts for nothing", 2,
			[]*corev1.Pod{pod("w0", "", true, ""), pod("w1", "node-1", false, corev1.PodSucceeded)}, nil, false},
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
