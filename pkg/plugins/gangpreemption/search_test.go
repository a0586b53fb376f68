package gangpreemption

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/clock"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	gangplugin "github.com/muster-dev/muster/pkg/plugins/gang"
	"github.com/muster-dev/muster/pkg/plugins/heldrooms"
	"github.com/muster-dev/muster/pkg/plugins/internal/frameworktest"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	placementplugin "github.com/muster-dev/muster/pkg/plugins/placement"
	"github.com/muster-dev/muster/pkg/topology"
)

const low, high = int32(1), int32(10)

// search is a profile of the default filters that matter here
// (frameworktest's), HeldRooms, Placement, and GangPreemption in
// PostFilter, over a snapshot of the nodes and the bound pods.
type search struct {
	ctx    context.Context
	fw     framework.Framework
	pl     *GangPreemption
	model  *group.Model
	client *fake.Clientset
}

func newSearch(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, pgs []*v1alpha1.PodGroup, extra ...tf.RegisterPluginFunc) *search {
	t.Helper()
	return newSearchOn(t, frameworktest.NewCluster(t, nodes, pods, pgs), extra...)
}

// newSearchOn is newSearch on a cluster made by the caller, with extra
// plugins.
func newSearchOn(t *testing.T, c *frameworktest.Cluster, extra ...tf.RegisterPluginFunc) *search {
	t.Helper()
	s := &search{ctx: c.Ctx, model: c.Model, client: c.Client}
	recorder := func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return gangplugin.New(ctx, obj, h, c.Model)
	}
	held := func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return heldrooms.NewWithModel(klog.Background(), c.Model, h, clock.RealClock{}), nil
	}
	inDomain := func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return placementplugin.NewWithGroups(h, c.Model)
	}
	preemption := func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, err := decodeArgs(nil)
		if err != nil {
			return nil, err
		}
		pl, err := newGangPreemption(h, args, c.Model, feature.Features{}, nil)
		s.pl = pl
		return pl, err
	}
	// Gang's PreFilter first, as in the profile: it records each cycle's
	// group for the plugins after it.
	s.fw = c.Framework(t, append(append(append([]tf.RegisterPluginFunc{tf.RegisterPluginAsExtensions(gangplugin.Name, recorder, "PreFilter")}, frameworktest.Filters()...),
		tf.RegisterPluginAsExtensions(heldrooms.Name, held, "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(placementplugin.Name, inDomain, "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(Name, preemption, "PostFilter"),
	), extra...)...)
	return s
}

// postFilter runs the member's cycle as the scheduler does when it fits
// nowhere: PreFilter (Gang's first, which records the member's group),
// Filter on every node, then GangPreemption's PostFilter.
func (s *search) postFilter(t *testing.T, pod *corev1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	t.Helper()
	state := framework.NewCycleState()
	_, status, _ := s.fw.RunPreFilterPlugins(s.ctx, state, pod)
	require.True(t, status.IsSuccess() || status.Code() == fwk.Unschedulable, "PreFilter: %v", status)
	nodes, err := s.fw.SnapshotSharedLister().NodeInfos().List()
	require.NoError(t, err)
	statuses := map[string]*fwk.Status{}
	for _, n := range nodes {
		filtered := s.fw.RunFilterPluginsWithNominatedPods(s.ctx, state, pod, n)
		require.False(t, filtered.IsSuccess(), "the member fits on %s: no preemption is needed", n.Node().Name)
		statuses[n.Node().Name] = filtered
	}
	return s.pl.PostFilter(s.ctx, state, pod, framework.NewNodeToStatus(statuses, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)))
}

// deleted returns the names of the pods the plugin deleted, once it has
// deleted want of them (the executor deletes apart from the cycle).
func (s *search) deleted(t *testing.T, want int) []string {
	t.Helper()
	var names []string
	require.Eventually(t, func() bool {
		names = nil
		for _, a := range s.client.Actions() {
			if d, ok := a.(clienttesting.DeleteAction); ok && d.GetResource().Resource == "pods" {
				names = append(names, d.GetName())
			}
		}
		return len(names) >= want
	}, 10*time.Second, 10*time.Millisecond)
	slices.Sort(names)
	return names
}

