package gangpreemption

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
)

// TestNodesShortOfDevicesAreOnesPreemptionMayHelp: DynamicResources calls a
// node without the devices a pod claims unresolvable; read through
// devicesResolvable, it is a node where preemption may help. Every other
// status reads as it is.
func TestNodesShortOfDevicesAreOnesPreemptionMayHelp(t *testing.T) {
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("no-devices", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, noDevices).WithPlugin(devices.FilterPlugin))
	statuses.Set("no-cpu", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit"))
	statuses.Set("bad-claim", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "resourceclaim not found").WithPlugin(devices.FilterPlugin))
	statuses.Set("other-plugin", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, noDevices).WithPlugin("SomeoneElse"))
	statuses.Set("wrong-node", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't match Pod's node affinity/selector").WithPlugin("NodeAffinity"))
	var nodes []*corev1.Node
	for _, name := range []string{"no-devices", "no-cpu", "bad-claim", "other-plugin", "wrong-node"} {
		nodes = append(nodes, st.MakeNode().Name(name).Obj())
	}
	lister := internalcache.NewSnapshot(nil, nodes).NodeInfos()
	read := devicesResolvable{statuses}

	names := func(code fwk.Code) []string {
		infos, err := read.NodesForStatusCode(lister, code)
		require.NoError(t, err)
		var out []string
		for _, info := range infos {
			out = append(out, info.Node().Name)
		}
		return out
	}
	assert.ElementsMatch(t, []string{"no-cpu", "no-devices"}, names(fwk.Unschedulable))
	assert.ElementsMatch(t, []string{"bad-claim", "other-plugin", "wrong-node"}, names(fwk.UnschedulableAndUnresolvable))

	for node, want := range map[string]fwk.Code{
		"no-devices": fwk.Unschedulable, "no-cpu": fwk.Unschedulable,
		"bad-claim": fwk.UnschedulableAndUnresolvable, "other-plugin": fwk.UnschedulableAndUnresolvable,
	} {
		got := read.Get(node)
		assert.Equal(t, want, got.Code(), fmt.Sprintf("node %s", node))
	}
	got := read.Get("no-devices")
	assert.Equal(t, devices.FilterPlugin, got.Plugin())
	assert.Equal(t, []string{noDevices}, got.Reasons())
}
