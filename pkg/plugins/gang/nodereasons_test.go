package gang

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestNodeReasonsCountTheNodesByReasonMostFirst(t *testing.T) {
	const claims, affinity, cpu = "cannot allocate all claims", "node(s) didn't match Pod's node affinity/selector", "Insufficient cpu"
	tests := []struct {
		name     string
		statuses map[string]*fwk.Status // by node; a node not here was not filtered
		want     string
	}{
		{
			name: "one reason on every node",
			statuses: map[string]*fwk.Status{
				"n0": fwk.NewStatus(fwk.Unschedulable, claims), "n1": fwk.NewStatus(fwk.Unschedulable, claims),
			},
			want: "2 nodes: " + claims,
		},
		{
			name: "unresolvable reasons count too, the most common first, one node said so",
			statuses: map[string]*fwk.Status{
				"n0": fwk.NewStatus(fwk.Unschedulable, claims), "n1": fwk.NewStatus(fwk.Unschedulable, claims),
				"n2": fwk.NewStatus(fwk.UnschedulableAndUnresolvable, affinity),
			},
			want: "2 nodes: " + claims + "; 1 node: " + affinity,
		},
		{
			name: "a node with two reasons counts for each, ties in alphabetical order",
			statuses: map[string]*fwk.Status{
				"n0": fwk.NewStatus(fwk.Unschedulable, cpu, claims),
			},
			want: "1 node: " + cpu + "; 1 node: " + claims,
		},
		{
			name: "past three reasons, the rest are counted",
			statuses: map[string]*fwk.Status{
				"n0": fwk.NewStatus(fwk.Unschedulable, "a"), "n1": fwk.NewStatus(fwk.Unschedulable, "b"),
				"n2": fwk.NewStatus(fwk.Unschedulable, "c"), "n3": fwk.NewStatus(fwk.Unschedulable, "d"),
				"n4": fwk.NewStatus(fwk.Unschedulable, "e"),
			},
			want: "1 node: a; 1 node: b; 1 node: c; 2 more reasons",
		},
		{
			name:     "no node said anything",
			statuses: map[string]*fwk.Status{},
			want:     "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var nodes []*corev1.Node
			for i := range 5 {
				nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("n%d", i)).Obj())
			}
			statuses := framework.NewDefaultNodeToStatus()
			for node, status := range tt.statuses {
				statuses.Set(node, status)
			}
			lister := internalcache.NewSnapshot(nil, nodes).NodeInfos()
			assert.Equal(t, tt.want, nodeReasons(statuses, lister))
		})
	}
}

func TestNodeReasonsWithoutStatusesSayNothing(t *testing.T) {
	assert.Empty(t, nodeReasons(nil, internalcache.NewSnapshot(nil, nil).NodeInfos()))
}