// cycle runs the member's cycle as the scheduler does when its PreFilter
// turns it away, as Placement does a gang that fits no domain: every node
// has PreFilter's status, then GangPreemption's PostFilter.
func (s *search) cycle(t *testing.T, pod *corev1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	t.Helper()
	state := framework.NewCycleState()
	_, status, _ := s.fw.RunPreFilterPlugins(s.ctx, state, pod)
	require.Equal(t, fwk.Unschedulable, status.Code(), "PreFilter: %v", status)
	return s.pl.PostFilter(s.ctx, state, pod, framework.NewNodeToStatus(map[string]*fwk.Status{}, status))
}

// racked is a node of the rack.
func racked(name, rack, cpu string) *corev1.Node {
	n := node(name, cpu)
	n.Labels[rackLabel] = rack
	return n
}

const rackLabel = "topology.kubernetes.io/rack"

// TestAGangKueuePlacesTakesItsVictimsWhereKueueSaid: Kueue's Topology
// Aware Scheduling put a gang's members on a1 and b1, in two racks, though
// its PodGroup asks muster for one rack: one search frees the nodes Kueue
// chose, and the attempt is given no rack, which would disagree with
// Kueue's placement wherever muster holds room for the gang.
func TestAGangKueuePlacesTakesItsVictimsWhereKueueSaid(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", "4"), racked("b1", "rack-b", "4")}
	pg := podGroup("job", 2)
	pg.Annotations = map[string]string{topology.DomainRequiredAnnotation: rackLabel}
	var members []*corev1.Pod
	for i, host := range []string{"a1", "b1"} {
		members = append(members, gangMember("job", fmt.Sprintf("job-%d", i), "4").
			Annotation(topology.KueueRequiredTopologyAnnotation, corev1.LabelHostname).
			NodeSelector(map[string]string{corev1.LabelHostname: host}).Obj())
	}
	victims := []*corev1.Pod{running("va1", "a1", low, "4").Obj(), running("vb1", "b1", low, "4").Obj()}
	s := newSearch(t, nodes, append(victims, members...), []*v1alpha1.PodGroup{pg})

	result, status := s.postFilter(t, members[0])
	require.NotNil(t, result, status.Message())
	assert.Equal(t, "a1", result.NominatingInfo.NominatedNodeName)
	assert.Equal(t, []string{"va1", "vb1"}, s.deleted(t, 2))
	_, chosen := s.model.Attempts().Domain(types.NamespacedName{Namespace: "ns", Name: "job"})
	assert.False(t, chosen, "the attempt keeps no domain of muster's, which its held rooms would keep to")
}

func node(name string, cpu string) *corev1.Node {
	return st.MakeNode().Name(name).Label("kubernetes.io/hostname", name).Capacity(map[corev1.ResourceName]string{"cpu": cpu, "pods": "110"}).Obj()
}

func podGroup(name string, minMember int32) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{}
	pg.Namespace, pg.Name, pg.UID = "ns", name, types.UID(name)
	pg.Spec.MinMember = minMember
	return pg
}

// gangMember is a pending member of the gang of high priority.
func gangMember(gang, name, cpu string) *st.PodWrapper {
	return st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName(topology.SchedulerName).
		Label(topology.GroupLabel, gang).Priority(high).Req(map[corev1.ResourceName]string{"cpu": cpu})
}

// running is a bound pod of no group.
func running(name, node string, priority int32, cpu string) *st.PodWrapper {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Priority(priority).Req(map[corev1.ResourceName]string{"cpu": cpu})
}

