package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	schedulingv1beta1listers "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
	"github.com/muster-dev/muster/pkg/topology"
)

// TestPodGroupReadsBothSources: a group is found in either API, in the one
// shape, and scheduler-plugins' PodGroup is the group when both APIs hold
// one of its name.
func TestPodGroupReadsBothSources(t *testing.T) {
	ours := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	upstream := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, ours.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "both"}, Spec: v1alpha1.PodGroupSpec{MinMember: 2}}))
	for _, name := range []string{"both", "train"} {
		require.NoError(t, upstream.Add(&schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 7}}},
		}))
	}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc})
	m := NewModel(ours, pods)

	assert.Nil(t, m.PodGroup(types.NamespacedName{Namespace: "ns", Name: "train"}), "the upstream source is off where the API is not served")

	m.upstream = schedulingv1beta1listers.NewPodGroupLister(upstream)
	train := m.PodGroup(types.NamespacedName{Namespace: "ns", Name: "train"})
	require.NotNil(t, train)
	assert.True(t, topology.IsUpstream(train))
	assert.Equal(t, int32(7), train.Spec.MinMember)
	both := m.PodGroup(types.NamespacedName{Namespace: "ns", Name: "both"})
	require.NotNil(t, both)
	assert.False(t, topology.IsUpstream(both))
	assert.Equal(t, int32(2), both.Spec.MinMember)
	assert.Nil(t, m.PodGroup(types.NamespacedName{Namespace: "ns", Name: "none"}))

	assert.Equal(t, "train", m.UpstreamPodGroup(types.NamespacedName{Namespace: "ns", Name: "train"}).Name, "an upstream group's own PodGroup is read for its priority and disruption mode")
	assert.Nil(t, m.UpstreamPodGroup(types.NamespacedName{Namespace: "ns", Name: "both"}), "where scheduler-plugins' PodGroup is the group, the upstream one of its name is not")
}

// TestPodGroupsOfGivesTheGroupAndThePodGroupThePodNames: the cycle's
// record holds the group's PodGroup in muster's shape and the
// scheduling.k8s.io PodGroup the pod names, whose claims are reserved for
// it; the same object where the group is that PodGroup.
func TestPodGroupsOfGivesTheGroupAndThePodGroupThePodNames(t *testing.T) {
	ours := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	upstream := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, ours.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "labeled"}, Spec: v1alpha1.PodGroupSpec{MinMember: 2}}))
	for _, name := range []string{"train", "claims"} {
		require.NoError(t, upstream.Add(&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}))
	}
	m := NewModel(ours, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc}))
	m.upstream = schedulingv1beta1listers.NewPodGroupLister(upstream)
	pod := func(label, named string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		if label != "" {
			p.Labels = map[string]string{topology.GroupLabel: label}
		}
		if named != "" {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(named)}
		}
		return p
	}
	tests := []struct {
		name                 string
		pod                  *corev1.Pod
		wantGroup, wantNamed string
	}{
		{"a scheduler-plugins group's member names no PodGroup of upstream's", pod("labeled", ""), "labeled", ""},
		{"an upstream group is the PodGroup its member names", pod("", "train"), "train", "train"},
		{"a labeled member naming an upstream PodGroup for its claims gets both", pod("labeled", "claims"), "labeled", "claims"},
		{"a member naming a PodGroup still to come gets neither", pod("", "later"), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, _ := topology.GroupOf(tt.pod)
			pg, named := m.PodGroupsOf(key, tt.pod)
			if tt.wantGroup == "" {
				assert.Nil(t, pg)
			} else if assert.NotNil(t, pg) {
				assert.Equal(t, tt.wantGroup, pg.Name)
			}
			if tt.wantNamed == "" {
				assert.Nil(t, named)
			} else if assert.NotNil(t, named) {
				assert.Equal(t, tt.wantNamed, named.Name)
				assert.Equal(t, m.UpstreamPodGroupOf(tt.pod), named, "the record's PodGroup is the one SharedClaims read before")
			}
		})
	}
}

