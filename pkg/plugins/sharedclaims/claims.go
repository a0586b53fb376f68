package sharedclaims

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// sharedClaim is a ResourceClaim a pod names that other pods may name too.
type sharedClaim struct {
	name string
	// forGroup is the pod's PodGroup when the claim is reserved for it,
	// not for the pod: the PodGroup's spec.resourceClaims declares the
	// claim as the pod does (DRAWorkloadResourceClaims, podgroupdra). The
	// group's first member to bind writes that reservation, and the
	// others find it.
	forGroup *resourcev1.ResourceClaimConsumerReference
}

// sharedClaimsOf are the claims the pod names by resourceClaimName and
// those made for its PodGroup from a template, in the order of their
// names, each once. Any other claim made from a template is the pod's
// alone, and so is one not made yet: DynamicResources waits for it.
func sharedClaimsOf(pod *corev1.Pod, podGroup *schedulingv1beta1.PodGroup) []sharedClaim {
	var claims []sharedClaim
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		forGroup := groupConsumer(pod, podGroup, podClaim)
		if podClaim.ResourceClaimName == nil && forGroup == nil {
			continue
		}
		name, _, err := resourceclaim.Name(pod, podClaim)
		if err != nil || name == nil {
			continue
		}
		claims = append(claims, sharedClaim{name: *name, forGroup: forGroup})
	}
	slices.SortStableFunc(claims, func(a, b sharedClaim) int { return strings.Compare(a.name, b.name) })
	return slices.CompactFunc(claims, func(a, b sharedClaim) bool { return a.name == b.name })
}

// sharedClaimNamed returns the claim of that name among the pod's shared
// claims.
func sharedClaimNamed(pod *corev1.Pod, podGroup *schedulingv1beta1.PodGroup, name string) (sharedClaim, bool) {
	for _, claim := range sharedClaimsOf(pod, podGroup) {
		if claim.name == name {
			return claim, true
		}
	}
	return sharedClaim{}, false
}

// reservedForEachPod are the pod's shared claims reserved for each pod
// that names them, which it writes in turn (writers.go): a PodGroup's
// claim is written once, by the member that allocates it.
func reservedForEachPod(pod *corev1.Pod, podGroup *schedulingv1beta1.PodGroup) []types.NamespacedName {
	var claims []types.NamespacedName
	for _, claim := range sharedClaimsOf(pod, podGroup) {
		if claim.forGroup == nil {
			claims = append(claims, types.NamespacedName{Namespace: pod.Namespace, Name: claim.name})
		}
	}
	return claims
}

// groupConsumer is the reservation of the pod's claim for its PodGroup,
// made as DynamicResources makes it, or nil when the claim is reserved for
// the pod.
func groupConsumer(pod *corev1.Pod, podGroup *schedulingv1beta1.PodGroup, podClaim *corev1.PodResourceClaim) *resourcev1.ResourceClaimConsumerReference {
	if podGroup == nil {
		return nil
	}
	consumer, err := resourceclaim.BindTo(pod, podGroup, podClaim)
	if err != nil || consumer.Resource != "podgroups" {
		return nil
	}
	return &consumer
}
