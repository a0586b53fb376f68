//go:build tools

// Package tools pins kwok, which simulates the kubelets of the local
// cluster's nodes. It builds with the Kubernetes 1.33 libraries it was
// released with, so it has a module of its own.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
