package gangpreemption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestDecodeArgs(t *testing.T) {
	defaults := Args{MinCandidateNodesPercentage: ptr.To[int32](10), MinCandidateNodesAbsolute: ptr.To[int32](100), VictimWaitSeconds: 120, MaxConcurrentEvictions: 100}
	tests := []struct {
		name    string
		raw     string
		want    Args
		wantErr string
	}{
		{name: "no args take DefaultPreemption's defaults, a 2-minute victim wait and 100 evictions at once", want: defaults},
		{
			name: "set",
			raw:  `{"minCandidateNodesPercentage": 50, "minCandidateNodesAbsolute": 0, "victimWaitSeconds": 30, "maxConcurrentEvictions": 16}`,
			want: Args{MinCandidateNodesPercentage: ptr.To[int32](50), MinCandidateNodesAbsolute: ptr.To[int32](0), VictimWaitSeconds: 30, MaxConcurrentEvictions: 16},
		},
		{
			name:    "a percentage above 100, refused by DefaultPreemption's own validation",
			raw:     `{"minCandidateNodesPercentage": 101}`,
			wantErr: "pluginConfig[GangPreemption].args.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
		},
		{
			name:    "both candidate counts zero",
			raw:     `{"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}`,
			wantErr: "cannot be zero at the same time as minCandidateNodesAbsolute",
		},
		{
			name:    "a negative absolute count",
			raw:     `{"minCandidateNodesAbsolute": -1}`,
			wantErr: "pluginConfig[GangPreemption].args.minCandidateNodesAbsolute: Invalid value: -1",
		},
		{
			name:    "a victim wait of more than an hour",
			raw:     `{"victimWaitSeconds": 3601}`,
			wantErr: "pluginConfig[GangPreemption].args.victimWaitSeconds: Invalid value: 3601: must be between 1 and 3600",
		},
		{
			name:    "a negative victim wait",
			raw:     `{"victimWaitSeconds": -5}`,
			wantErr: "pluginConfig[GangPreemption].args.victimWaitSeconds: Invalid value: -5",
		},
		{
			name:    "more evictions at once than one connection carries",
			raw:     `{"maxConcurrentEvictions": 1001}`,
			wantErr: "pluginConfig[GangPreemption].args.maxConcurrentEvictions: Invalid value: 1001: must be between 1 and 1000",
		},
		{
			name:    "a negative number of evictions at once",
			raw:     `{"maxConcurrentEvictions": -1}`,
			wantErr: "pluginConfig[GangPreemption].args.maxConcurrentEvictions: Invalid value: -1",
		},
		{name: "not JSON", raw: `{victimWaitSeconds`, wantErr: "decoding the args of plugin GangPreemption"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj runtime.Object
			if tt.raw != "" {
				obj = &runtime.Unknown{Raw: []byte(tt.raw)}
			}
			got, err := decodeArgs(obj)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNumCandidatesIsThePercentageAtLeastTheAbsoluteAtMostEveryNode(t *testing.T) {
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	tests := []struct {
		nodes, want int32
	}{
		{nodes: 50, want: 50},
		{nodes: 500, want: 100},
		{nodes: 5000, want: 500},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, args.numCandidates(tt.nodes), "%d nodes", tt.nodes)
	}
	half := Args{MinCandidateNodesPercentage: ptr.To[int32](50), MinCandidateNodesAbsolute: ptr.To[int32](0)}
	assert.Equal(t, int32(2500), half.numCandidates(5000))
}

func TestTheVictimWaitIsTheArgs(t *testing.T) {
	assert.Equal(t, 30*time.Second, Args{VictimWaitSeconds: 30}.victimWait())
}
