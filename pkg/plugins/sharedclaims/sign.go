package sharedclaims

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.SignPlugin = &SharedClaims{}

// SignPod adds nothing to a pod's signature: SharedClaims' PreFilter never
// narrows the nodes, and DynamicResources signs the pods that name claims
// itself. 1.37's opportunistic batching is on for a profile only when
// every PreFilter plugin signs.
func (s *SharedClaims) SignPod(context.Context, *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}