// TestHandlersSeeOneShape: a handler of PodGroup events gets upstream
// PodGroups, tombstones too, as scheduler-plugins' PodGroups.
func TestHandlersSeeOneShape(t *testing.T) {
	var seen []any
	handler := inOneShape(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen = append(seen, obj) },
		UpdateFunc: func(_, obj any) { seen = append(seen, obj) },
		DeleteFunc: func(obj any) { seen = append(seen, obj) },
	})
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}}
	handler.OnAdd(pg, false)
	handler.OnUpdate(pg, pg)
	handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/train", Obj: pg})
	require.Len(t, seen, 3)
	for _, obj := range seen[:2] {
		assert.IsType(t, &v1alpha1.PodGroup{}, obj)
	}
	key, ok := KeyOf(seen[2])
	assert.True(t, ok)
	assert.Equal(t, types.NamespacedName{Namespace: "ns", Name: "train"}, key)
}

// The condition reads as kube-scheduler's PodGroup cycle writes it, and
// never goes from True back to False.
func TestInitiallyScheduled(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", Generation: 3}}

	rejected, changed := initiallyScheduled(pg, false, "0/4 nodes are available")
	require.True(t, changed)
	c := apimeta.FindStatusCondition(rejected.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, schedulingv1beta1.PodGroupReasonUnschedulable, c.Reason)
	assert.Equal(t, "0/4 nodes are available", c.Message)
	assert.Equal(t, int64(3), c.ObservedGeneration)

	pg.Status = *rejected
	_, changed = initiallyScheduled(pg, false, "0/4 nodes are available")
	assert.False(t, changed, "the same failure again writes nothing")

	admitted, changed := initiallyScheduled(pg, true, "4/4 members placed")
	require.True(t, changed)
	c = apimeta.FindStatusCondition(admitted.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "Scheduled", c.Reason)

	pg.Status = *admitted
	_, changed = initiallyScheduled(pg, false, "a later attempt failed")
	assert.False(t, changed, "once True, never False again")
	_, changed = initiallyScheduled(pg, true, "5/4 members placed")
	assert.False(t, changed, "a later admission writes nothing")
}

// Until the model's pod handler has seen the informer's initial list, a
// group's bound members are counted from the informer's store: after a
// restart, the queue may sort a partly bound gang's members before the
// handler has caught up.
func TestBoundMembersAreCountedFromTheStoreUntilTheHandlerCaughtUp(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc})
	m := NewModel(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), pods, topology.SchedulerName)
	key := types.NamespacedName{Namespace: "ns", Name: "late"}
	for i, node := range []string{"n1", "n2", ""} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("late-%d", i), UID: types.UID(fmt.Sprintf("u%d", i)),
				Labels: map[string]string{topology.GroupLabel: "late"}},
			Spec: corev1.PodSpec{NodeName: node, SchedulerName: topology.SchedulerName},
		}
		// In the store, not yet observed by the model's handler.
		require.NoError(t, pods.Add(pod))
	}
	caughtUp := false
	m.observed = func() bool { return caughtUp }
	assert.Equal(t, int32(2), m.BoundCount(key), "counted from the store")

	caughtUp = true
	gone, _, _ := pods.GetByKey("ns/late-0")
	require.NoError(t, pods.Delete(gone))
	m.PodEvents().OnDelete(gone)
	assert.Equal(t, int32(1), m.BoundCount(key), "the handler's count, once it has the initial list")
}

// testGroup is a model of one scheduler-plugins PodGroup, ns/train of
// minMember min, whose pods the test adds with add.
type testGroup struct {
	m         *Model
	podGroups cache.Indexer
	pods      cache.Indexer
	pg        *v1alpha1.PodGroup
	key       types.NamespacedName
}

func newTestGroup(t *testing.T, min int32) *testGroup {
	g := &testGroup{
		podGroups: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		pods:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc}),
		pg:        &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "first"}, Spec: v1alpha1.PodGroupSpec{MinMember: min}},
		key:       types.NamespacedName{Namespace: "ns", Name: "train"},
	}
	require.NoError(t, g.podGroups.Add(g.pg))
	g.m = NewModel(g.podGroups, g.pods, topology.SchedulerName)
	return g
}