// TestTheGangSearch pins what a gang's search for room takes, for the
// member whose PostFilter runs it: the victims deleted, the node the
// member is nominated to, and what its status says when nothing is taken.
func TestTheGangSearch(t *testing.T) {
	port := []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	twoNodes := []*corev1.Node{node("n1", "4"), node("n2", "4")}
	fourInTwoRacks := []*corev1.Node{racked("a1", "rack-a", "4"), racked("a2", "rack-a", "4"), racked("b1", "rack-b", "4"), racked("b2", "rack-b", "4")}
	members := func(gang string, n int, cpu string) []*corev1.Pod {
		var pods []*corev1.Pod
		for i := range n {
			pods = append(pods, gangMember(gang, fmt.Sprintf("%s-%d", gang, i), cpu).Obj())
		}
		return pods
	}
	tests := []struct {
		name      string
		nodes     []*corev1.Node
		others    []*corev1.Pod
		minMember int32
		members   []*corev1.Pod
		// preemptor is the member whose PostFilter runs the search.
		preemptor int
		// heldOnN1 holds 2 CPUs of n1 for another gang's launcher, to
		// come.
		heldOnN1 bool
		// inOneRack: the gang's PodGroup requires one rack.
		inOneRack bool
		// wantDeleted are the victims taken; none when nothing is.
		wantDeleted []string
		// wantNode is the node the member is nominated to; "" for any.
		wantNode string
		// wantMessage is part of the status's message.
		wantMessage string
		// noRequests: the search ran no dry run and deleted nothing.
		noRequests bool
		// wantRack is the rack the gang's attempt keeps, and its member is
		// nominated in, for a gang in one rack; "" when no rack holds it.
		wantRack string
	}{
		{
			name:  "a gang on one host port takes one victim per node",
			nodes: []*corev1.Node{node("n1", "8"), node("n2", "8")},
			others: []*corev1.Pod{
				running("old-a", "n1", low, "1").ContainerPort(port).Obj(),
				running("old-b", "n2", low, "1").ContainerPort(port).Obj(),
				running("bystander", "n1", low, "1").Obj(),
			},
			minMember: 2,
			members: []*corev1.Pod{
				gangMember("web", "web-0", "1").ContainerPort(port).Obj(),
				gangMember("web", "web-1", "1").ContainerPort(port).Obj(),
			},
			preemptor:   1,
			wantDeleted: []string{"old-a", "old-b"},
			wantMessage: "preempting 2 victims for the gang's 2 missing members",
		},
		{
			name:  "a member with required affinity takes its victim beside its peer",
			nodes: twoNodes,
			others: []*corev1.Pod{
				running("peer", "n2", high, "1").Label("app", "db").Obj(),
				running("victim-n1", "n1", low, "3").Obj(),
				running("victim-n2", "n2", low, "3").Obj(),
			},
			minMember:   1,
			members:     []*corev1.Pod{gangMember("train", "train-0", "2").PodAffinityExists("app", "kubernetes.io/hostname", st.PodAffinityWithRequiredReq).Obj()},
			wantDeleted: []string{"victim-n2"},
			wantNode:    "n2",
		},
		{
			name:        "a preemptor never takes the room held for a late member",
			nodes:       twoNodes,
			others:      []*corev1.Pod{running("victim-n1", "n1", low, "2").Obj(), running("victim-n2", "n2", low, "2").Obj()},
			minMember:   1,
			members:     members("gang", 1, "3"),
			heldOnN1:    true,
			wantDeleted: []string{"victim-n2"},
			wantNode:    "n2",
		},
		{
			// Two nodes of 4 CPUs hold two members of 3, whatever goes.
			name:        "nothing is taken for a gang that would still not fit",
			nodes:       twoNodes,
			others:      []*corev1.Pod{running("victim-n1", "n1", low, "3").Obj(), running("victim-n2", "n2", low, "3").Obj()},
			minMember:   3,
			members:     members("big", 3, "3"),
			wantMessage: "no lower-priority victims would make room for member big-2",
		},
		{
			// The room of one member is no room for the gang.
			name:        "only lower-priority victims are taken",
			nodes:       twoNodes,
			others:      []*corev1.Pod{running("equal", "n1", high, "3").Obj(), running("lower", "n2", low, "3").Obj()},
			minMember:   2,
			members:     members("gang", 2, "3"),
			wantMessage: "no lower-priority victims would make room",
		},
		{
			// Nothing to take and no reservation to give back: a search
			// per domain would find no room.
			name:        "no search is run when no pod has a lower priority",
			nodes:       twoNodes,
			others:      []*corev1.Pod{running("equal-1", "n1", high, "3").Obj(), running("equal-2", "n2", high, "3").Obj()},
			minMember:   2,
			members:     members("gang", 2, "3"),
			wantMessage: "preemption: no pod of lower priority to take",
			noRequests:  true,
		},
		{
			// Across racks one victim would do (b2 is free); inside one,
			// rack-b's one is cheaper than rack-a's two.
			name:        "a gang in one rack takes the fewest victims inside one rack",
			nodes:       fourInTwoRacks,
			others:      []*corev1.Pod{running("va1", "a1", low, "4").Obj(), running("va2", "a2", low, "4").Obj(), running("vb1", "b1", low, "4").Obj()},
			minMember:   2,
			members:     members("job", 2, "4"),
			inOneRack:   true,
			wantDeleted: []string{"vb1"},
			wantRack:    "rack-b",
		},
		{
			name:        "in one rack, the lowest priority goes before the fewest victims",
			nodes:       fourInTwoRacks,
			others:      []*corev1.Pod{running("va1", "a1", low, "4").Obj(), running("va2", "a2", low, "4").Obj(), running("vb1", "b1", low+1, "4").Obj()},
			minMember:   2,
			members:     members("job", 2, "4"),
			inOneRack:   true,
			wantDeleted: []string{"va1", "va2"},
			wantRack:    "rack-a",
		},
		{
			// Two victims in two racks would make room, but in no one
			// rack; the attempt keeps Placement's answer, for Gang's
			// message.
			name:       "a gang in one rack takes nothing where no rack could hold it",
			nodes:      []*corev1.Node{racked("a1", "rack-a", "4"), racked("b1", "rack-b", "4")},
			others:     []*corev1.Pod{running("va1", "a1", low, "4").Obj(), running("vb1", "b1", low, "4").Obj()},
			minMember:  2,
			members:    members("job", 2, "4"),
			inOneRack:  true,
			noRequests: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gang, _ := topology.GroupOf(tt.members[0])
			pg := podGroup(gang.Name, tt.minMember)
			if tt.inOneRack {
				pg.Annotations = map[string]string{topology.DomainRequiredAnnotation: rackLabel}
			}
			s := newSearch(t, tt.nodes, append(slices.Clone(tt.others), tt.members...), []*v1alpha1.PodGroup{pg})
			if tt.heldOnN1 {
				s.model.Rooms().Add(&groupstate.Room{Group: types.NamespacedName{Namespace: "ns", Name: "mpi"}, Role: "launcher", Node: "n1",
					Request: corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity("2")}})
			}

			// A gang in one rack that fits in none is turned away by
			// Placement's PreFilter: no node is filtered.
			run := s.postFilter
			if tt.inOneRack {
				run = s.cycle
			}
			result, status := run(t, tt.members[tt.preemptor])

			require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
			assert.Contains(t, status.Message(), tt.wantMessage)
			if tt.inOneRack {
				d, chosen := s.model.Attempts().Domain(gang)
				require.True(t, chosen, "Placement chose the attempt's rack, or that none holds the gang")
				assert.Equal(t, tt.wantRack, d.Name)
				if result != nil {
					nominated := tt.nodes[slices.IndexFunc(tt.nodes, func(n *corev1.Node) bool { return n.Name == result.NominatingInfo.NominatedNodeName })]
					assert.Equal(t, tt.wantRack, nominated.Labels[rackLabel], "the member is nominated in the gang's rack")
				}
			}
			if len(tt.wantDeleted) == 0 {
				assert.Nil(t, result)
				for _, a := range s.client.Actions() {
					assert.NotEqual(t, "delete", a.GetVerb(), "nothing is taken: %v", a)
				}
				if tt.noRequests {
					assert.Empty(t, s.client.Actions())
				}
				return
			}
			require.NotNil(t, result)
			if tt.wantNode == "" {
				assert.NotEmpty(t, result.NominatingInfo.NominatedNodeName)
			} else {
				assert.Equal(t, tt.wantNode, result.NominatingInfo.NominatedNodeName)
			}
			assert.Equal(t, tt.wantDeleted, s.deleted(t, len(tt.wantDeleted)))
		})
	}
}

