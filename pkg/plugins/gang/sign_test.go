package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// lateLauncherGroup is an MPI gang of a worker and a launcher its operator
// creates once the worker is Ready; the launcher must run on the cpu pool.
func lateLauncherGroup(name string) *v1alpha1.PodGroup {
	pg := podGroup(name, 2).Obj()
	pg.Annotations = map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=1",
		topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"cpu"}}}`,
	}
	return pg
}

func oneCPU(w *st.PodWrapper) *corev1.Pod {
	return w.Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj()
}

func TestSignPodSharesASignatureOnlyWhereHeldRoomsCannotTellPodsApart(t *testing.T) {
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{
		podGroup("a", 2).Obj(), podGroup("b", 2).Obj(), lateLauncherGroup("mpi"),
		podGroup("elastic-a", 1).Elastic("worker=4", "1:4").Obj(), podGroup("elastic-b", 1).Elastic("worker=4", "1:4").Obj(),
	}, nil)
	sign := func(pod *corev1.Pod) fwk.PodSignature { return f.fw.SignPod(f.ctx, pod) }
	worker := func(group, name string) *corev1.Pod {
		return oneCPU(member(group, name).Label(topology.RoleLabel, "worker"))
	}

	plain := sign(oneCPU(st.MakePod().Namespace(ns).Name("p0").SchedulerName(topology.SchedulerName)))
	require.NotNil(t, plain, "a profile whose filters all sign batches its pods")
	assert.Equal(t, plain, sign(oneCPU(st.MakePod().Namespace(ns).Name("p1").SchedulerName(topology.SchedulerName))), "pods of no group share one")
	assert.Equal(t, plain, sign(worker("a", "a0")), "a rigid gang's member is filtered as a pod of no group")
	assert.Equal(t, sign(worker("a", "a0")), sign(worker("b", "b0")), "so are the members of two rigid gangs")
	assert.Equal(t, plain, sign(worker("mpi", "w0")), "and the workers of a gang whose launcher comes late")
	assert.Nil(t, sign(oneCPU(member("mpi", "launcher").Label(topology.RoleLabel, "launcher"))),
		"a late member goes into its held room, never where a batch would put it")

	assert.Equal(t, sign(worker("elastic-a", "ea0")), sign(worker("elastic-a", "ea1")), "an elastic group's members share one")
	assert.NotEqual(t, plain, sign(worker("elastic-a", "ea0")), "above its min, an elastic group's member is kept off held-back room")
	assert.NotEqual(t, sign(worker("elastic-a", "ea0")), sign(worker("elastic-b", "eb0")), "each elastic group is above its min or not on its own")

	unknown := sign(worker("not-yet", "n0"))
	assert.NotEqual(t, plain, unknown, "a member of a group not read yet may be late or elastic")
	assert.NotEqual(t, unknown, sign(oneCPU(member("not-yet", "n1").Label(topology.RoleLabel, "launcher"))), "its roles are told apart")
}

func TestABatchCannotTakeALateMemberOutOfItsHeldRoom(t *testing.T) {
	cpuNode := func(name string) *st.NodeWrapper {
		return st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{"cpu": "4", "pods": "110"})
	}
	three := []*corev1.Node{cpuNode("node-1").Obj(), cpuNode("node-2").Label("pool", "cpu").Obj(), cpuNode("node-3").Obj()}
	w0 := oneCPU(member("mpi", "w0").Label(topology.RoleLabel, "worker"))
	f := newFixtureOn(t, three, Args{}, []*v1alpha1.PodGroup{lateLauncherGroup("mpi")}, []*corev1.Pod{w0})
	require.True(t, f.reserveAndPermit(t, w0).IsSuccess(), "admitted with the launcher's room held")
	room, held := heldNode(f.model.Rooms(), types.NamespacedName{Namespace: ns, Name: "mpi"}, "launcher")
	require.True(t, held)
	require.Equal(t, "node-2", room, "the only node of the launcher's pool")

	// A pod of no group, as large as the launcher, was just placed on
	// node-1, with node-3 and then node-2 next best: the batch holds them.
	previous := oneCPU(st.MakePod().Namespace(ns).Name("previous"))
	previousSignature := f.fw.SignPod(f.ctx, previous)
	f.fw.StoreScheduleResults(f.ctx, previousSignature, "", "node-1", framework.NewSortedScoredNodes([]fwk.NodePluginScores{
		{Name: "node-3", TotalScore: 100}, {Name: "node-2", TotalScore: 50},
	}), 1)

	launcher := oneCPU(member("mpi", "launcher").Label(topology.RoleLabel, "launcher"))
	state := framework.NewCycleState()
	result, status, _ := f.fw.RunPreFilterPlugins(f.ctx, state, launcher)
	require.True(t, status.IsSuccess(), status.Message())
	require.Equal(t, []string{room}, result.NodeNames.UnsortedList(), "PreFilter pins the launcher to its room")

	assert.Empty(t, f.fw.GetNodeHint(f.ctx, launcher, f.fw.SignPod(f.ctx, launcher), state, 2),
		"unsigned, the launcher gets no hint: every node is filtered, with PreFilter's result")
	// Had the launcher been signed as the previous pod was, the batch would
	// have handed it node-3, and the scheduler tries a hint before, and
	// without, PreFilter's result.
	hint := f.fw.GetNodeHint(f.ctx, launcher, previousSignature, state, 2)
	assert.Equal(t, "node-3", hint, "a shared signature would take the launcher out of its room")
	nodeInfo, err := f.fw.SnapshotSharedLister().NodeInfos().Get(hint)
	require.NoError(t, err)
	status = f.fw.RunFilterPlugins(f.ctx, state, launcher, nodeInfo)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "HeldRooms' Filter keeps it to its room all the same")
	assert.Contains(t, status.Message(), "the member's room is held on node node-2")
}
