package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionRequested(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"--config=x.yaml", "--version=true"}, true},
		{[]string{"--version=raw"}, true},
		{[]string{"--version=false"}, false},
		{[]string{"--config=x.yaml"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, versionRequested(tt.args), "args %q", tt.args)
	}
}