func resourceQuantity(v string) *resource.Quantity {
	q := resource.MustParse(v)
	return &q
}

// TestEachMemberKeepsTheVictimsItsNodeCanSpare: three members of 3 CPUs,
// one per node of 4, each node holding a pod of 2 CPUs and a cheaper one
// of 1. Each member needs only the dearer pod of its node gone, and the
// search gives the cheaper ones back: checked only against the member on
// their own node when no member's filters read other nodes, against every
// member otherwise (a member with anti-affinity over a zone); both
// give the same back.
func TestEachMemberKeepsTheVictimsItsNodeCanSpare(t *testing.T) {
	for _, zoned := range []bool{false, true} {
		t.Run(map[bool]string{false: "filters per node", true: "anti-affinity over a zone"}[zoned], func(t *testing.T) {
			pg := podGroup("train", 3)
			var pods, members []*corev1.Pod
			var nodes []*corev1.Node
			for i := range 3 {
				name := fmt.Sprintf("n%d", i)
				n := node(name, "4")
				n.Labels[corev1.LabelTopologyZone] = "z"
				nodes = append(nodes, n)
				pods = append(pods, running("big-"+name, name, low+1, "2").Obj(), running("small-"+name, name, low, "1").Obj())
				member := gangMember("train", fmt.Sprintf("train-%d", i), "3")
				if zoned {
					member = member.PodAntiAffinityExists("no-such-label", corev1.LabelTopologyZone, st.PodAntiAffinityWithRequiredReq)
				}
				members = append(members, member.Obj())
			}
			s := newSearch(t, nodes, append(pods, members...), []*v1alpha1.PodGroup{pg})

			_, status := s.postFilter(t, members[0])
			require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
			assert.Equal(t, []string{"big-n0", "big-n1", "big-n2"}, s.deleted(t, 3))
		})
	}
}

