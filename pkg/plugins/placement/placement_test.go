package placement

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	gangplugin "github.com/muster-dev/muster/pkg/plugins/gang"
	"github.com/muster-dev/muster/pkg/plugins/internal/frameworktest"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

const (
	ns   = "team-a"
	rack = "topology.kubernetes.io/rack"
)

var job = types.NamespacedName{Namespace: ns, Name: "job"}

// fixture is a profile of the filters that matter here (frameworktest's)
// with Placement, over a snapshot of the nodes and the bound pods, and the
// group model of the pods.
type fixture struct {
	ctx   context.Context
	fw    framework.Framework
	pl    *Placement
	model *group.Model
}

func newFixture(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, pg *v1alpha1.PodGroup) *fixture {
	t.Helper()
	return newFixtureOf(t, nodes, pods, []*v1alpha1.PodGroup{pg})
}

func newFixtureOf(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, pgs []*v1alpha1.PodGroup) *fixture {
	t.Helper()
	return newFixtureWith(t, frameworktest.NewCluster(t, nodes, pods, pgs), pods)
}

// newFixtureWith is newFixtureOf on a cluster made by the caller, with
// extra plugins.
func newFixtureWith(t *testing.T, c *frameworktest.Cluster, pods []*corev1.Pod, extra ...tf.RegisterPluginFunc) *fixture {
	t.Helper()
	for _, pod := range pods {
		c.Model.Take(group.Added(pod))
	}
	f := &fixture{ctx: c.Ctx, model: c.Model}
	placement := func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		pl, err := NewWithGroups(h, c.Model)
		f.pl = pl
		return pl, err
	}
	recorder := func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return gangplugin.New(ctx, obj, h, c.Model)
	}
	// Gang's PreFilter first, as in the profile: it records each cycle's
	// group for the plugins after it.
	profile := append([]tf.RegisterPluginFunc{tf.RegisterPluginAsExtensions(gangplugin.Name, recorder, "PreFilter")}, frameworktest.Filters()...)
	f.fw = c.Framework(t, append(append(profile, tf.RegisterPluginAsExtensions(Name, placement, "PreFilter", "Filter")), extra...)...)
	return f
}

// preFilter runs the profile's PreFilter for the member, as its cycle does,
// and returns the nodes it leaves, nil for all.
func (f *fixture) preFilter(t *testing.T, pod *corev1.Pod) (sets.Set[string], *fwk.Status) {
	t.Helper()
	result, status, _ := f.fw.RunPreFilterPlugins(f.ctx, framework.NewCycleState(), pod)
	if !status.IsSuccess() || result.AllNodes() {
		return nil, status
	}
	return result.NodeNames, status
}

// racked is a node of the rack with the CPUs; "" leaves the label off.
func racked(name, rackName string, cpus int) *corev1.Node {
	n := st.MakeNode().Name(name).Label(corev1.LabelHostname, name).Capacity(map[corev1.ResourceName]string{"cpu": fmt.Sprint(cpus), "pods": "110"})
	if rackName != "" {
		n = n.Label(rack, rackName)
	}
	return n.Obj()
}

// gang is a PodGroup of minMember required to stay in one rack, or free to
// span racks when key is "".
func gang(minMember int32, key string) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name, UID: "job"}, Spec: v1alpha1.PodGroupSpec{MinMember: minMember}}
	if key != "" {
		pg.Annotations = map[string]string{topology.DomainRequiredAnnotation: key}
	}
	return pg
}

// members are the gang's n pods, each asking for the CPUs (and a host
// port, when port is set).
func members(n, cpus int, port int32) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range n {
		w := st.MakePod().Namespace(ns).Name(fmt.Sprintf("w%d", i)).UID(fmt.Sprintf("w%d", i)).
			Label(topology.GroupLabel, job.Name).SchedulerName(topology.SchedulerName).
			Req(map[corev1.ResourceName]string{"cpu": fmt.Sprint(cpus)})
		if port != 0 {
			w = w.ContainerPort([]corev1.ContainerPort{{HostPort: port, ContainerPort: port}})
		}
		pods = append(pods, w.Obj())
	}
	return pods
}

