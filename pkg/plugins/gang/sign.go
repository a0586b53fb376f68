package gang

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.SignPlugin = &Gang{}

// SignPod adds nothing to a pod's signature: Gang has no Filter, and its
// PreFilter, which runs for every pod even in a batch, never narrows the
// nodes. 1.37's opportunistic batching is on for a profile only when every
// PreFilter plugin signs.
func (g *Gang) SignPod(context.Context, *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}
