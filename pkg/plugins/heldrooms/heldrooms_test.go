package heldrooms

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
	"github.com/muster-dev/muster/pkg/topology"
)

const ns = "team-a"

// groups is a table of what HeldRooms reads of the scheduler's groups.
type groups struct {
	rooms    *groupstate.Rooms
	admitted sets.Set[types.NamespacedName]
	// extras names the elastic groups a new member would join above min.
	extras sets.Set[string]
	// reserved names the members whose reservation Gang's Reserve counted.
	reserved   sets.Set[string]
	waiting    map[types.NamespacedName]topology.WaitingGang
	topologies map[types.NamespacedName]*topology.Topology
	podGroups  map[types.NamespacedName]*v1alpha1.PodGroup
	late       map[types.NamespacedName]group.LateMembers
	// placed counts the members bound or reserved, bound those bound.
	placed, bound map[types.NamespacedName]int32
	// boundOn is a node a bound member of the group is on.
	boundOn       map[types.NamespacedName]string
	attempts      *groupstate.Attempts
	listeners     []func(group.PodChange)
	podGroupsSeen []cache.ResourceEventHandler
}

func newGroups() *groups {
	return &groups{rooms: groupstate.NewRooms(), admitted: sets.New[types.NamespacedName](), extras: sets.New[string](), reserved: sets.New[string](),
		waiting: map[types.NamespacedName]topology.WaitingGang{}, topologies: map[types.NamespacedName]*topology.Topology{},
		podGroups: map[types.NamespacedName]*v1alpha1.PodGroup{}, late: map[types.NamespacedName]group.LateMembers{},
		placed: map[types.NamespacedName]int32{}, bound: map[types.NamespacedName]int32{}, boundOn: map[types.NamespacedName]string{},
		attempts: groupstate.NewAttempts(func(float64) {})}
}

