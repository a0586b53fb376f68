package group

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// CycleKey is where Gang's PreFilter leaves what the cycle knows of its
// pod's group, once the member entered its gang's attempt; every later
// step of the cycle, in every plugin, reads it from there.
const CycleKey fwk.StateKey = "muster.dev/group"

// Cycle is the pod's group as one scheduling cycle reads it: derived once,
// at PreFilter.
type Cycle struct {
	Key      types.NamespacedName
	PodGroup *v1alpha1.PodGroup
}

// Clone returns the same record: it is never changed.
func (c *Cycle) Clone() fwk.StateData { return c }

// EnterCycle records that the cycle's member entered its gang's attempt.
func EnterCycle(state fwk.CycleState, key types.NamespacedName, pg *v1alpha1.PodGroup) {
	state.Write(CycleKey, &Cycle{Key: key, PodGroup: pg})
}

// CycleOf returns the record Gang's PreFilter left; false when the cycle's
// pod is in no group, or Gang turned it away first.
func CycleOf(state fwk.CycleState) (*Cycle, bool) {
	return fromCycle[*Cycle](state, CycleKey)
}

// fromCycle reads what a plugin left in the cycle state under key; false
// when it left nothing there, or the cycle has no state.
func fromCycle[T fwk.StateData](state fwk.CycleState, key fwk.StateKey) (T, bool) {
	var none T
	if state == nil {
		return none, false
	}
	data, err := state.Read(key)
	if err != nil {
		return none, false
	}
	v, ok := data.(T)
	return v, ok
}

// KeyIn returns the pod's group as the cycle read it, or, in a step with no
// record (the cycle of a pod of no group, or a test's), as the pod's
// labels say; false for a pod of no group.
func KeyIn(state fwk.CycleState, pod *corev1.Pod) (types.NamespacedName, bool) {
	if c, ok := CycleOf(state); ok {
		return c.Key, true
	}
	return topology.GroupOf(pod)
}

// GroupIn returns the pod's group as the cycle read it, or, in a step with
// no record (Unreserve of a cycle that never reached PreFilter's end),
// as the model has it now; pg is nil when the group has no PodGroup.
func (m *Model) GroupIn(state fwk.CycleState, pod *corev1.Pod) (key types.NamespacedName, pg *v1alpha1.PodGroup, grouped bool) {
	if c, ok := CycleOf(state); ok {
		return c.Key, c.PodGroup, true
	}
	key, grouped = topology.GroupOf(pod)
	if !grouped {
		return key, nil, false
	}
	return key, m.PodGroup(key), true
}
