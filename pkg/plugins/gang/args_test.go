package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    Args
		wantErr string
	}{
		{name: "no args take the defaults", want: Args{PermitTimeoutSeconds: 60, BackoffSeconds: ptr.To[int64](5), MaxConcurrentBinds: 100}},
		{
			name: "set",
			raw:  `{"permitTimeoutSeconds": 120, "backoffSeconds": 0, "maxConcurrentBinds": 1000}`,
			want: Args{PermitTimeoutSeconds: 120, BackoffSeconds: ptr.To[int64](0), MaxConcurrentBinds: 1000},
		},
		{
			name:    "a Permit wait past the framework's cap",
			raw:     `{"permitTimeoutSeconds": 901}`,
			wantErr: "pluginConfig[Gang].args.permitTimeoutSeconds: Invalid value: 901: must be between 1 and 900",
		},
		{
			name:    "a negative backoff",
			raw:     `{"backoffSeconds": -1}`,
			wantErr: "pluginConfig[Gang].args.backoffSeconds: Invalid value: -1: must be between 0 (no backoff) and 600",
		},
		{
			name:    "more binds at once than one connection to the API server carries",
			raw:     `{"maxConcurrentBinds": 1001}`,
			wantErr: "pluginConfig[Gang].args.maxConcurrentBinds: Invalid value: 1001: must be between 1 and 1000",
		},
		{
			name:    "a negative number of binds",
			raw:     `{"maxConcurrentBinds": -1}`,
			wantErr: "pluginConfig[Gang].args.maxConcurrentBinds: Invalid value: -1: must be between 1 and 1000",
		},
		{name: "not JSON", raw: `{permitTimeoutSeconds`, wantErr: "decoding the args of plugin Gang"},
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
