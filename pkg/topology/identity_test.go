package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestGroupOf(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		want   types.NamespacedName
		wantOK bool
	}{
		{"labelled", st.MakePod().Namespace("team-a").Name("p").Label(GroupLabel, "job").Obj(), types.NamespacedName{Namespace: "team-a", Name: "job"}, true},
		{"same group name, other namespace", st.MakePod().Namespace("team-b").Name("p").Label(GroupLabel, "job").Obj(), types.NamespacedName{Namespace: "team-b", Name: "job"}, true},
		{"no label", st.MakePod().Namespace("team-a").Name("p").Obj(), types.NamespacedName{}, false},
		{"empty label", st.MakePod().Namespace("team-a").Name("p").Label(GroupLabel, "").Obj(), types.NamespacedName{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := GroupOf(tt.pod)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestIsActiveMember(t *testing.T) {
	deleting := st.MakePod().Name("p").Obj()
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"pending", st.MakePod().Name("p").Obj(), true},
		{"running", st.MakePod().Name("p").Phase(corev1.PodRunning).Obj(), true},
		{"succeeded", st.MakePod().Name("p").Phase(corev1.PodSucceeded).Obj(), false},
		{"failed", st.MakePod().Name("p").Phase(corev1.PodFailed).Obj(), false},
		{"being deleted", deleting, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsActiveMember(tt.pod))
		})
	}
}