func TestAMembersFiltersReadOnlyItsNode(t *testing.T) {
	spreadSkipped := sets.New(pluginnames.PodTopologySpread)
	tests := []struct {
		name    string
		member  *corev1.Pod
		skipped sets.Set[string]
		want    bool
	}{
		{"resources and ports only", gangMember("g", "m", "1").Obj(), spreadSkipped, true},
		{"affinity per node", gangMember("g", "m", "1").PodAffinityExists("app", corev1.LabelHostname, st.PodAffinityWithRequiredReq).Obj(), spreadSkipped, true},
		{"anti-affinity per node", gangMember("g", "m", "1").PodAntiAffinityExists("app", corev1.LabelHostname, st.PodAntiAffinityWithRequiredReq).Obj(), spreadSkipped, true},
		{"affinity over a zone", gangMember("g", "m", "1").PodAffinityExists("app", corev1.LabelTopologyZone, st.PodAffinityWithRequiredReq).Obj(), spreadSkipped, false},
		{"anti-affinity over a zone", gangMember("g", "m", "1").PodAntiAffinityExists("app", corev1.LabelTopologyZone, st.PodAntiAffinityWithRequiredReq).Obj(), spreadSkipped, false},
		{"hard spreading", gangMember("g", "m", "1").Obj(), sets.New[string](), false},
		{"a claim", gangMember("g", "m", "1").PodResourceClaims(corev1.PodResourceClaim{Name: "gpu"}).Obj(), spreadSkipped, false},
		{"a volume claim", gangMember("g", "m", "1").PVC("data").Obj(), spreadSkipped, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, readsOnlyItsNode(tt.member, tt.skipped))
		})
	}
}

func TestAVictimReachesOtherNodesByItsAntiAffinity(t *testing.T) {
	unitOf := func(pod *corev1.Pod) *unit {
		info, err := framework.NewPodInfo(pod)
		require.NoError(t, err)
		return &unit{pods: []fwk.PodInfo{info}}
	}
	assert.True(t, unitOf(running("v", "n1", low, "1").Obj()).reachesOnlyItsNodes())
	assert.True(t, unitOf(running("v", "n1", low, "1").PodAntiAffinityExists("app", corev1.LabelHostname, st.PodAntiAffinityWithRequiredReq).Obj()).reachesOnlyItsNodes())
	assert.False(t, unitOf(running("v", "n1", low, "1").PodAntiAffinityExists("app", corev1.LabelTopologyZone, st.PodAntiAffinityWithRequiredReq).Obj()).reachesOnlyItsNodes())
}
