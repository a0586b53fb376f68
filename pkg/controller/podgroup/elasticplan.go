package podgroup

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// elasticGroup is an elastic group as the scaler weighs it.
type elasticGroup struct {
	key      types.NamespacedName
	priority int32
	elastic  topology.Range
	// workers are its bound members of the elastic role, by index.
	workers []elasticWorker
	// unbound counts its workers not bound yet.
	unbound int
	// template is one of its workers: where another may run, and what it
	// requests; owner is that worker's controller, which scaling acts on.
	template *corev1.Pod
	owner    *metav1.OwnerReference
	// templateDevices are the devices the template's claims ask for
	// (withDevices).
	templateDevices corev1.ResourceList
	// domainKey is the node label the group must stay in one value of
	// (muster.dev/topology-required), and anchor a node one of its bound
	// workers is on: its value there is the group's domain.
	domainKey, anchor string
}

// inDomain returns whether a node is in the group's topology domain, the
// value of its domain label on its anchor node among the nodes; every node
// is, for a group free to span domains.
func (e *elasticGroup) inDomain(nodes []resources.Room) func(*corev1.Node) bool {
	if e.domainKey == "" {
		return func(*corev1.Node) bool { return true }
	}
	i := slices.IndexFunc(nodes, func(n resources.Room) bool { return n.Node.Name == e.anchor })
	if i < 0 {
		return func(*corev1.Node) bool { return false }
	}
	domain, labeled := nodes[i].Node.Labels[e.domainKey]
	return func(n *corev1.Node) bool {
		value, ok := n.Labels[e.domainKey]
		return labeled && ok && value == domain
	}
}

type elasticWorker struct {
	pod      types.NamespacedName
	index    int32
	requests corev1.ResourceList
	// member is the worker's pod, whose claims withDevices counts.
	member *corev1.Pod
}

// fulfillment is the group's Paddle EDL score with cur bound workers.
func (e *elasticGroup) fulfillment(cur int) float64 {
	return e.elastic.Fulfillment(int32(cur))
}

// perMember is what one of its workers requests, its devices included.
func (e *elasticGroup) perMember() corev1.ResourceList {
	if e.template == nil {
		return nil
	}
	return resources.Add(resources.OfPod(e.template), e.templateDevices, 1)
}

// withDevices adds to each group's workers, and to what a worker to come
// requests, the devices their claims ask for.
func withDevices(groups []*elasticGroup, devices *clusterDevices) {
	for _, g := range groups {
		if g.template != nil {
			g.templateDevices, _ = devices.of(g.template)
		}
		for i := range g.workers {
			if pod := g.workers[i].member; pod != nil {
				held, _ := devices.of(pod)
				resources.Add(g.workers[i].requests, held, 1)
			}
		}
	}
}

// compareNeed orders groups as Paddle EDL does, the one with the first
// claim on idle room first: the least fulfilled with cur workers, then the
// one whose members ask for fewer GPUs, then less CPU, then less memory.
// Room is taken back in the reverse order.
func compareNeed(a, b *elasticGroup, cur map[*elasticGroup]int) int {
	if c := cmp.Compare(a.fulfillment(cur[a]), b.fulfillment(cur[b])); c != 0 {
		return c
	}
	ra, rb := a.perMember(), b.perMember()
	for _, name := range []corev1.ResourceName{envinject.GPUResource, corev1.ResourceCPU, corev1.ResourceMemory} {
		qa, qb := ra[name], rb[name]
		if c := qa.Cmp(qb); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.key.String(), b.key.String())
}

// shrink is one member an elastic group gives back.
type shrink struct {
	group         *elasticGroup
	worker        elasticWorker
	before, after float64
}

// planShrink chooses the members that elastic groups give back so that a
// waiting gang gets deficit, as Paddle EDL does: each from the most
// fulfilled group the gang shrinks (topology.WaitingGang.Shrinks: of its
// priority),
// its highest index first, never below its min. It returns nothing when
// all they may give would not cover the deficit: evicting members that do
// not let the gang start would only slow the others down.
func planShrink(deficit corev1.ResourceList, waiting topology.WaitingGang, groups []*elasticGroup) []shrink {
	cur := map[*elasticGroup]int{}
	for _, g := range groups {
		slices.SortFunc(g.workers, func(a, b elasticWorker) int { return cmp.Compare(a.index, b.index) })
		cur[g] = len(g.workers)
	}
	left := deficit.DeepCopy()
	var plan []shrink
	for !resources.Covered(left) {
		var most *elasticGroup
		for _, g := range groups {
			if !waiting.Shrinks(g.priority) || int32(cur[g]) <= g.elastic.Min {
				continue
			}
			if most == nil || compareNeed(g, most, cur) > 0 {
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
		resources.Sub(left, worker.requests, 1)
	}
	return plan
}

// planGrowth shares idle room among elastic groups below their max as
// Paddle EDL does: one worker at a time to the group with the first claim
// (compareNeed), on the first node that may run it, in its topology domain
// if it has one, and has room for it,
// until no group's next worker fits. It returns the workers each group
// gains; nodes' free room is used up as it goes.
func planGrowth(groups []*elasticGroup, nodes []resources.Room) map[*elasticGroup]int {
	cur := map[*elasticGroup]int{}
	open := []*elasticGroup{}
	inDomain := map[*elasticGroup]func(*corev1.Node) bool{}
	for _, g := range groups {
		cur[g] = len(g.workers)
		inDomain[g] = g.inDomain(nodes)
		if g.template != nil && int32(cur[g]) < g.elastic.Max {
			open = append(open, g)
		}
	}
	gains := map[*elasticGroup]int{}
	for len(open) > 0 {
		first := slices.MinFunc(open, func(a, b *elasticGroup) int { return compareNeed(a, b, cur) })
		request := first.perMember()
		placed := false
		for _, n := range nodes {
			if topology.MayRunOn(first.template, n.Node) && inDomain[first](n.Node) && resources.Fits(request, n.Free) {
				n.Place(request)
				placed = true
				break
			}
		}
		if placed {
			cur[first]++
			gains[first]++
		}
		if !placed || int32(cur[first]) >= first.elastic.Max {
			open = slices.DeleteFunc(open, func(g *elasticGroup) bool { return g == first })
		}
	}
	return gains
}
