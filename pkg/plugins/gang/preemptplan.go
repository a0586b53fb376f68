package gang

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/muster-dev/muster/pkg/topology"
)

// victimUnit is what preemption takes at once: a whole gang (every member,
// bound or waiting), one member above an elastic group's min, or a pod of
// no group.
type victimUnit struct {
	// name is the gang's or the pod's namespace/name.
	name     string
	priority int32
	// shrink marks a member above an elastic group's min: taking it leaves
	// the group running at or above its min. index orders a group's
	// members, the highest taken first.
	shrink bool
	index  int32
	// pods are the unit's pods; those bound free their node's room.
	pods []*corev1.Pod
	// created is when the unit was created: the youngest goes first.
	created time.Time
	// pdbViolations counts the unit's pods whose PodDisruptionBudget
	// allows no more disruptions.
	pdbViolations int
}

// nodeRoom is a node and what it has left for more pods.
type nodeRoom struct {
	node *corev1.Node
	free corev1.ResourceList
}

// preemptionPlan is the units taken and where each member of the
// preempting gang then goes, by pod name.
type preemptionPlan struct {
	victims []*victimUnit
	nodes   map[string]string
}

// compareCost orders units the cheapest to take first, as kube-scheduler's
// default preemption weighs candidates and then by whole gangs: the fewest
// PodDisruptionBudgets broken, the lowest priority, a member above an
// elastic group's min before any whole gang (its highest index first), the
// fewest pods, the youngest.
func compareCost(a, b *victimUnit) int {
	return cmp.Or(
		cmp.Compare(a.pdbViolations, b.pdbViolations),
		cmp.Compare(a.priority, b.priority),
		compareBool(b.shrink, a.shrink),
		cmp.Compare(len(a.pods), len(b.pods)),
		b.created.Compare(a.created),
		cmp.Compare(a.name, b.name),
		cmp.Compare(b.index, a.index),
	)
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// planPreemption chooses the fewest, cheapest units of priority below
// priority whose room lets every member of the preempting gang fit at
// once, and where each goes. It returns nil when even all of them would
// not make room: nothing is taken for a gang that still would not fit.
func planPreemption(members []*corev1.Pod, priority int32, nodes []nodeRoom, units []*victimUnit) *preemptionPlan {
	var eligible []*victimUnit
	for _, u := range units {
		if u.priority < priority {
			eligible = append(eligible, u)
		}
	}
	slices.SortFunc(eligible, compareCost)
	if _, ok := place(members, nodes, eligible); !ok {
		return nil
	}
	// Take the cheapest until the gang fits.
	var taken []*victimUnit
	for _, u := range eligible {
		if _, ok := place(members, nodes, taken); ok {
			break
		}
		taken = append(taken, u)
	}
	// Give back what the gang does not need, the dearest first; an
	// elastic group keeps its highest-index-first order.
	for i := len(taken) - 1; i >= 0; i-- {
		u := taken[i]
		if u.shrink && slices.ContainsFunc(taken, func(o *victimUnit) bool { return o.shrink && o.name == u.name && o.index < u.index }) {
			continue
		}
		without := slices.Delete(slices.Clone(taken), i, i+1)
		if _, ok := place(members, nodes, without); ok {
			taken = without
		}
	}
	placement, _ := place(members, nodes, taken)
	return &preemptionPlan{victims: taken, nodes: placement}
}

// place puts the members, the largest first, each on the first node that
// may run it and has room once the victims' bound pods are gone.
func place(members []*corev1.Pod, nodes []nodeRoom, victims []*victimUnit) (map[string]string, bool) {
	free := make(map[string]corev1.ResourceList, len(nodes))
	for _, n := range nodes {
		free[n.node.Name] = n.free.DeepCopy()
	}
	for _, u := range victims {
		for _, pod := range u.pods {
			if room, ok := free[pod.Spec.NodeName]; ok {
				free[pod.Spec.NodeName] = topology.AddRequests(room, podRequest(pod), 1)
			}
		}
	}
	ordered := slices.Clone(members)
	slices.SortStableFunc(ordered, func(a, b *corev1.Pod) int {
		ra, rb := podRequest(a), podRequest(b)
		return rb.Cpu().Cmp(*ra.Cpu())
	})
	placement := map[string]string{}
	for _, pod := range ordered {
		request := podRequest(pod)
		placed := false
		for _, n := range nodes {
			room := free[n.node.Name]
			if !topology.MayRunOn(pod, n.node) || !fitsIn(request, room) {
				continue
			}
			free[n.node.Name] = topology.AddRequests(room, request, -1)
			placement[pod.Name] = n.node.Name
			placed = true
			break
		}
		if !placed {
			return nil, false
		}
	}
	return placement, true
}

// fitsIn reports whether room has every resource the request asks for.
func fitsIn(request, room corev1.ResourceList) bool {
	for name, quantity := range request {
		have, ok := room[name]
		if !ok && !quantity.IsZero() || ok && quantity.Cmp(have) > 0 {
			return false
		}
	}
	return true
}
