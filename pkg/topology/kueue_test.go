package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestAKueuePodGroupsTotalIsItsMinMember(t *testing.T) {
	tests := []struct {
		name  string
		total string
		want  int32
		err   string
	}{
		{"a count", "3", 3, ""},
		{"no count", "", 0, "annotation kueue.x-k8s.io/pod-group-total-count is missing"},
		{"not a number", "three", 0, `annotation kueue.x-k8s.io/pod-group-total-count is "three"; it must be the group's number of pods, at least 1`},
		{"zero", "0", 0, `is "0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := st.MakePod().Name("p").Label(KueuePodGroupLabel, "g")
			if tt.total != "" {
				pod = pod.Annotation(KueuePodGroupTotalAnnotation, tt.total)
			}
			total, err := KueuePodGroupTotal(pod.Obj())
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, total)
			assert.Equal(t, "g", KueuePodGroupOf(pod.Obj()))
		})
	}
}

func TestKueuePlacesThePodsOfAPodSetItsTopologySchedulingPlaces(t *testing.T) {
	tests := []struct {
		name string
		pod  *st.PodWrapper
		want bool
	}{
		{"a required topology", st.MakePod().Annotation(KueueRequiredTopologyAnnotation, "rack"), true},
		{"a preferred topology", st.MakePod().Annotation(KueuePreferredTopologyAnnotation, "rack"), true},
		{"placed without a request", st.MakePod().Annotation(KueueUnconstrainedTopologyAnnotation, "true"), true},
		{"still gated for its assignment", st.MakePod().SchedulingGates([]string{KueueTopologyGate}), true},
		{"queued without topology", st.MakePod().Label("kueue.x-k8s.io/queue-name", "lq").SchedulingGates([]string{"kueue.x-k8s.io/admission"}), false},
		{"muster's topology only", st.MakePod().Annotation(DomainRequiredAnnotation, "rack"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, KueuePlaces(tt.pod.Obj()))
		})
	}
}