func (g *groups) Rooms() *groupstate.Rooms                 { return g.rooms }
func (g *groups) IsAdmitted(key types.NamespacedName) bool { return g.admitted.Has(key) }
func (g *groups) IsReserved(key types.NamespacedName, uid types.UID) bool {
	return g.reserved.Has(string(uid))
}
func (g *groups) ElasticFulfillment(key types.NamespacedName, _ *v1alpha1.PodGroup) (float64, bool) {
	return 0.5, g.extras.Has(key.Name)
}
func (g *groups) WaitingForRoom() map[types.NamespacedName]topology.WaitingGang { return g.waiting }
func (g *groups) Topology(key types.NamespacedName) (*topology.Topology, error) {
	return g.topologies[key], nil
}
func (g *groups) PodGroup(key types.NamespacedName) *v1alpha1.PodGroup   { return g.podGroups[key] }
func (g *groups) LateMembers(key types.NamespacedName) group.LateMembers { return g.late[key] }
func (g *groups) LateMembersOf(key types.NamespacedName, _ *topology.Topology) group.LateMembers {
	return g.late[key]
}
func (g *groups) BoundCount(key types.NamespacedName) int32 { return g.bound[key] }
func (g *groups) BoundNode(key types.NamespacedName) (string, bool) {
	node, ok := g.boundOn[key]
	return node, ok
}
func (g *groups) Attempts() *groupstate.Attempts                   { return g.attempts }
func (g *groups) ScheduleTimeout(*v1alpha1.PodGroup) time.Duration { return time.Minute }
func (g *groups) OnPodChange(handler func(group.PodChange)) {
	g.listeners = append(g.listeners, handler)
}
func (g *groups) OnPodGroupChange(handler cache.ResourceEventHandler) {
	g.podGroupsSeen = append(g.podGroupsSeen, handler)
}
func (g *groups) Quorum(key types.NamespacedName, minMember int32, counting groupstate.Counting) (int32, bool) {
	placed := g.placed[key]
	if counting.HeldRooms {
		placed += g.rooms.Count(key, "")
	}
	return placed, placed >= minMember
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func member(group, role, name, cpu string) *corev1.Pod {
	p := st.MakePod().Namespace(ns).Name(name).UID(name).Label(topology.GroupLabel, group).Req(map[corev1.ResourceName]string{"cpu": cpu})
	if role != "" {
		p = p.Label(topology.RoleLabel, role)
	}
	return p.Obj()
}

// node is a node of cpu CPUs in pool, with the pods on it.
func node(name, pool, cpu string, pods ...*corev1.Pod) fwk.NodeInfo {
	return nodeInfo(st.MakeNode().Name(name).Label("pool", pool).Capacity(map[corev1.ResourceName]string{"cpu": cpu, "pods": "110"}).Obj(), pods...)
}

func nodeInfo(n *corev1.Node, pods ...*corev1.Pod) fwk.NodeInfo {
	info := framework.NewNodeInfo(pods...)
	info.SetNode(n)
	return info
}

func cpu(v string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
}

// recorded is a cycle state holding the record Gang's PreFilter, first in
// the profile, leaves for the pod.
func recorded(h *HeldRooms, pod *corev1.Pod) fwk.CycleState {
	return plugintest.Recorded(h.groups, pod)
}

// filter runs PreFilter, then Filter on each node, as a cycle does, and
// returns each node's status, "" for a node the pod may use.
func filter(t *testing.T, h *HeldRooms, pod *corev1.Pod, nodes ...fwk.NodeInfo) (*fwk.PreFilterResult, map[string]string) {
	t.Helper()
	state := recorded(h, pod)
	result, status := h.PreFilter(context.Background(), state, pod, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	got := map[string]string{}
	for _, n := range nodes {
		got[n.Node().Name] = h.Filter(context.Background(), state, pod, n).Message()
	}
	return result, got
}

func TestALateMemberIsPinnedToTheRoomHeldForIt(t *testing.T) {
	g := newGroups()
	g.rooms.Add(&groupstate.Room{Group: key("mpi"), Role: "launcher", Node: "n2", Request: cpu("2")})
	h := NewWithModel(klog.Background(), g, nil, testingclock.NewFakeClock(time.Time{}))

	result, got := filter(t, h, member("mpi", "launcher", "launcher", "2"), node("n1", "a", "4"), node("n2", "a", "4"))
	require.NotNil(t, result)
	assert.Equal(t, sets.New("n2"), result.NodeNames, "PreFilter names the room's node")
	assert.Equal(t, map[string]string{"n1": "the member's room is held on node n2", "n2": ""}, got,
		"a node hint that skips PreFilter's result is turned away by Filter")
}

func TestALateMemberPlacedWhereItsRoomIsNotGivesTheRoomUp(t *testing.T) {
	// Kueue's topology scheduling wrote n1 into the launcher's node
	// selector; muster held its room on n2 from its pod template.
	tests := []struct {
		name     string
		selector map[string]string
		released bool
	}{
		{"its node selector excludes the room's node", map[string]string{corev1.LabelHostname: "n1"}, true},
		{"its node selector allows the room's node", map[string]string{corev1.LabelHostname: "n2"}, false},
		{"no node selector", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroups()
			g.podGroups[key("mpi")] = &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpi"}}
			g.rooms.Add(&groupstate.Room{Group: key("mpi"), Role: "launcher", Node: "n2", Request: cpu("2")})
			recorder := events.NewFakeRecorder(10)
			activator := &plugintest.Activator{}
			h := NewWithModel(klog.Background(), g, handle{events: recorder, activator: activator}, testingclock.NewFakeClock(time.Time{}))
			turned := member("other", "", "turned", "4")
			filter(t, h, turned, hosted("n2"))
			launcher := member("mpi", "launcher", "launcher", "2")
			launcher.Spec.NodeSelector = tt.selector

			result, got := filter(t, h, launcher, hosted("n1"), hosted("n2"))
			if !tt.released {
				require.NotNil(t, result)
				assert.Equal(t, sets.New("n2"), result.NodeNames, "the member keeps its room")
				assert.NotNil(t, g.rooms.Held(key("mpi"), "launcher"))
				assert.Empty(t, recorder.Events)
				return
			}
			assert.Nil(t, result, "the member is not pinned to a node it may not run on")
			assert.Equal(t, map[string]string{"n1": "", "n2": ""}, got)
			assert.Nil(t, g.rooms.Held(key("mpi"), "launcher"), "the room is released")
			assert.Equal(t, []string{ns + "/turned"}, activator.Activated, "a pod the room kept out is woken")
			require.Len(t, recorder.Events, 1)
			event := <-recorder.Events
			assert.Contains(t, event, RoomReleasedReason)
			assert.Contains(t, event, "late member launcher may not run on node n2, where its room was held")
		})
	}
}

// hosted is a node of 4 CPUs labelled with its host name, as every node is.
func hosted(name string) fwk.NodeInfo {
	return nodeInfo(st.MakeNode().Name(name).Label(corev1.LabelHostname, name).Capacity(map[corev1.ResourceName]string{"cpu": "4", "pods": "110"}).Obj())
}

func TestARoomHeldOnANodeIsClosedToEveryOtherPod(t *testing.T) {
	g := newGroups()
	g.rooms.Add(&groupstate.Room{Group: key("mpi"), Role: "launcher", Node: "n1", Request: cpu("3")})
	h := NewWithModel(klog.Background(), g, nil, testingclock.NewFakeClock(time.Time{}))
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"a pod of no group that fits only in the held room", st.MakePod().Namespace(ns).Name("plain").Req(map[corev1.ResourceName]string{"cpu": "2"}).Obj(),
			"room on the node is held for the members [team-a/mpi] will create later"},
		{"a pod of no group that fits beside the held room", st.MakePod().Namespace(ns).Name("small").Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj(), ""},
		{"a member of the same gang in another role", member("mpi", "worker", "worker-0", "2"),
			"room on the node is held for the members [team-a/mpi] will create later"},
		{"a member of another gang in the same role", member("other", "launcher", "other-launcher", "2"),
			"room on the node is held for the members [team-a/mpi] will create later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := filter(t, h, tt.pod, node("n1", "a", "4"))
			assert.Equal(t, tt.want, got["n1"])
		})
	}
}

