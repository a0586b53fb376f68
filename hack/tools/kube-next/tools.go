//go:build tools

// Package tools pins the control plane of the next Kubernetes release that
// `make control-plane-next` builds into bin/control-plane/VERSION/, for
// running muster, built on the current release, against it (version
// skew). It needs that release's Go, which go.mod's toolchain names.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
