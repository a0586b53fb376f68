//go:build tools

// Package tools pins containerd and its runc shim, the container runtime of
// the local cluster's real nodes. containerd brings its own module graph, so
// it has a module of its own.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
