package gangpreemption

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// The search gives each victim back only if every member still passes its
// filters (giveBack). Most members' filters read nothing of the nodes but
// their own: a victim given back on one node can change only the members
// placed there, which are all a give-back checks. That takes the check
// from the victims times the members to the victims times the members per
// node: a thousand victims of a gang of a hundred, one node each, need a
// thousand filter runs rather than a hundred thousand.

// readsOnlyItsNode reports whether a member's filters on a node read
// nothing of other nodes, as kube-scheduler's filters go: its pod
// (anti-)affinity terms are all per node (kubernetes.io/hostname), it has
// no hard topology spreading (PodTopologySpread's PreFilter skipped its
// Filter), and it claims no volume or device, whose use other nodes'
// pods may share (ReadWriteOncePod, devices attached over a network).
func readsOnlyItsNode(member *corev1.Pod, skipped sets.Set[string]) bool {
	if !skipped.Has(pluginnames.PodTopologySpread) || len(member.Spec.ResourceClaims) > 0 {
		return false
	}
	for _, v := range member.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return false
		}
	}
	if a := member.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && !perNode(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) {
			return false
		}
		if a.PodAntiAffinity != nil && !perNode(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) {
			return false
		}
	}
	return true
}

func perNode(terms []corev1.PodAffinityTerm) bool {
	for _, term := range terms {
		if term.TopologyKey != corev1.LabelHostname {
			return false
		}
	}
	return true
}

// reachesOnlyItsNodes reports whether the unit's pods bear on other pods'
// filters only on their own nodes: none has a required anti-affinity term
// over more than its node.
func (u *unit) reachesOnlyItsNodes() bool {
	for _, pi := range u.pods {
		for _, term := range pi.GetRequiredAntiAffinityTerms() {
			if term.TopologyKey != corev1.LabelHostname {
				return false
			}
		}
	}
	return true
}

// nodes are the nodes of the unit's pods.
func (u *unit) nodes() sets.Set[string] {
	nodes := sets.New[string]()
	for _, pi := range u.pods {
		nodes.Insert(pi.GetPod().Spec.NodeName)
	}
	return nodes
}