func TestTheGangGoesToTheTightestDomainItsMembersFitByTheFilters(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		want  string
	}{
		{
			"the domain the gang fills",
			[]*corev1.Node{racked("b1", "rack-b", 4), racked("b2", "rack-b", 4), racked("b3", "rack-b", 4), racked("a1", "rack-a", 4), racked("a2", "rack-a", 4)},
			members(4, 2, 0), "rack-a",
		},
		{
			"equally tight: the first by name",
			[]*corev1.Node{racked("b1", "rack-b", 4), racked("a1", "rack-a", 4)},
			members(2, 2, 0), "rack-a",
		},
		{
			// By requests rack-a is tighter, but the host port lets one
			// member on each node: only rack-b's three nodes take three.
			"the filters decide, not the requests",
			[]*corev1.Node{racked("a1", "rack-a", 16), racked("a2", "rack-a", 16), racked("b1", "rack-b", 16), racked("b2", "rack-b", 16), racked("b3", "rack-b", 16)},
			members(3, 1, 8080), "rack-b",
		},
		{
			// Each member keeps off the others' nodes: the trial reads the
			// members placed before, on every node.
			"members apart from each other",
			[]*corev1.Node{racked("a1", "rack-a", 16), racked("a2", "rack-a", 16), racked("b1", "rack-b", 16), racked("b2", "rack-b", 16), racked("b3", "rack-b", 16)},
			apart(members(3, 1, 0)), "rack-b",
		},
		{
			"a node without the label is never a candidate",
			[]*corev1.Node{racked("big", "", 64), racked("a1", "rack-a", 4), racked("a2", "rack-a", 4)},
			members(4, 2, 0), "rack-a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.nodes, tt.pods, gang(int32(len(tt.pods)), rack))
			nodes, status := f.preFilter(t, tt.pods[0])
			require.True(t, status.IsSuccess(), "PreFilter: %v", status)
			d, chosen := f.model.Attempts().Domain(job)
			require.True(t, chosen)
			assert.Equal(t, tt.want, d.Name)
			var want []string
			for _, n := range tt.nodes {
				if n.Labels[rack] == tt.want {
					want = append(want, n.Name)
				}
			}
			assert.ElementsMatch(t, want, nodes.UnsortedList(), "the member is filtered on its domain's nodes only")
		})
	}
}

func TestTheDomainIsChosenOncePerAttemptAndKeptForEveryMember(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", 4), racked("b1", "rack-b", 8)}
	pods := members(2, 2, 0)
	f := newFixture(t, nodes, pods, gang(2, rack))
	first, status := f.preFilter(t, pods[0])
	require.True(t, status.IsSuccess())
	assert.Equal(t, []string{"a1"}, first.UnsortedList())
	// Whatever changed since, the attempt's second member goes where its
	// first went.
	f.model.Attempts().ChooseDomain(job, groupstate.Domain{Name: "rack-b"})
	second, status := f.preFilter(t, pods[1])
	require.True(t, status.IsSuccess())
	assert.Equal(t, []string{"b1"}, second.UnsortedList(), "read from the group's state, not chosen again")

	// A failed attempt forgets its domain; the next chooses again.
	f.model.Attempts().Begin(job)
	f.model.Attempts().Fail(job, metav1.Now().Time, 0, groupstate.FoundNoRoom, "member w1 fits on no node")
	_, chosen := f.model.Attempts().Domain(job)
	assert.False(t, chosen)
	again, status := f.preFilter(t, pods[1])
	require.True(t, status.IsSuccess())
	assert.Equal(t, []string{"a1"}, again.UnsortedList())
}

