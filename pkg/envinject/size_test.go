package envinject

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/muster-dev/muster/pkg/topology"
)

func sizedGroup(t *testing.T, framework, roles string) Group {
	t.Helper()
	topo, errs := topology.Parse(map[string]string{topology.FrameworkAnnotation: framework, topology.RolesAnnotation: roles})
	require.Empty(t, errs)
	return Group{Name: "job", Namespace: "team-a", Topology: topo, WorkerSlots: 1}
}

func TestCheckSize(t *testing.T) {
	tests := []struct {
		framework, roles string
		want             string
	}{
		{"tensorflow", "ps=1,worker=1000", ""},
		{"mpi", "launcher=1,worker=4000", ""},
		{"tensorflow", "ps=1,worker=99999", "metadata.annotations[muster.dev/roles]: Invalid value: 100000: 100000 members make each member's environment"},
		{"tensorflow", "ps=1,worker=2147483647", "over the limit of 262144; run fewer replicas per group"},
		{"tensorflow", "ps=1,worker=4000", "4001 members make the environment of a ps"},
	}
	for _, tt := range tests {
		t.Run(tt.framework+" "+tt.roles, func(t *testing.T) {
			errs := CheckSize(sizedGroup(t, tt.framework, tt.roles))
			if tt.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Contains(t, errs[0].Error(), tt.want)
		})
	}
}

// TestLargestGroups finds, for each framework, the most workers a group
// named "job" in namespace "team-a" may have; docs/validation.md quotes
// these figures, and the test keeps them true.
func TestLargestGroups(t *testing.T) {
	want := map[string]int32{"tensorflow": 3827, "pytorch": 8455, "mpi": 7467, "mxnet": 8454}
	layouts := map[string]string{"tensorflow": "ps=1,worker=%d", "pytorch": "master=1,worker=%d", "mpi": "launcher=1,worker=%d", "mxnet": "scheduler=1,server=1,worker=%d"}
	for framework, layout := range layouts {
		lo, hi := int32(1), int32(1<<20)
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if len(CheckSize(sizedGroup(t, framework, fmt.Sprintf(layout, mid)))) == 0 {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		assert.Equal(t, want[framework], lo, "largest %s group", framework)
	}
}
