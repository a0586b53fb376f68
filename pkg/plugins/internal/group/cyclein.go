package group

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// GroupIn returns the pod's group as the cycle read it, or, in a step with
// no record (Unreserve of a cycle that never reached PreFilter's end),
// as the model has it now; pg is nil when the group has no PodGroup.
func (m *Model) GroupIn(state fwk.CycleState, pod *corev1.Pod) (key types.NamespacedName, pg *v1alpha1.PodGroup, grouped bool) {
	if c, ok := groupstate.CycleOf(state); ok {
		return c.Key, c.PodGroup, true
	}
	key, grouped = topology.GroupOf(pod)
	if !grouped {
		return key, nil, false
	}
	return key, m.PodGroup(key), true
}