func TestAnotherGangsAttemptUnderWayKeepsTheRoomItStillNeedsInItsDomain(t *testing.T) {
	// rack-a has room for four members of 2 CPUs, rack-b for eight. "other",
	// a gang of four, holds one reservation in rack-a and has three members
	// yet to place there.
	nodes := []*corev1.Node{racked("a1", "rack-a", 4), racked("a2", "rack-a", 4), racked("b1", "rack-b", 8), racked("b2", "rack-b", 8)}
	other := types.NamespacedName{Namespace: ns, Name: "other"}
	otherPG := gang(4, rack)
	otherPG.Name, otherPG.UID = other.Name, "other"
	pods := members(2, 2, 0)
	var others []*corev1.Pod
	for i := range 4 {
		others = append(others, st.MakePod().Namespace(ns).Name(fmt.Sprintf("o%d", i)).UID(fmt.Sprintf("o%d", i)).
			Label(topology.GroupLabel, other.Name).SchedulerName(topology.SchedulerName).
			Req(map[corev1.ResourceName]string{"cpu": "2"}).Obj())
	}
	f := newFixtureOf(t, nodes, append(pods, others...), []*v1alpha1.PodGroup{gang(2, rack), otherPG})
	attempts := f.model.Attempts()
	attempts.Begin(other)
	attempts.ChooseDomain(other, groupstate.Domain{Name: "rack-a", Nodes: sets.New("a1", "a2")})
	attempts.Reserve(other, others[0].UID)

	_, status := f.preFilter(t, pods[0])
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	d, _ := attempts.Domain(job)
	assert.Equal(t, "rack-b", d.Name, "rack-a is tighter, but the other gang's attempt still needs its room")

	attempts.Fail(other, metav1.Now().Time, 0, groupstate.FoundNoRoom, "member o1 fits on no node")
	attempts.Begin(job)
	attempts.Fail(job, metav1.Now().Time, 0, groupstate.FoundNoRoom, "member w1 fits on no node")
	_, status = f.preFilter(t, pods[0])
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	d, _ = attempts.Domain(job)
	assert.Equal(t, "rack-a", d.Name, "the other attempt over, its room is free")
}

func TestAMemberOfABoundGangGoesToItsDomain(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", 4), racked("b1", "rack-b", 8), racked("b2", "rack-b", 8)}
	pods := members(3, 2, 0)
	pods[0].Spec.NodeName = "b1"
	f := newFixture(t, nodes, pods, gang(2, rack))
	got, status := f.preFilter(t, pods[2])
	require.True(t, status.IsSuccess())
	assert.ElementsMatch(t, []string{"b1", "b2"}, got.UnsortedList(), "beside its bound sibling, though rack-a is tighter")
	_, chosen := f.model.Attempts().Domain(job)
	assert.False(t, chosen, "nothing to choose")
}

func TestAGangLargerThanEveryDomainSaysWhichCameClosest(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		want  string
	}{
		{
			"no domain has the requests' room",
			[]*corev1.Node{racked("a1", "rack-a", 4), racked("a2", "rack-a", 4), racked("b1", "rack-b", 4)},
			members(5, 2, 0),
			"no topology.kubernetes.io/rack domain has room for the 5 members group team-a/job lacks; the closest, rack-a, has room for 4",
		},
		{
			"the requests fit, the filters do not",
			[]*corev1.Node{racked("a1", "rack-a", 16), racked("a2", "rack-a", 16), racked("b1", "rack-b", 16)},
			members(3, 1, 8080),
			"no topology.kubernetes.io/rack domain has room for the 3 members group team-a/job lacks; the closest, rack-a, has room for 2",
		},
		{
			"no node has the label",
			[]*corev1.Node{racked("n1", "", 64)},
			members(2, 1, 0),
			"group team-a/job must stay in one topology.kubernetes.io/rack domain, and no node has that label",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.nodes, tt.pods, gang(int32(len(tt.pods)), rack))
			_, status := f.preFilter(t, tt.pods[0])
			assert.Equal(t, fwk.Unschedulable, status.Code(), "preemption may free a domain")
			assert.Equal(t, tt.want, status.Message())
			d, chosen := f.model.Attempts().Domain(job)
			require.True(t, chosen, "the attempt keeps the answer: its other members are not tried again")
			assert.Empty(t, d.Name)
		})
	}
}

