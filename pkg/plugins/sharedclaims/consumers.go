package sharedclaims

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
)

// A claim holds at most 256 consumers (status.reservedFor), and
// muster-scheduler reserves a claim for each pod that names it, but for a
// claim a PodGroup declares, which it reserves once, for the PodGroup
// (podgroupdra). A pod past
// that would pass every filter and fail only at DynamicResources' PreBind,
// on the API server's validation, at every try; the members of a gang past
// it would leave the gang bound in part, to be evicted past its schedule
// timeout. PreFilter turns such a pod away first, naming the claim and the
// limit.
const maxConsumers = resourcev1.ResourceClaimReservedForMaxSize

// consumerShortfall says why the pod cannot become a consumer of the claim,
// or "" when it can: the claim needs a free entry for it, or for its
// PodGroup, and, for a member of a gang reserving it each, one for each
// member naming it that the gang's quorum needs.
func (s *SharedClaims) consumerShortfall(cycle *groupstate.Cycle, pod *corev1.Pod, podGroup *schedulingv1beta1.PodGroup, claim *resourcev1.ResourceClaim, shared sharedClaim) string {
	if isConsumer(claim, pod) {
		return ""
	}
	free := maxConsumers - len(claim.Status.ReservedFor)
	if free < 1 {
		return fmt.Sprintf("ResourceClaim %s has %d consumers in status.reservedFor, the most it holds: %s waits for one of them to finish", klog.KObj(claim), len(claim.Status.ReservedFor), pod.Name)
	}
	if shared.forGroup != nil {
		return "" // one entry holds the PodGroup, whatever its size
	}
	if !cycle.Grouped || cycle.PodGroup == nil || cycle.Quorum().ReachedBy(int32(free)) {
		// The free entries would hold the whole quorum: the members need
		// not be counted.
		return ""
	}
	members, err := s.gangs.Members(cycle.Key)
	if err != nil {
		return ""
	}
	newConsumers, others := newConsumersOf(claim, pod, podGroup, members)
	needed := min(newConsumers, int(cycle.PodGroup.Spec.MinMember)-others)
	if needed <= free {
		return ""
	}
	return fmt.Sprintf("group %s needs %d more consumers of ResourceClaim %s to bind its minMember of %d, and the claim's status.reservedFor has room for %d more (at most %d): "+
		"name one claim in at most %d pods, or give each member a claim of its own from a ResourceClaimTemplate",
		cycle.Key, needed, klog.KObj(claim), cycle.PodGroup.Spec.MinMember, free, maxConsumers, maxConsumers)
}

// newConsumersOf counts the gang's members, the pod among them, that
// would each be reserved the claim and are not its consumers yet, and the
// others.
func newConsumersOf(claim *resourcev1.ResourceClaim, pod *corev1.Pod, podGroup *schedulingv1beta1.PodGroup, members []*corev1.Pod) (newConsumers, others int) {
	seen := false
	for _, member := range members {
		seen = seen || member.UID == pod.UID
		if shared, ok := sharedClaimNamed(member, podGroup, claim.Name); ok && shared.forGroup == nil && !isConsumer(claim, member) {
			newConsumers++
		} else {
			others++
		}
	}
	if !seen {
		newConsumers++
	}
	return newConsumers, others
}

// isConsumer reports whether the claim is reserved for the pod, as
// DynamicResources reads it in muster-scheduler: for the pod itself, or for
// its PodGroup (podgroupdra).
func isConsumer(claim *resourcev1.ResourceClaim, pod *corev1.Pod) bool {
	return resourceclaim.IsReservedForPod(pod, claim, true)
}
