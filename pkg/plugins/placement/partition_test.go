package placement

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

func nodeInfos(nodes ...*corev1.Node) []fwk.NodeInfo {
	var infos []fwk.NodeInfo
	for _, n := range nodes {
		info := framework.NewNodeInfo()
		info.SetNode(n)
		infos = append(infos, info)
	}
	return infos
}

func TestAPartitionPutsEachNodeInItsDomainAndLeavesUnlabelledOnesOut(t *testing.T) {
	nodes := nodeInfos(blockRack("a1", "block-0", "rack-a"), racked("x", "", 4), blockRack("b1", "block-0", "rack-b"), blockRack("a2", "block-0", "rack-a"))
	byRack := newPartition(nodes, constraint{required: rack}.byRequired)
	assert.Equal(t, []groupstate.Domain{{Name: "rack-a"}, {Name: "rack-b"}}, byRack.domains)
	assert.Equal(t, []int{0, -1, 1, 0}, byRack.of)

	inBlock := newPartition(nodes, constraint{required: topology.BlockLabel, preferred: rack}.byPreferred)
	assert.Equal(t, []groupstate.Domain{{Name: "block-0", Preferred: "rack-a"}, {Name: "block-0", Preferred: "rack-b"}}, inBlock.domains)
}

func TestPartitionsAreMadeAgainOnlyWhenTheNodesChange(t *testing.T) {
	a1, b1 := racked("a1", "rack-a", 4), racked("b1", "rack-b", 4)
	nodes := nodeInfos(a1, b1)
	var ps partitions
	required := level{constraint: constraint{required: rack}}
	first := ps.of(nodes, required)
	assert.Same(t, first, ps.of(nodeInfos(a1, b1), required), "the same nodes, in new NodeInfos as a snapshot makes them")

	moved := b1.DeepCopy()
	moved.Labels[rack] = "rack-a"
	again := ps.of(nodeInfos(a1, moved), required)
	assert.NotSame(t, first, again, "a node relabelled")
	assert.Equal(t, []groupstate.Domain{{Name: "rack-a"}}, again.domains)

	gone := ps.of(nodeInfos(a1), required)
	assert.NotSame(t, again, gone, "a node gone")
	ps.of(nodeInfos(a1), level{constraint: constraint{required: rack, preferred: corev1.LabelHostname}, preferred: true})
	assert.Same(t, gone, ps.of(nodeInfos(a1), required), "each level keeps its own")
}
