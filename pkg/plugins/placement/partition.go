package placement

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
)

// partition is which domain each node of a node list is in, by one
// level of a constraint. Reading a label of every node at every attempt
// took most of Placement's time with thousands of nodes; the scheduler's
// node list keeps each node's object while only pods change, so a
// partition is made again only once a node is added, removed or updated.
type partition struct {
	nodes   []*corev1.Node
	domains []groupstate.Domain
	// of is the index in domains of each node's domain, -1 for none.
	of []int
}

func newPartition(nodes []fwk.NodeInfo, domainOf func(*corev1.Node) (groupstate.Domain, bool)) *partition {
	p := &partition{nodes: make([]*corev1.Node, len(nodes)), of: make([]int, len(nodes))}
	type name struct{ required, preferred string }
	index := map[name]int{}
	for i, n := range nodes {
		node := n.Node()
		p.nodes[i] = node
		id, ok := domainOf(node)
		if !ok {
			p.of[i] = -1
			continue
		}
		j, seen := index[name{id.Name, id.Preferred}]
		if !seen {
			j = len(p.domains)
			index[name{id.Name, id.Preferred}] = j
			p.domains = append(p.domains, id)
		}
		p.of[i] = j
	}
	return p
}

// isOf reports whether the partition was made of these nodes, as they are.
func (p *partition) isOf(nodes []fwk.NodeInfo) bool {
	if p == nil || len(p.nodes) != len(nodes) {
		return false
	}
	for i, n := range nodes {
		if n.Node() != p.nodes[i] {
			return false
		}
	}
	return true
}

// level is one level of a constraint: its required label, or its
// preferred one inside the required.
type level struct {
	constraint
	preferred bool
}

func (l level) domainOf(node *corev1.Node) (groupstate.Domain, bool) {
	if l.preferred {
		return l.byPreferred(node)
	}
	return l.byRequired(node)
}

// partitions keeps the latest partition of the scheduler's nodes at each
// level a gang asked for.
type partitions struct {
	mu     sync.Mutex
	latest map[level]*partition
}

// of returns the nodes' partition at the level, made again only if the
// nodes changed since the last.
func (ps *partitions) of(nodes []fwk.NodeInfo, l level) *partition {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.latest[l]; p.isOf(nodes) {
		return p
	}
	p := newPartition(nodes, l.domainOf)
	if ps.latest == nil {
		ps.latest = map[level]*partition{}
	}
	ps.latest[l] = p
	return p
}
