package podgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

func TestWithoutRequests(t *testing.T) {
	list := func(cpu, gpu string) corev1.ResourceList {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		if gpu != "" {
			l["nvidia.com/gpu"] = resource.MustParse(gpu)
		}
		return l
	}
	tests := []struct {
		name                  string
		total, requests, want corev1.ResourceList
	}{
		{"the initializers' requests come off", list("10", "8"), list("2", "1"), list("8", "7")},
		{"never below zero", list("1", ""), list("3", ""), list("0", "")},
		{"a resource the total does not name stays unnamed", list("4", ""), list("1", "1"), list("3", "")},
		{"an empty total stays empty", nil, list("1", ""), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withoutRequests(tt.total, tt.requests)
			assert.Equal(t, len(tt.want), len(got))
			for name, quantity := range tt.want {
				assert.True(t, quantity.Equal(got[name]), "%s: %v, want %v", name, got[name], quantity)
			}
		})
	}
}

func TestTheOwnersRequiredDomainIsDerivedWithItsTopology(t *testing.T) {
	derived := map[string]string{topology.FrameworkAnnotation: "mpi"}
	require.NoError(t, withOwnersDomain(derived, map[string]string{"team": "a"}))
	assert.NotContains(t, derived, topology.DomainRequiredAnnotation, "an owner that requires none")

	require.NoError(t, withOwnersDomain(derived, map[string]string{topology.DomainRequiredAnnotation: "topology.kubernetes.io/rack"}))
	assert.Equal(t, "topology.kubernetes.io/rack", derived[topology.DomainRequiredAnnotation])

	err := withOwnersDomain(map[string]string{}, map[string]string{topology.DomainRequiredAnnotation: "a rack"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the owner's annotation: metadata.annotations[muster.dev/topology-required]: Invalid value: "a rack"`)
}

func TestATrainJobsPodGroupWhoseMinMemberTrainerWroteAgainIsDerivedAgain(t *testing.T) {
	derived := func(from string, minMember int32) *v1alpha1.PodGroup {
		return &v1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "torch", Annotations: map[string]string{
				topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "node=3", topology.LaunchOrderAnnotation: "none",
				topology.DerivedFromAnnotation: from,
			}},
			Spec: v1alpha1.PodGroupSpec{MinMember: minMember},
		}
	}
	tests := []struct {
		name string
		pg   *v1alpha1.PodGroup
		want bool
	}{
		{"Trainer counted its initializer again, on resume", derived("TrainJob/torch", 4), true},
		{"the gang's pods, as muster lowered it", derived("TrainJob/torch", 3), false},
		{"another operator's, whose minMember muster never lowers", derived("PyTorchJob/torch", 4), false},
		{"not derived", &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: 4}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, minMemberReset(tt.pg))
		})
	}
}
