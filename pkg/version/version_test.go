package version

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInfoString(t *testing.T) {
	tests := []struct {
		name string
		info Info
		want string
	}{
		{"with kubernetes", Info{Muster: "v0.1.0", Kubernetes: "v1.34.4", Go: "go1.26"}, "muster v0.1.0 (kubernetes v1.34.4, go1.26)"},
		{"without kubernetes", Info{Muster: "v0.1.0", Go: "go1.26"}, "muster v0.1.0 (go1.26)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.info.String())
		})
	}
}
