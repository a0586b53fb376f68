package gangpreemption

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
	"github.com/muster-dev/muster/pkg/plugins/internal/frameworktest"
)

// TestNodesShortOfDevicesAreOnesPreemptionMayHelp: DynamicResources calls a
// node without the devices a pod claims unresolvable; read through
// devicesResolvable, it is a node where preemption may help. Every other
// status reads as it is.
func TestNodesShortOfDevicesAreOnesPreemptionMayHelp(t *testing.T) {
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("no-devices", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, noDevices).WithPlugin(devices.FilterName))
	statuses.Set("no-cpu", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu").WithPlugin("NodeResourcesFit"))
	statuses.Set("bad-claim", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "resourceclaim not found").WithPlugin(devices.FilterName))
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
	assert.Equal(t, devices.FilterName, got.Plugin())
	assert.Equal(t, []string{noDevices}, got.Reasons())
}

// fakeDynamicResources stands in for kube-scheduler's DynamicResources
// filter, under its name: a pod whose claims the node's free devices cannot
// meet is refused as DynamicResources refuses it, unresolvably. Like it,
// it never sees a victim's devices freed.
type fakeDynamicResources struct{ dra fwk.SharedDRAManager }

func (f *fakeDynamicResources) Name() string { return devices.FilterName }

func (f *fakeDynamicResources) Filter(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, node fwk.NodeInfo) *fwk.Status {
	claims, ok, err := devices.Claims(f.dra, pod)
	if err != nil || !ok {
		return fwk.AsStatus(err)
	}
	room, err := devices.NewRoom(f.dra, feature.Features{}, func(string, string, types.UID) bool { return true })
	if err != nil {
		return fwk.AsStatus(err)
	}
	results, err := room.Allocate(ctx, node.Node(), claims, nil)
	if err != nil || results == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, noDevices).WithError(err)
	}
	return nil
}

// claiming makes the pod claim the named claim.
func claiming(pod *st.PodWrapper, claim string) *corev1.Pod {
	p := pod.Obj()
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	return p
}

// deviceSearch is a search on 2 nodes of 2 devices each, every device held
// by a low-priority pod of no group (low-0 … low-3, one claim each), with
// the preemptors' claims unallocated.
func deviceSearch(t *testing.T, preemptors []*corev1.Pod, pgs []*v1alpha1.PodGroup) *search {
	t.Helper()
	nodes := []*corev1.Node{node("node-0", "8"), node("node-1", "8")}
	dra := devicestest.On(nodes...)
	pods := slices.Clone(preemptors)
	for i := range 4 {
		name, on := fmt.Sprintf("low-%d", i), fmt.Sprintf("node-%d", i/2)
		pods = append(pods, claiming(running(name, on, low, "1"), "c-"+name))
		dra.Claims = append(dra.Claims, devicestest.Held("ns", "c-"+name, on, fmt.Sprintf("gpu-%d", i%2), name))
	}
	for _, p := range preemptors {
		dra.Claims = append(dra.Claims, devicestest.Claim("ns", *p.Spec.ResourceClaims[0].ResourceClaimName))
	}
	c := frameworktest.NewCluster(t, nodes, pods, pgs)
	c.DRA = dra
	filter := func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return &fakeDynamicResources{dra: dra}, nil
	}
	return newSearchOn(t, c, tf.RegisterFilterPlugin(devices.FilterName, filter))
}

func TestAPodOfNoGroupTakesOneDeviceHolder(t *testing.T) {
	pod := claiming(running("new", "", high, "1"), "c-new")
	s := deviceSearch(t, []*corev1.Pod{pod}, nil)

	state := framework.NewCycleState()
	_, status, _ := s.fw.RunPreFilterPlugins(s.ctx, state, pod)
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	statuses := map[string]*fwk.Status{}
	for _, name := range []string{"node-0", "node-1"} {
		n, err := s.fw.SnapshotSharedLister().NodeInfos().Get(name)
		require.NoError(t, err)
		statuses[name] = s.fw.RunFilterPluginsWithNominatedPods(s.ctx, state, pod, n)
		require.Equal(t, fwk.UnschedulableAndUnresolvable, statuses[name].Code(), "every device is held")
	}
	result, status := s.pl.PostFilter(s.ctx, state, pod, framework.NewNodeToStatus(statuses, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)))
	require.True(t, status.IsSuccess(), status.Message())
	require.NotNil(t, result)
	assert.Len(t, s.deleted(t, 1), 1, "one device is needed, one holder goes")
	assert.False(t, state.GetSkipFilterPlugins().Has(devices.FilterName), "the dry run's skip of DynamicResources is undone")
}

func TestAGangSearchTakesOneDeviceHolderPerMember(t *testing.T) {
	pg := podGroup("new", 2)
	members := []*corev1.Pod{claiming(gangMember("new", "new-0", "1"), "c-new-0"), claiming(gangMember("new", "new-1", "1"), "c-new-1")}
	s := deviceSearch(t, members, []*v1alpha1.PodGroup{pg})

	result, status := s.postFilter(t, members[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
	require.NotNil(t, result)
	assert.Len(t, s.deleted(t, 2), 2, "two members, each a device: two holders go, the second counting the first member's device")
}