func TestAGangFreeToSpanDomainsIsNotNarrowed(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", 4), racked("b1", "rack-b", 4)}
	pods := members(2, 2, 0)
	f := newFixture(t, nodes, pods, gang(2, ""))
	got, status := f.preFilter(t, pods[0])
	require.True(t, status.IsSuccess())
	assert.Nil(t, got)
	_, chosen := f.model.Attempts().Domain(job)
	assert.False(t, chosen)
}

func TestAGangKueuePlacedAcrossDomainsIsLeftWhereKueueSaid(t *testing.T) {
	// Kueue's topology scheduling admitted the gang over both racks and
	// wrote each member's node into its node selector: muster's own
	// requirement, which no rack holds, must not leave it unschedulable.
	nodes := []*corev1.Node{racked("a1", "rack-a", 2), racked("b1", "rack-b", 2)}
	pods := members(2, 2, 0)
	for i, node := range []string{"a1", "b1"} {
		pods[i].Annotations = map[string]string{topology.KueueUnconstrainedTopologyAnnotation: "true"}
		pods[i].Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	f := newFixture(t, nodes, pods, gang(2, rack))
	for _, pod := range pods {
		got, status := f.preFilter(t, pod)
		require.True(t, status.IsSuccess(), status.Message())
		assert.Nil(t, got, "every node Kueue's node selector allows stays a candidate")
	}
	_, chosen := f.model.Attempts().Domain(job)
	assert.False(t, chosen, "no domain is chosen for a gang Kueue places")

	// The same gang, placed by muster alone, is told no rack holds it.
	for _, pod := range pods {
		delete(pod.Annotations, topology.KueueUnconstrainedTopologyAnnotation)
	}
	_, status := newFixture(t, nodes, pods, gang(2, rack)).preFilter(t, pods[0])
	assert.Equal(t, fwk.Unschedulable, status.Code())
}

func TestFilterKeepsTheMemberInItsDomainWhateverNodeItIsTriedOn(t *testing.T) {
	// kube-scheduler tries a nominated node, or a batch's hint, with the
	// filters alone: PreFilter's result does not narrow it.
	nodes := []*corev1.Node{racked("a1", "rack-a", 4), racked("b1", "rack-b", 8), racked("bare", "", 8)}
	pods := members(2, 2, 0)
	f := newFixture(t, nodes, pods, gang(2, rack))
	state := framework.NewCycleState()
	_, status, _ := f.fw.RunPreFilterPlugins(f.ctx, state, pods[0])
	require.True(t, status.IsSuccess())
	for _, n := range nodes {
		info := framework.NewNodeInfo()
		info.SetNode(n)
		got := f.pl.Filter(f.ctx, state, pods[0], info)
		if n.Name == "a1" {
			assert.True(t, got.IsSuccess(), "a1 is in rack-a: %v", got)
			continue
		}
		assert.Equal(t, fwk.UnschedulableAndUnresolvable, got.Code(), n.Name)
		assert.Equal(t, "node is outside the gang's domain topology.kubernetes.io/rack=rack-a", got.Message())
	}
	assert.True(t, f.pl.Filter(f.ctx, framework.NewCycleState(), pods[0], framework.NewNodeInfo()).IsSuccess(), "a cycle with no domain is not narrowed")
}

func TestSignPodSetsAGangInOneDomainApartByItsGroup(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", 4)}
	constrained := newFixture(t, nodes, members(1, 1, 0), gang(1, rack))
	got, status := constrained.pl.SignPod(constrained.ctx, members(1, 1, 0)[0])
	require.True(t, status.IsSuccess())
	assert.Equal(t, []fwk.SignFragment{{Key: SignerName, Value: "team-a/job"}}, got)

	free := newFixture(t, nodes, members(1, 1, 0), gang(1, ""))
	got, _ = free.pl.SignPod(free.ctx, members(1, 1, 0)[0])
	assert.Equal(t, []fwk.SignFragment{{Key: SignerName}}, got, "a gang free to span domains signs as any pod")
	got, _ = free.pl.SignPod(free.ctx, st.MakePod().Namespace(ns).Name("plain").Obj())
	assert.Equal(t, []fwk.SignFragment{{Key: SignerName}}, got)
}

func TestTheDomainHoldsTheRoomOfTheMembersCreatedLate(t *testing.T) {
	// rack-a holds the two workers but not the launcher mpi-operator
	// creates once they are Ready; rack-b holds all three.
	nodes := []*corev1.Node{racked("a1", "rack-a", 2), racked("b1", "rack-b", 2), racked("b2", "rack-b", 2)}
	pg := gang(3, rack)
	pg.Annotations[topology.FrameworkAnnotation] = "mpi"
	pg.Annotations[topology.RolesAnnotation] = "launcher=1,worker=2"
	pg.Annotations[topology.LateMembersAnnotation] = `{"launcher":{"requests":{"cpu":"1"}}}`
	workers := members(2, 1, 0)
	for i, w := range workers {
		w.Labels[topology.RoleLabel] = "worker"
		w.Labels[topology.IndexLabel] = fmt.Sprint(i)
	}
	f := newFixture(t, nodes, workers, pg)
	got, status := f.preFilter(t, workers[0])
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	assert.ElementsMatch(t, []string{"b1", "b2"}, got.UnsortedList(), "the rack that holds the launcher's room too")
}

func TestADomainWhereAnAttemptFailedIsNotTriedAgainBeforeTheGangBacksOff(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", 4), racked("b1", "rack-b", 8)}
	pods := members(2, 2, 0)
	f := newFixture(t, nodes, pods, gang(2, rack))
	attempts := f.model.Attempts()
	attempts.Begin(job)
	attempts.ChooseDomain(job, groupstate.Domain{Name: "rack-a"})
	// With no backoff: Gang's PreFilter, first in the profile, would turn
	// the member away while its gang backs off.
	attempts.Fail(job, metav1.Now().Time, 0, groupstate.FoundNoRoom, "member w1 fits in no node of the gang's domain rack-a")

	got, status := f.preFilter(t, pods[0])
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	assert.Equal(t, []string{"b1"}, got.UnsortedList(), "rack-a is tighter, but failed: the next rack")

	attempts.Begin(job)
	attempts.Fail(job, metav1.Now().Time, 0, groupstate.FoundNoRoom, "member w1 fits in no node of the gang's domain rack-b")
	_, status = f.preFilter(t, pods[0])
	assert.Equal(t, fwk.Unschedulable, status.Code(), "both racks failed: the gang backs off in full")
	assert.Equal(t, "group team-a/job: its attempts failed in every topology.kubernetes.io/rack domain that could hold it (rack-a, rack-b), other pods taking the room first", status.Message())
	assert.Zero(t, attempts.TriedDomains(job).Len(), "after which it may try both again")
}

// blockRack is a node of 4 CPUs in the rack of the block.
func blockRack(name, block, rackName string) *corev1.Node {
	n := racked(name, rackName, 4)
	n.Labels[topology.BlockLabel] = block
	return n
}

func TestAPreferredDomainHoldsTheGangWhenOneCanElseTheRequiredOneDoes(t *testing.T) {
	// block-0: rack-a of one node, rack-b of two; block-1: rack-c of one.
	nodes := []*corev1.Node{
		blockRack("a1", "block-0", "rack-a"), blockRack("b1", "block-0", "rack-b"), blockRack("b2", "block-0", "rack-b"),
		blockRack("c1", "block-1", "rack-c"),
	}
	tests := []struct {
		name     string
		required string
		pods     []*corev1.Pod
		want     groupstate.Domain
		nodes    []string
	}{
		{"one rack holds it: the tightest", topology.BlockLabel, members(2, 2, 0),
			groupstate.Domain{Name: "block-0", Preferred: "rack-a"}, []string{"a1"}},
		{"no rack holds it: the block does", topology.BlockLabel, members(3, 3, 0),
			groupstate.Domain{Name: "block-0"}, []string{"a1", "b1", "b2"}},
		{"a preference alone that no rack meets spans the racks it must", "", members(4, 3, 0),
			groupstate.Domain{}, []string{"a1", "b1", "b2", "c1"}},
		{"a preference alone that nothing meets narrows nothing", "", members(5, 3, 0),
			groupstate.Domain{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := gang(int32(len(tt.pods)), tt.required)
			if pg.Annotations == nil {
				pg.Annotations = map[string]string{}
			}
			pg.Annotations[topology.DomainPreferredAnnotation] = rack
			f := newFixture(t, nodes, tt.pods, pg)
			got, status := f.preFilter(t, tt.pods[0])
			require.True(t, status.IsSuccess(), "PreFilter: %v", status)
			d, chosen := f.model.Attempts().Domain(job)
			require.True(t, chosen)
			assert.Equal(t, tt.want.String(), d.String())
			assert.ElementsMatch(t, tt.nodes, d.Nodes.UnsortedList(), "the domain's nodes, kept with it")
			if tt.nodes == nil {
				assert.Nil(t, got)
				return
			}
			assert.ElementsMatch(t, tt.nodes, got.UnsortedList())
		})
	}
}

// TestAGangNoPreferredDomainHoldsSpansTheFewest: members that no one
// rack holds fill the roomiest racks first, and the attempt keeps only the
// racks they took, inside the required block when there is one.
func TestAGangNoPreferredDomainHoldsSpansTheFewest(t *testing.T) {
	// block-0: rack-a of one node, rack-b of two, rack-c of three;
	// block-1: rack-d of four, whose nodes are full.
	nodes := []*corev1.Node{
		blockRack("a1", "block-0", "rack-a"), blockRack("b1", "block-0", "rack-b"), blockRack("b2", "block-0", "rack-b"),
		blockRack("c1", "block-0", "rack-c"), blockRack("c2", "block-0", "rack-c"), blockRack("c3", "block-0", "rack-c"),
	}
	for i := range 4 {
		full := blockRack(fmt.Sprintf("d%d", i), "block-1", "rack-d")
		full.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1")
		nodes = append(nodes, full)
	}
	tests := []struct {
		name     string
		required string
		want     string
	}{
		{"preferred alone", "", ""},
		{"preferred inside required", topology.BlockLabel, "block-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := members(4, 3, 0)
			pg := gang(4, tt.required)
			if pg.Annotations == nil {
				pg.Annotations = map[string]string{}
			}
			pg.Annotations[topology.DomainPreferredAnnotation] = rack
			f := newFixture(t, nodes, pods, pg)
			got, status := f.preFilter(t, pods[0])
			require.True(t, status.IsSuccess(), "PreFilter: %v", status)
			d, _ := f.model.Attempts().Domain(job)
			assert.Equal(t, tt.want, d.String())
			want := []string{"c1", "c2", "c3", "b1", "b2"}
			assert.ElementsMatch(t, want, d.Nodes.UnsortedList(), "rack-c's three, then rack-b, roomier than rack-a")
			assert.ElementsMatch(t, want, got.UnsortedList())
		})
	}
}

// apart gives each member required anti-affinity to its gang's other
// members, by host.
func apart(pods []*corev1.Pod) []*corev1.Pod {
	for _, p := range pods {
		p.Labels["app"] = "apart"
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "apart"}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
	}
	return pods
}
