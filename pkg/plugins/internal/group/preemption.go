package group

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/muster-dev/muster/pkg/topology"
)

// LackingMembers are the unbound active members a gang needs to reach its
// minMember: what preemption makes room for (topology.LackingMembers).
func (m *Model) LackingMembers(key types.NamespacedName, minMember int32) []*corev1.Pod {
	pods, err := m.CountedMembers(key)
	if err != nil {
		klog.Background().Error(err, "Counting members", "podGroup", key)
		return nil
	}
	return topology.LackingMembers(minMember, pods)
}

// Promise is room an attempt that holds reservations in a topology domain
// still needs there: the members it has yet to place, and the domain's
// nodes.
type Promise struct {
	Members []*corev1.Pod
	Nodes   sets.Set[string]
}

// Promises returns the room the attempts holding reservations in a domain
// still need, but the group's own: another gang's attempt leaves it to
// them, so that two attempts under way do not both count on it.
func (m *Model) Promises(except types.NamespacedName) []Promise {
	var promises []Promise
	for key, d := range m.Attempts().Holding() {
		if key == except {
			continue
		}
		pg := m.PodGroup(key)
		if pg == nil {
			continue
		}
		unplaced, need := m.Unplaced(key, pg)
		if need <= 0 || len(unplaced) == 0 {
			continue
		}
		slices.SortFunc(unplaced, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		promises = append(promises, Promise{Members: unplaced[:min(int(need), len(unplaced))], Nodes: d.Nodes})
	}
	return promises
}

// WaitingForRoom lists the gangs waiting for room (topology.WaitingForRoom)
// with the members they lack: those whose last attempt failed and that
// the scheduler has marked so.
func (m *Model) WaitingForRoom() map[types.NamespacedName]topology.WaitingGang {
	waiting := map[types.NamespacedName]topology.WaitingGang{}
	for _, key := range m.Attempts().Failed() {
		pg := m.PodGroup(key)
		if pg == nil {
			continue
		}
		members, err := m.CountedMembers(key)
		if err != nil {
			klog.Background().Error(err, "Counting members", "podGroup", key)
			continue
		}
		if lacking, waits := topology.WaitingForRoom(pg.Spec.MinMember, members); waits {
			waiting[key] = topology.WaitingGang{Lacking: lacking}
		}
	}
	return waiting
}
