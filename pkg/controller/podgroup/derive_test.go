package podgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