func TestAMemberAboveAnElasticMinLeavesRoomToAGangWaitingForItsMin(t *testing.T) {
	low, high := int32(1), int32(5)
	waitingMember := func(group, name string, priority int32, selector string) *corev1.Pod {
		p := st.MakePod().Namespace(ns).Name(name).UID(name).Label(topology.GroupLabel, group).Priority(priority).
			Req(map[corev1.ResourceName]string{"cpu": "3"})
		if selector != "" {
			p = p.NodeSelector(map[string]string{"pool": selector})
		}
		return p.Obj()
	}
	tests := []struct {
		name    string
		waiting map[types.NamespacedName]topology.WaitingGang
		extra   bool
		want    map[string]string
	}{
		{
			name:    "a gang of the same priority keeps every node its member would fit empty",
			waiting: map[types.NamespacedName]topology.WaitingGang{key("rigid"): {Lacking: []*corev1.Pod{waitingMember("rigid", "r0", low, "")}}},
			extra:   true,
			want: map[string]string{
				"n1":   "room on the node is kept for gang team-a/rigid, which waits for its min: members above an elastic group's min take only room no gang needs",
				"n2":   "room on the node is kept for gang team-a/rigid, which waits for its min: members above an elastic group's min take only room no gang needs",
				"tiny": ""},
		},
		{
			name:    "its node selector keeps only the nodes it may run on",
			waiting: map[types.NamespacedName]topology.WaitingGang{key("rigid"): {Lacking: []*corev1.Pod{waitingMember("rigid", "r0", low, "b")}}},
			extra:   true,
			want: map[string]string{"n1": "",
				"n2":   "room on the node is kept for gang team-a/rigid, which waits for its min: members above an elastic group's min take only room no gang needs",
				"tiny": ""},
		},
		{
			name:    "a gang of lower priority keeps nothing from it",
			waiting: map[types.NamespacedName]topology.WaitingGang{key("rigid"): {Lacking: []*corev1.Pod{waitingMember("rigid", "r0", low-1, "")}}},
			extra:   true,
			want:    map[string]string{"n1": "", "n2": "", "tiny": ""},
		},
		{
			name:    "a member up to the min is kept from nothing",
			waiting: map[types.NamespacedName]topology.WaitingGang{key("rigid"): {Lacking: []*corev1.Pod{waitingMember("rigid", "r0", high, "")}}},
			extra:   false,
			want:    map[string]string{"n1": "", "n2": "", "tiny": ""},
		},
		{
			name: "a gang the nodes could not hold, however empty, keeps none",
			waiting: map[types.NamespacedName]topology.WaitingGang{key("rigid"): {Lacking: []*corev1.Pod{
				waitingMember("rigid", "r0", low, ""), waitingMember("rigid", "r1", low, ""), waitingMember("rigid", "r2", low, ""), waitingMember("rigid", "r3", low, "")}}},
			extra: true,
			want:  map[string]string{"n1": "", "n2": "", "tiny": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroups()
			g.waiting = tt.waiting
			extra := st.MakePod().Namespace(ns).Name("elastic-5").UID("elastic-5").Label(topology.GroupLabel, "elastic").Priority(low).
				Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj()
			if tt.extra {
				g.extras.Insert("elastic") // the group extra is a member of
			}
			_, got := filter(t, NewWithModel(klog.Background(), g, nil, testingclock.NewFakeClock(time.Time{})), extra, node("n1", "a", "4"), node("n2", "b", "4"), node("tiny", "b", "2"))
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReserveHandsTheRoomToItsMemberAndUnreserveGivesItBackToAnAdmittedGang(t *testing.T) {
	for _, admitted := range []bool{true, false} {
		g := newGroups()
		g.rooms.Add(&groupstate.Room{Group: key("mpi"), Role: "launcher", Node: "n1", Request: cpu("2")})
		if admitted {
			g.admitted.Insert(key("mpi"))
		}
		h := NewWithModel(klog.Background(), g, nil, testingclock.NewFakeClock(time.Time{}))
		launcher := member("mpi", "launcher", "launcher", "2")
		state := recorded(h, launcher)
		require.True(t, h.Reserve(context.Background(), state, launcher, "n1").IsSuccess())
		assert.Zero(t, g.rooms.Count(key("mpi"), ""), "the member took its room")

		h.Unreserve(context.Background(), state, launcher, "n1")
		if admitted {
			assert.Equal(t, int32(1), g.rooms.Count(key("mpi"), "launcher"), "the member retries into its room")
		} else {
			assert.Zero(t, g.rooms.Count(key("mpi"), ""), "a gang torn down keeps no room")
		}
	}
}

func TestReserveOfAPodWithNoRoomHoldsNothingForUnreserveToGiveBack(t *testing.T) {
	g := newGroups()
	g.admitted.Insert(key("mpi"))
	h := NewWithModel(klog.Background(), g, nil, testingclock.NewFakeClock(time.Time{}))
	worker := member("mpi", "worker", "worker-0", "1")
	state := recorded(h, worker)
	require.True(t, h.Reserve(context.Background(), state, worker, "n1").IsSuccess())
	h.Unreserve(context.Background(), state, worker, "n1")
	assert.Zero(t, g.rooms.Count(key("mpi"), ""))
}

func TestSignPod(t *testing.T) {
	g := newGroups()
	late, errs := topology.Parse(map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
		topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"}}}`,
	})
	require.Empty(t, errs)
	elastic, errs := topology.Parse(map[string]string{topology.RolesAnnotation: "worker=4", topology.ElasticAnnotation: "2:4"})
	require.Empty(t, errs)
	rigid, errs := topology.Parse(map[string]string{topology.RolesAnnotation: "worker=4"})
	require.Empty(t, errs)
	g.topologies[key("mpi")], g.topologies[key("elastic")], g.topologies[key("rigid")] = late, elastic, rigid
	h := NewWithModel(klog.Background(), g, nil, testingclock.NewFakeClock(time.Time{}))
	tests := []struct {
		name     string
		pod      *corev1.Pod
		want     string
		unsigned bool
	}{
		{name: "a pod of no group", pod: st.MakePod().Namespace(ns).Name("plain").Obj(), want: ""},
		{name: "a member of a rigid gang signs as a pod of no group", pod: member("rigid", "worker", "w", "1"), want: ""},
		{name: "a member of an elastic group signs by its group", pod: member("elastic", "worker", "e", "1"), want: "team-a/elastic"},
		{name: "a member whose group cannot be read yet signs by group and role", pod: member("coming", "worker", "c", "1"), want: "team-a/coming/worker"},
		{name: "a late member is not signed", pod: member("mpi", "launcher", "l", "1"), unsigned: true},
		{name: "a member of the late member's gang in another role", pod: member("mpi", "worker", "w0", "1"), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fragments, status := h.SignPod(context.Background(), tt.pod)
			if tt.unsigned {
				assert.Equal(t, fwk.Unschedulable, status.Code())
				return
			}
			require.True(t, status.IsSuccess())
			assert.Equal(t, []fwk.SignFragment{{Key: PlacementSignerName, Value: tt.want}}, fragments)
		})
	}
}

// TestHeldRoomsReleasesAGroupsRoomsWhenToldTheyEnd: HeldRooms alone
// releases rooms; a failed attempt or a deleted PodGroup ends them
// (groupstate.Rooms.End), and it releases that group's, whatever the reason,
// and no other's.
func TestHeldRoomsReleasesAGroupsRoomsWhenToldTheyEnd(t *testing.T) {
	for _, why := range []groupstate.RoomsEnd{groupstate.AttemptEnded, groupstate.PodGroupDeleted, groupstate.LateMembersMissing, groupstate.GangGone} {
		t.Run(string(why), func(t *testing.T) {
			g := newGroups()
			g.rooms.Add(&groupstate.Room{Group: key("mpi"), Role: "launcher", Node: "n1", Request: cpu("1")})
			g.rooms.Add(&groupstate.Room{Group: key("other"), Role: "launcher", Node: "n1", Request: cpu("1")})
			NewWithModel(klog.Background(), g, nil, testingclock.NewFakeClock(time.Time{}))

			g.rooms.End(key("mpi"), why)

			assert.Zero(t, g.rooms.Count(key("mpi"), ""), "the group's rooms are released")
			assert.Equal(t, int32(1), g.rooms.Count(key("other"), ""), "another group's are not")
		})
	}
}
