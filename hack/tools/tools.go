//go:build tools

// Package tools pins the binaries of the local control plane, and the
// kubelet and kube-proxy of its real nodes, that `make tools` builds into
// bin/. They stay out of muster's own module graph. kwok
// has a module of its own in ./kwok: it is built with the Kubernetes 1.33
// libraries it was released with and does not compile against 1.34.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