// add adds a member of the group, bound to node unless it is "", for
// scheduler, built for the PodGroup of UID builtFor unless it is "".
func (g *testGroup) add(t *testing.T, name, node, scheduler, builtFor string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{topology.GroupLabel: "train"}},
		Spec:       corev1.PodSpec{NodeName: node, SchedulerName: scheduler},
	}
	if builtFor != "" {
		pod.Annotations = map[string]string{topology.BuiltForAnnotation: builtFor}
	}
	require.NoError(t, g.pods.Add(pod))
	g.m.Take(Added(pod))
	return pod
}

func (g *testGroup) setPodGroup(t *testing.T, change func(*v1alpha1.PodGroup)) {
	pg := g.pg.DeepCopy()
	change(pg)
	require.NoError(t, g.podGroups.Update(pg))
	g.pg = pg
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, pod := range pods {
		out = append(out, pod.Name)
	}
	return out
}

// TestMembersAreTheGroupsSchedulersPodsBuiltForItsPodGroup: a pod of
// another scheduler, and one built for an earlier PodGroup of the name,
// name the group but are not among its members, nor counted bound.
func TestMembersAreTheGroupsSchedulersPodsBuiltForItsPodGroup(t *testing.T) {
	g := newTestGroup(t, 2)
	g.add(t, "ours", "n1", topology.SchedulerName, "first")
	g.add(t, "gang-only", "", topology.SchedulerName, "")
	foreign := g.add(t, "foreign", "n1", corev1.DefaultSchedulerName, "")
	stale := g.add(t, "stale", "n1", topology.SchedulerName, "earlier")

	members, err := g.m.Members(g.key)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"ours", "gang-only"}, names(members))
	assert.Equal(t, int32(1), g.m.BoundCount(g.key), "only muster's member built for this PodGroup is counted bound")
	assert.Contains(t, g.m.NotAMember(foreign, g.pg), "spec.schedulerName")
	assert.Contains(t, g.m.NotAMember(stale, g.pg), "built for an earlier PodGroup")
}

// TestAGangThatHadItsQuorumKeepsIt: once minMember members were bound, the
// gang had its quorum, through a raised minMember and the loss of a
// member; a PodGroup made again under the name has not.
func TestAGangThatHadItsQuorumKeepsIt(t *testing.T) {
	g := newTestGroup(t, 2)
	g.add(t, "a", "n1", topology.SchedulerName, "")
	assert.False(t, g.m.HadQuorum(g.key, g.pg), "1 of 2 bound")
	g.add(t, "b", "n1", topology.SchedulerName, "")
	assert.True(t, g.m.HadQuorum(g.key, g.pg), "2 of 2 bound")

	g.setPodGroup(t, func(pg *v1alpha1.PodGroup) { pg.Spec.MinMember = 3 })
	g.add(t, "c", "", topology.SchedulerName, "")
	assert.True(t, g.m.HadQuorum(g.key, g.pg), "minMember raised to 3: the gang still had its quorum")

	g.m.Take(Deleted(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "b", Labels: map[string]string{topology.GroupLabel: "train"}}}))
	assert.True(t, g.m.HadQuorum(g.key, g.pg), "a member gone: the gang still had its quorum")

	g.m.podGroupEvents().OnDelete(g.pg)
	g.setPodGroup(t, func(pg *v1alpha1.PodGroup) { pg.UID = "second" })
	assert.False(t, g.m.HadQuorum(g.key, g.pg), "a PodGroup made again under the name starts anew")
}

// TestAnUpstreamGangInitiallyScheduledHadItsQuorum: upstream's terminal
// PodGroupInitiallyScheduled condition says so for a scheduler that never
// saw the gang bound, as after a restart.
func TestAnUpstreamGangInitiallyScheduledHadItsQuorum(t *testing.T) {
	upstream := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "up", UID: "up"},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
	}
	require.NoError(t, upstream.Add(pg))
	m := NewModel(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc}), topology.SchedulerName)
	m.upstream = schedulingv1beta1listers.NewPodGroupLister(upstream)
	key := types.NamespacedName{Namespace: "ns", Name: "up"}
	assert.False(t, m.HadQuorum(key, topology.FromUpstream(pg)))

	scheduled := pg.DeepCopy()
	apimeta.SetStatusCondition(&scheduled.Status.Conditions, metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"})
	require.NoError(t, upstream.Update(scheduled))
	assert.True(t, m.HadQuorum(key, topology.FromUpstream(scheduled)))
}

