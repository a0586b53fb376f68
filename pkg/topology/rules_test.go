package topology

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func TestFromPodGroupChecksTheNamesItMakes(t *testing.T) {
	mpi := map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=10"}
	generic := map[string]string{RolesAnnotation: "a=1,worker=10"}
	tests := []struct {
		name        string
		group       string
		annotations map[string]string
		want        string
	}{
		{name: "a valid group", group: "job", annotations: mpi},
		{name: "a gang without roles may have any PodGroup name", group: "1job.a", annotations: nil},
		{
			name: "a name that cannot be a Service's", group: "1job", annotations: mpi,
			want: `metadata.name: Invalid value: "1job": the group's headless Service is named after its PodGroup, and a Service name must be a DNS-1035 label`,
		},
		{
			name: "a dotted name", group: "a.b", annotations: mpi,
			want: "must be a DNS-1035 label",
		},
		{
			name: "a hostname over 63 characters", group: strings.Repeat("g", 54), annotations: generic,
			want: `member hostname "` + strings.Repeat("g", 54) + `-worker-9" is 63 characters`,
		},
		{
			name: "the longest index counts", group: strings.Repeat("g", 55), annotations: generic,
			want: `the longest member hostname, "` + strings.Repeat("g", 55) + `-worker-9", is 64 characters, over the limit of 63; shorten the PodGroup's name or role worker`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := FromPodGroup(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: tt.group, Annotations: tt.annotations}})
			if tt.want == "" || strings.Contains(tt.want, "is 63 characters") {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "errors: %v", errs)
			assert.Contains(t, errs[0].Error(), tt.want)
		})
	}
}

func TestClosest(t *testing.T) {
	assert.Equal(t, FrameworkAnnotation, closest("muster.dev/framwork", Annotations))
	assert.Equal(t, RolesAnnotation, closest("muster.dev/role", Annotations))
	assert.Equal(t, StartAfterAnnotation, closest("muster.dev/startafter", Annotations))
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
}
