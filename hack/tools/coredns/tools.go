//go:build tools

// Package tools pins CoreDNS, the cluster DNS of the local cluster's real
// nodes. It brings its own module graph, so it has a module of its own.
package tools

import _ "github.com/coredns/coredns"
