package podgroup

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-dev/muster/pkg/topology"
)

// elasticGroup is an elastic group as the scaler weighs it.
type elasticGroup struct {
	key      types.NamespacedName
	priority int32
	elastic  topology.Range
	// workers are its bound members of the elastic role, by index.
	workers []elasticWorker
}

type elasticWorker struct {
	pod      types.NamespacedName
	index    int32
	requests corev1.ResourceList
}

// fulfillment is the group's Paddle EDL score with cur bound workers.
func (e *elasticGroup) fulfillment(cur int) float64 {
	return e.elastic.Fulfillment(int32(cur))
}

// shrink is one member an elastic group gives back.
type shrink struct {
	group         *elasticGroup
	worker        elasticWorker
	before, after float64
}

// planShrink chooses the members that elastic groups give back so that a
// waiting gang of priority waiting gets deficit, as Paddle EDL does: each
// from the most fulfilled group of a priority no higher than the gang's,
// its highest index first, never below its min. It returns nothing when
// all they may give would not cover the deficit: evicting members that do
// not let the gang start would only slow the others down.
func planShrink(deficit corev1.ResourceList, waiting int32, groups []*elasticGroup) []shrink {
	cur := map[*elasticGroup]int{}
	for _, g := range groups {
		slices.SortFunc(g.workers, func(a, b elasticWorker) int { return cmp.Compare(a.index, b.index) })
		cur[g] = len(g.workers)
	}
	left := deficit.DeepCopy()
	var plan []shrink
	for !covered(left) {
		var most *elasticGroup
		for _, g := range groups {
			if g.priority > waiting || int32(cur[g]) <= g.elastic.Min {
				continue
			}
			if most == nil || g.fulfillment(cur[g]) > most.fulfillment(cur[most]) ||
				g.fulfillment(cur[g]) == most.fulfillment(cur[most]) && g.key.String() > most.key.String() {
				most = g
			}
		}
		if most == nil {
			return nil
		}
		n := cur[most]
		worker := most.workers[n-1]
		plan = append(plan, shrink{group: most, worker: worker, before: most.fulfillment(n), after: most.fulfillment(n - 1)})
		cur[most] = n - 1
		for name, quantity := range worker.requests {
			if need, ok := left[name]; ok {
				need.Sub(quantity)
				left[name] = need
			}
		}
	}
	return plan
}

// covered reports whether nothing of the deficit is left.
func covered(deficit corev1.ResourceList) bool {
	for _, quantity := range deficit {
		if quantity.Sign() > 0 {
			return false
		}
	}
	return true
}

// deficitOf is what need asks beyond free, by resource; resources free
// covers are left out.
func deficitOf(need, free corev1.ResourceList) corev1.ResourceList {
	deficit := corev1.ResourceList{}
	for name, quantity := range need {
		short := quantity.DeepCopy()
		if have, ok := free[name]; ok {
			short.Sub(have)
		}
		if short.Sign() > 0 {
			deficit[name] = short
		}
	}
	return deficit
}
