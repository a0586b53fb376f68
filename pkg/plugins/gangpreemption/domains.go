package gangpreemption

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/muster-dev/muster/pkg/topology"
)

// domainsToFree returns the topology label a gang must stay inside one
// value of, and the domains its search may free, one search each: the
// attempt's domain when it has one (chosen by Placement, or freed by an
// earlier preemption), else the domain of its bound members, else every
// value of the label on a node. A gang free to span domains has no label,
// and one search over every node (""); so has a gang whose missing members
// Kueue places (topology.KueuePlaces), whose node selectors keep each
// member's filters where Kueue said, across domains if Kueue chose so.
func (pl *GangPreemption) domainsToFree(key types.NamespacedName, members []*corev1.Pod) (string, []string, error) {
	topo, err := pl.groups.Topology(key)
	if err != nil || topo == nil || topo.DomainKey == "" || slices.ContainsFunc(members, topology.KueuePlaces) {
		return "", []string{""}, nil
	}
	label := topo.DomainKey
	if d, chosen := pl.groups.Attempts().Domain(key); chosen && d.Name != "" {
		// The attempt's domain, or the one victims are going from.
		return label, []string{d.Name}, nil
	}
	if bound, ok := pl.groups.BoundNode(key); ok {
		if info, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(bound); err == nil {
			if domain, labeled := info.Node().Labels[label]; labeled {
				return label, []string{domain}, nil
			}
		}
	}
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return label, nil, err
	}
	domains := sets.New[string]()
	for _, n := range nodes {
		if domain, ok := n.Node().Labels[label]; ok {
			domains.Insert(domain)
		}
	}
	return label, sets.List(domains), nil
}

// cost is what a search's victims cost, compared as kube-scheduler's
// preemption compares candidate nodes: the fewest PodDisruptionBudget
// violations, then the lowest highest priority, then the lowest sum of
// priorities, then the fewest pods.
type cost struct {
	violations int
	highest    int32
	sum        int64
	pods       int
}

func costOf(taken []*unit, pdbs []*policy.PodDisruptionBudget) cost {
	violating, _ := preemption.FilterVictimsWithPDBViolation(taken, pdbs)
	c := cost{violations: len(violating)}
	for i, u := range taken {
		if i == 0 || u.priority > c.highest {
			c.highest = u.priority
		}
		c.sum += int64(u.priority) * int64(len(u.pods))
		c.pods += len(u.pods)
	}
	return c
}

func (c cost) compare(other cost) int {
	return cmp.Or(cmp.Compare(c.violations, other.violations), cmp.Compare(c.highest, other.highest),
		cmp.Compare(c.sum, other.sum), cmp.Compare(c.pods, other.pods))
}