// TestAPodGroupCreatedOrChangedWakesItsPendingMembers: the model's one
// PodGroup watch moves a group's pending members back to the queue when
// its PodGroup is created, or its spec or muster annotations change; a
// status write or another annotation wakes nobody, nor do bound members
// or other groups' pods.
func TestAPodGroupCreatedOrChangedWakesItsPendingMembers(t *testing.T) {
	podGroup := func(minMember int32, phase v1alpha1.PodGroupPhase, annotations map[string]string) *v1alpha1.PodGroup {
		return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job", Annotations: annotations},
			Spec: v1alpha1.PodGroupSpec{MinMember: minMember}, Status: v1alpha1.PodGroupStatus{Phase: phase}}
	}
	member := func(group, name, node string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{topology.GroupLabel: group}}, Spec: corev1.PodSpec{SchedulerName: topology.SchedulerName, NodeName: node}}
		return pod
	}
	before := podGroup(3, v1alpha1.PodGroupPending, map[string]string{"team": "a"})
	tests := []struct {
		name        string
		old, pg     *v1alpha1.PodGroup
		wantWakened bool
	}{
		{"created", nil, before, true},
		{"a status write", before, podGroup(3, v1alpha1.PodGroupScheduling, map[string]string{"team": "a"}), false},
		{"another annotation", before, podGroup(3, v1alpha1.PodGroupPending, map[string]string{"team": "b"}), false},
		{"a lower minMember", before, podGroup(2, v1alpha1.PodGroupPending, map[string]string{"team": "a"}), true},
		{"a muster annotation", before, podGroup(3, v1alpha1.PodGroupPending, map[string]string{"team": "a", "muster.dev/start-after": "Running"}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			podGroups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			require.NoError(t, podGroups.Add(tt.pg))
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc})
			for _, pod := range []*corev1.Pod{member("job", "p0", ""), member("job", "p1", "node-1"), member("other", "o0", "")} {
				require.NoError(t, pods.Add(pod))
			}
			m := NewModel(podGroups, pods, topology.SchedulerName)
			activator := &plugintest.Activator{}
			m.activator = activator
			if tt.old == nil {
				m.podGroupEvents().OnAdd(tt.pg, false)
			} else {
				m.podGroupEvents().OnUpdate(tt.old, tt.pg)
			}
			if tt.wantWakened {
				assert.Equal(t, []string{"ns/p0"}, activator.Activated)
			} else {
				assert.Empty(t, activator.Activated)
			}
		})
	}
}

// TestAnAttemptHoldingADomainPromisesItTheMembersItHasYetToPlace: what
// another gang's trial must leave to it.
func TestAnAttemptHoldingADomainPromisesItTheMembersItHasYetToPlace(t *testing.T) {
	g := newTestGroup(t, 4)
	g.add(t, "w0", "n1", topology.SchedulerName, "")
	for _, name := range []string{"w1", "w2", "w3", "w4"} {
		g.add(t, name, "", topology.SchedulerName, "")
	}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	attempts := g.m.Attempts()
	attempts.Begin(g.key)
	attempts.ChooseDomain(g.key, groupstate.Domain{Name: "rack-a", Nodes: sets.New("n1", "n2")})
	assert.Empty(t, g.m.Promises(other), "no reservation held yet: nothing is promised")

	attempts.Reserve(g.key, "w2")
	promises := g.m.Promises(other)
	require.Len(t, promises, 1)
	assert.Equal(t, []string{"w1", "w3"}, names(promises[0].Members), "minMember 4 less one bound and one reserved, first by name")
	assert.Equal(t, sets.New("n1", "n2"), promises[0].Nodes)
	assert.Empty(t, g.m.Promises(g.key), "a gang's own attempt promises it nothing")

	attempts.Admit(g.key, time.Now())
	assert.Empty(t, g.m.Promises(other), "an admitted gang holds what it needs")
}

// TestATopologyIsParsedAgainOnlyWhenWhatItDependsOnChanges: the same
// PodGroup object, or a new one with the same UID, name and muster
// annotations (a status write), reads the topology already parsed; a
// changed muster annotation is parsed again.
func TestATopologyIsParsedAgainOnlyWhenWhatItDependsOnChanges(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "train"}
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "pg-1", ResourceVersion: "1",
			Annotations: map[string]string{topology.DomainRequiredAnnotation: topology.RackLabel}},
		Spec: v1alpha1.PodGroupSpec{MinMember: 2},
	}
	m := NewModel(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc}))

	first, err := m.TopologyOf(key, pg)
	require.NoError(t, err)
	require.NotNil(t, first)
	again, err := m.TopologyOf(key, pg)
	require.NoError(t, err)
	assert.Same(t, first, again, "the same object is not parsed again")

	statusWrite := pg.DeepCopy()
	statusWrite.ResourceVersion = "2"
	statusWrite.Status.Running = 2
	afterStatus, err := m.TopologyOf(key, statusWrite)
	require.NoError(t, err)
	assert.Same(t, first, afterStatus, "a status write changes nothing the topology depends on")

	moved := statusWrite.DeepCopy()
	moved.ResourceVersion = "3"
	moved.Annotations[topology.DomainRequiredAnnotation] = topology.BlockLabel
	afterMove, err := m.TopologyOf(key, moved)
	require.NoError(t, err)
	assert.NotSame(t, first, afterMove, "a changed muster annotation is parsed again")
	assert.NotEqual(t, first, afterMove)

	back, err := m.TopologyOf(key, statusWrite)
	require.NoError(t, err)
	assert.Equal(t, first, back, "an object read before the change is parsed again from what it holds, not taken for the last one parsed")
}

// TestAGangWhoseQuorumIsBoundIsRecordedOnItsPodGroupOnce: the model
// records on a scheduler-plugins PodGroup that minMember of its members
// were bound at once, once, and never while fewer are; HadQuorum reads the
// record with no member bound, as a restarted scheduler does before it has
// seen them.
func TestAGangWhoseQuorumIsBoundIsRecordedOnItsPodGroupOnce(t *testing.T) {
	tests := []struct {
		name      string
		recorded  bool
		bound     int
		wantPatch bool
	}{
		{name: "its quorum bound: recorded", bound: 3, wantPatch: true},
		{name: "fewer bound, however many reserved: nothing written", bound: 2},
		{name: "recorded before: not written again", recorded: true, bound: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "pg-uid"}, Spec: v1alpha1.PodGroupSpec{MinMember: 3}}
			if tt.recorded {
				pg.Annotations = map[string]string{topology.QuorumReachedAnnotation: "2026-12-06T05:00:00Z"}
			}
			groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			require.NoError(t, groups.Add(pg))
			m := NewModel(groups, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc}), topology.SchedulerName)
			client := schedulingfake.NewSimpleClientset(pg)
			m.podGroupClient = client
			key := types.NamespacedName{Namespace: "ns", Name: "train"}
			assert.Equal(t, tt.recorded, m.HadQuorum(key, pg), "with no member bound, the record alone says")

			for i := range tt.bound {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("train-%d", i), UID: types.UID(fmt.Sprintf("train-%d", i)), Labels: map[string]string{topology.GroupLabel: "train"}},
					Spec:       corev1.PodSpec{SchedulerName: topology.SchedulerName, NodeName: "node-1"},
				}
				m.Take(Added(pod))
			}

			if !tt.wantPatch {
				// Decided before any write is sent.
				assert.Empty(t, client.Actions())
				return
			}
			require.Eventually(t, func() bool { return len(client.Actions()) == 1 }, 5*time.Second, 10*time.Millisecond)
			written, err := client.SchedulingV1alpha1().PodGroups("ns").Get(context.Background(), "train", metav1.GetOptions{})
			require.NoError(t, err)
			_, err = time.Parse(time.RFC3339, written.Annotations[topology.QuorumReachedAnnotation])
			assert.NoError(t, err, "the record is the time: %v", written.Annotations)
			assert.True(t, m.HadQuorum(key, written), "the record read back")
		})
	}
}
