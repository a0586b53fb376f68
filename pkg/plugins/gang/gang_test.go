package gang

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/backend/heap"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/heldrooms"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
	"github.com/muster-dev/muster/pkg/plugins/internal/stranded"
	"github.com/muster-dev/muster/pkg/topology"
)

const ns = "team-a"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fixture struct {
	ctx       context.Context
	fw        framework.Framework
	gang      *Gang
	held      *heldrooms.HeldRooms
	model     *group.Model
	pods      cache.Indexer
	podGroups cache.Indexer
	clock     *testingclock.FakeClock
	events    *events.FakeRecorder
	activator *plugintest.Activator
	client    *fake.Clientset
}

// boundPods are the pods a snapshot holds: those on a node.
func boundPods(pods []*corev1.Pod) []*corev1.Pod {
	var bound []*corev1.Pod
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			bound = append(bound, pod)
		}
	}
	return bound
}

// nodes are the fixture's nodes: node-1 and node-2, each with 4 CPUs.
var nodes = []*corev1.Node{
	st.MakeNode().Name("node-1").Capacity(map[corev1.ResourceName]string{"cpu": "4", "pods": "110"}).Obj(),
	st.MakeNode().Name("node-2").Label("pool", "cpu").Capacity(map[corev1.ResourceName]string{"cpu": "4", "pods": "110"}).Obj(),
}

func newFixture(t *testing.T, args Args, podGroups []*v1alpha1.PodGroup, pods []*corev1.Pod) *fixture {
	t.Helper()
	return newFixtureOn(t, nodes, args, podGroups, pods)
}

// newFixtureOn is newFixture on other nodes than the fixture's.
func newFixtureOn(t *testing.T, nodes []*corev1.Node, args Args, podGroups []*v1alpha1.PodGroup, pods []*corev1.Pod) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		ctx:       ctx,
		pods:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{group.IndexName: group.IndexFunc}),
		podGroups: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		clock:     testingclock.NewFakeClock(epoch),
		events:    events.NewFakeRecorder(100),
		activator: &plugintest.Activator{},
	}
	for _, pg := range podGroups {
		require.NoError(t, f.podGroups.Add(pg))
	}
	for _, pod := range pods {
		require.NoError(t, f.pods.Add(pod))
	}
	if args.BackoffSeconds == nil {
		args.BackoffSeconds = ptr.To[int64](defaultBackoffSeconds)
	}
	if args.PermitTimeoutSeconds == 0 {
		args.PermitTimeoutSeconds = defaultPermitTimeoutSeconds
	}
	if args.MaxConcurrentBinds == 0 {
		args.MaxConcurrentBinds = defaultMaxConcurrentBinds
	}
	model := group.NewModel(f.podGroups, f.pods, topology.SchedulerName)
	factory := func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		f.gang = newGang(h, args, model, f.clock)
		stranded.New(klog.Background(), h, model, f.clock, reportEvicted)
		// The evictor hears of the members bound before it, as a
		// scheduler's informer lists them at its start.
		for _, pod := range pods {
			model.Take(group.Added(pod))
		}
		return f.gang, nil
	}
	f.model = model
	heldFactory := func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		f.held = heldrooms.NewWithModel(klog.Background(), model, h, f.clock)
		return f.held, nil
	}
	f.client = fake.NewClientset()
	for _, pod := range pods {
		_, err := f.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterPluginAsExtensions(Name, factory, "QueueSort", "PreFilter", "Reserve", "Permit", "PreBind", "PostBind"),
		tf.RegisterPluginAsExtensions(heldrooms.Name, heldFactory, "PreFilter", "Filter", "Reserve"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "muster-scheduler",
		frameworkruntime.WithEventRecorder(f.events),
		frameworkruntime.WithPodActivator(f.activator),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithClientSet(f.client),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(boundPods(pods), nodes)),
	)
	require.NoError(t, err)
	f.fw = fw
	return f
}

// podGroupWrapper builds PodGroups in the style of the scheduler's st
// wrappers, which have none for this CRD.
type podGroupWrapper struct{ v1alpha1.PodGroup }

func podGroup(name string, minMember int32) *podGroupWrapper {
	pg := &podGroupWrapper{}
	pg.Namespace, pg.Name, pg.UID = ns, name, types.UID(name)
	pg.CreationTimestamp = metav1.NewTime(epoch)
	pg.Spec.MinMember = minMember
	return pg
}

func (p *podGroupWrapper) Time(t time.Time) *podGroupWrapper {
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

func (p *podGroupWrapper) MinResources(resources map[corev1.ResourceName]string) *podGroupWrapper {
	p.Spec.MinResources = corev1.ResourceList{}
	for name, value := range resources {
		p.Spec.MinResources[name] = resource.MustParse(value)
	}
	return p
}

func (p *podGroupWrapper) ScheduleTimeoutSeconds(s int32) *podGroupWrapper {
	p.Spec.ScheduleTimeoutSeconds = &s
	return p
}

func (p *podGroupWrapper) Elastic(roles, elastic string) *podGroupWrapper {
	p.Annotations = map[string]string{topology.RolesAnnotation: roles, topology.ElasticAnnotation: elastic}
	return p
}

func (p *podGroupWrapper) Obj() *v1alpha1.PodGroup { return &p.PodGroup }

func member(group, name string) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(name).UID(name).SchedulerName(topology.SchedulerName).Label(topology.GroupLabel, group)
}

// reserveAndPermit runs a member through Reserve and Permit as the
// scheduling cycle does.
func (f *fixture) reserveAndPermit(t *testing.T, pod *corev1.Pod) *fwk.Status {
	t.Helper()
	return f.reserveAndPermitIn(t, framework.NewCycleState(), pod)
}

// reserveAndPermitIn is reserveAndPermit in the member's own cycle state,
// which its binding cycle reads on.
func (f *fixture) reserveAndPermitIn(t *testing.T, state fwk.CycleState, pod *corev1.Pod) *fwk.Status {
	t.Helper()
	if _, err := groupstate.CycleOf(state); err != nil {
		plugintest.Record(state, f.model, pod)
	}
	require.True(t, f.fw.RunReservePluginsReserve(f.ctx, state, pod, "node-1").IsSuccess())
	return plugintest.Permit(f.ctx, f.fw, state, pod, "node-1")
}

// recorded is a cycle state holding the record Gang's PreFilter leaves for
// the pod, a member whose gang's attempt it entered.
func (f *fixture) recorded(pod *corev1.Pod) fwk.CycleState {
	return plugintest.Recorded(f.model, pod)
}

// outcome is what WaitOnPermit returns for a member that waited.
func (f *fixture) outcome(pod *corev1.Pod) *fwk.Status {
	return f.fw.WaitOnPermit(f.ctx, pod)
}

func (f *fixture) drainEvents() []string {
	var got []string
	for {
		select {
		case e := <-f.events.Events:
			got = append(got, e)
		default:
			return got
		}
	}
}

// TestPreEnqueueRefusesAnInvalidTopology: a group whose PodGroup's
// topology is invalid (here its launch order has a cycle) is never queued,
// so that it is never scheduled half right; the message says what is
// wrong.
func TestPreEnqueueRefusesAnInvalidTopology(t *testing.T) {
	pg := podGroup("job", 1).Obj()
	pg.Annotations = map[string]string{topology.RolesAnnotation: "a=1,b=1", topology.LaunchOrderAnnotation: "a>b>a"}
	pod := member("job", "a0").Label(topology.RoleLabel, "a").Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, []*corev1.Pod{pod})
	status := f.gang.PreEnqueue(f.ctx, pod)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), "the order has a cycle, a>b>a")
	assert.Nil(t, f.gang.PreEnqueue(f.ctx, st.MakePod().Namespace(ns).Name("plain").Obj()))
}

func TestPreEnqueue(t *testing.T) {
	group := types.NamespacedName{Namespace: ns, Name: "job"}
	tests := []struct {
		name      string
		podGroups []*v1alpha1.PodGroup
		pods      []*corev1.Pod
		pod       *corev1.Pod
		want      *fwk.Status
	}{
		{
			name: "a pod without a group is not the plugin's business",
			pod:  st.MakePod().Namespace(ns).Name("plain").Obj(),
		},
		{
			name: "the PodGroup does not exist",
			pod:  member("job", "p0").Obj(),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, topology.WaitingForPodGroupMessage(group, topology.GroupLabelField)),
		},
		{
			name:      "fewer active pods than minMember",
			podGroups: []*v1alpha1.PodGroup{podGroup("job", 3).Obj()},
			pods:      []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()},
			pod:       member("job", "p0").Obj(),
			want:      fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for 1 more pods of group team-a/job (2/3)"),
		},
		{
			name:      "failed and deleting pods do not count, those that succeeded do",
			podGroups: []*v1alpha1.PodGroup{podGroup("job", 3).Obj()},
			pods: []*corev1.Pod{
				member("job", "p0").Obj(),
				member("job", "done").Phase(corev1.PodSucceeded).Obj(),
				member("job", "failed").Phase(corev1.PodFailed).Obj(),
				member("job", "gone").Terminating().Obj(),
			},
			pod:  member("job", "p0").Obj(),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for 1 more pods of group team-a/job (2/3)"),
		},
		{
			// A Job's last index, or the replacement of a member lost
			// with its node, after the others finished their work.
			name:      "a member joins those that succeeded alone",
			podGroups: []*v1alpha1.PodGroup{podGroup("job", 2).Obj()},
			pods: []*corev1.Pod{
				member("job", "done").Phase(corev1.PodSucceeded).Obj(),
				member("job", "last").Obj(),
			},
			pod: member("job", "last").Obj(),
		},
		{
			name:      "a same-named group in another namespace does not count",
			podGroups: []*v1alpha1.PodGroup{podGroup("job", 2).Obj()},
			pods: []*corev1.Pod{
				member("job", "p0").Obj(),
				member("job", "p1").Namespace("team-b").Obj(),
			},
			pod:  member("job", "p0").Obj(),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for 1 more pods of group team-a/job (1/2)"),
		},
		{
			name:      "minMember active pods",
			podGroups: []*v1alpha1.PodGroup{podGroup("job", 2).Obj()},
			pods:      []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()},
			pod:       member("job", "p0").Obj(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Args{}, tt.podGroups, tt.pods)
			assert.Equal(t, tt.want, f.gang.PreEnqueue(f.ctx, tt.pod))
		})
	}
}

// queued is a pod entity of the scheduling queue as kube-scheduler makes it.
func queued(pod *corev1.Pod, at time.Time) fwk.QueuedEntityInfo {
	return &framework.QueuedPodInfo{PodInfo: mustPodInfo(pod), QueueingParams: framework.QueueingParams{Timestamp: at, InitialAttemptTimestamp: &at}}
}

func mustPodInfo(pod *corev1.Pod) *framework.PodInfo {
	info, err := framework.NewPodInfo(pod)
	if err != nil {
		panic(err)
	}
	return info
}

func TestLess(t *testing.T) {
	older := podGroup("older", 1).Time(epoch).Obj()
	newer := podGroup("newer", 1).Time(epoch.Add(time.Minute)).Obj()
	tests := []struct {
		name   string
		a, b   fwk.QueuedEntityInfo
		failed string
		want   bool
	}{
		{
			name: "higher priority first, whatever the group",
			a:    queued(member("newer", "a").Priority(10).Obj(), epoch),
			b:    queued(member("older", "b").Obj(), epoch),
			want: true,
		},
		{
			name: "the older group first",
			a:    queued(member("older", "a").Obj(), epoch.Add(time.Hour)),
			b:    queued(member("newer", "b").Obj(), epoch),
			want: true,
		},
		{
			name:   "a group that just failed goes behind",
			a:      queued(member("older", "a").Obj(), epoch),
			b:      queued(member("newer", "b").Obj(), epoch),
			failed: "older",
			want:   false,
		},
		{
			name: "members of one group by name",
			a:    queued(member("older", "a").Obj(), epoch.Add(time.Hour)),
			b:    queued(member("older", "b").Obj(), epoch),
			want: true,
		},
		{
			name: "a pod without a group by its queue time",
			a:    queued(st.MakePod().Namespace(ns).Name("plain").Obj(), epoch.Add(30*time.Second)),
			b:    queued(member("newer", "b").Obj(), epoch),
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{older, newer}, nil)
			if tt.failed != "" {
				key := types.NamespacedName{Namespace: ns, Name: tt.failed}
				f.gang.attempts.Begin(key)
				f.gang.attempts.Fail(key, epoch.Add(2*time.Minute), time.Second, groupstate.FoundNoRoom, "member x fits on no node")
			}
			assert.Equal(t, tt.want, f.gang.Less(tt.a, tt.b))
			assert.Equal(t, !tt.want, f.gang.Less(tt.b, tt.a), "the order must be strict")
		})
	}
}

func TestPermitAllowsAllMembersAtQuorum(t *testing.T) {
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, members)

	for _, pod := range members[:2] {
		status := f.reserveAndPermit(t, pod)
		require.Equal(t, fwk.Wait, status.Code(), "member %s before quorum", pod.Name)
	}
	assert.Empty(t, f.drainEvents(), "no event while the gang is incomplete")

	require.True(t, f.reserveAndPermit(t, members[2]).IsSuccess(), "the member that completes the gang")
	for _, pod := range members[:2] {
		assert.True(t, f.outcome(pod).IsSuccess(), "member %s is allowed with the last one", pod.Name)
	}
	assert.Equal(t, []string{"Normal GangAdmitted 3/3 members placed; all are allowed to bind"}, f.drainEvents())
}

// releasedGang is a gang of four admitted at Permit with one bind slot:
// three members were held there, the fourth completed the gang. Each
// member's cycle state is its binding cycle's.
func releasedGang(t *testing.T) (*fixture, []*corev1.Pod, []fwk.CycleState) {
	t.Helper()
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj(), member("job", "p3").Obj()}
	f := newFixture(t, Args{MaxConcurrentBinds: 1}, []*v1alpha1.PodGroup{podGroup("job", 4).Obj()}, members)
	states := make([]fwk.CycleState, len(members))
	for i, pod := range members {
		states[i] = framework.NewCycleState()
		status := f.reserveAndPermitIn(t, states[i], pod)
		if i < 3 {
			require.Equal(t, fwk.Wait, status.Code(), "member %s before quorum", pod.Name)
		} else {
			require.True(t, status.IsSuccess(), "the member that completes the gang")
		}
	}
	return f, members, states
}

// cancelled is a context already done: PreBind with it fails at once if it
// would have to wait for a slot.
func cancelled(f *fixture) context.Context {
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	return ctx
}

// bounded is a context that ends a PreBind that waits for a slot wrongly
// with a failure rather than a hung test.
func bounded(t *testing.T, f *fixture) context.Context {
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMembersReleasedTogetherBindNoMoreThanTheSlotsAtOnce(t *testing.T) {
	f, members, states := releasedGang(t)

	_, status := f.gang.PreBindPreFlight(f.ctx, states[0], members[0], "node-1")
	require.True(t, status.IsSuccess(), "a member held at Permit binds through Gang's PreBind")
	require.True(t, f.gang.PreBind(f.ctx, states[0], members[0], "node-1").IsSuccess(), "the first takes the one slot")

	status = f.gang.PreBind(cancelled(f), states[1], members[1], "node-1")
	require.Equal(t, fwk.Error, status.Code(), "the second waits while the first binds")
	assert.Contains(t, status.Message(), "waiting for one of 1 bind slots")

	f.gang.PostBind(f.ctx, states[0], members[0], "node-1")
	assert.True(t, f.gang.PreBind(bounded(t, f), states[1], members[1], "node-1").IsSuccess(), "the first member's bind gave its slot back")
}

func TestAMemberWhoseBindFailedGivesItsSlotBack(t *testing.T) {
	f, members, states := releasedGang(t)
	require.True(t, f.gang.PreBind(f.ctx, states[0], members[0], "node-1").IsSuccess())
	require.Equal(t, fwk.Error, f.gang.PreBind(cancelled(f), states[1], members[1], "node-1").Code(), "the one slot is taken")

	f.gang.Unreserve(f.ctx, states[0], members[0], "node-1")
	assert.True(t, f.gang.PreBind(bounded(t, f), states[1], members[1], "node-1").IsSuccess(), "Unreserve gave the slot back")
	f.gang.Unreserve(f.ctx, states[0], members[0], "node-1")
	assert.Equal(t, fwk.Error, f.gang.PreBind(cancelled(f), states[2], members[2], "node-1").Code(),
		"a second Unreserve of the same member frees no slot it does not hold")
}

func TestAPodNotHeldAtPermitBindsWithoutASlot(t *testing.T) {
	f, members, states := releasedGang(t)
	require.True(t, f.gang.PreBind(f.ctx, states[0], members[0], "node-1").IsSuccess(), "a held member takes the one slot")

	last := members[3]
	_, status := f.gang.PreBindPreFlight(f.ctx, states[3], last, "node-1")
	assert.True(t, status.IsSkip(), "the member that completed its gang was never held")
	assert.True(t, f.gang.PreBind(cancelled(f), states[3], last, "node-1").IsSuccess(), "it binds at once, slot or not")

	plain := st.MakePod().Namespace(ns).Name("plain").UID("plain").SchedulerName(topology.SchedulerName).Obj()
	plainState := f.recorded(plain)
	require.True(t, plugintest.Permit(f.ctx, f.fw, plainState, plain, "node-1").IsSuccess())
	_, status = f.gang.PreBindPreFlight(f.ctx, plainState, plain, "node-1")
	assert.True(t, status.IsSkip(), "a pod of no gang")
	assert.True(t, f.gang.PreBind(cancelled(f), plainState, plain, "node-1").IsSuccess())
}

func TestPermitCountsBoundMembers(t *testing.T) {
	// Two members were bound before a scheduler restart; the third
	// completes the gang on its own.
	members := []*corev1.Pod{
		member("job", "p0").Node("node-1").Obj(),
		member("job", "p1").Node("node-2").Obj(),
		member("job", "p2").Obj(),
	}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, members)
	assert.True(t, f.reserveAndPermit(t, members[2]).IsSuccess())
}

func TestPermitWaitsForTheGroupTimeout(t *testing.T) {
	f := newFixture(t, Args{PermitTimeoutSeconds: 42}, []*v1alpha1.PodGroup{
		podGroup("default", 2).Obj(),
		podGroup("own", 2).ScheduleTimeoutSeconds(7).Obj(),
	}, nil)
	_, timeout := f.gang.Permit(f.ctx, f.recorded(member("default", "a").Obj()), member("default", "a").Obj(), "node-1")
	assert.Equal(t, 42*time.Second, timeout)
	_, timeout = f.gang.Permit(f.ctx, f.recorded(member("own", "b").Obj()), member("own", "b").Obj(), "node-1")
	assert.Equal(t, 7*time.Second, timeout)
}

// TestARejectedGangIsToldWhatItsPreemptionFound: a search that found no
// victims and one that failed are told apart on the gang, in its event and
// its members' message.
func TestARejectedGangIsToldWhatItsPreemptionFound(t *testing.T) {
	tests := []struct {
		name string
		// left is what GangPreemption left in the cycle, nil for nothing.
		left fwk.StateData
		want string
	}{
		{
			name: "no victims would make room",
			want: "member p1 fits on no node, and no lower-priority victims would make room for all the members the gang lacks",
		},
		{
			name: "the search failed with an error",
			left: &groupstate.SearchFailed{Err: errors.New("no corresponding pod el-5 in pods of node n2")},
			want: "member p1 fits on no node, and the search for lower-priority victims failed: no corresponding pod el-5 in pods of node n2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()}
			f := newFixture(t, Args{BackoffSeconds: ptr.To[int64](10)}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj()}, members)
			state := framework.NewCycleState()
			_, status := f.gang.PreFilter(f.ctx, state, members[1], nil)
			require.True(t, status.IsSuccess())
			if tt.left != nil {
				state.Write(groupstate.SearchFailedKey, tt.left)
			}

			_, status = f.gang.PostFilter(f.ctx, state, members[1], nil)
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
			assert.Contains(t, status.Message(), tt.want)
			events := f.drainEvents()
			require.Len(t, events, 1)
			assert.True(t, strings.HasPrefix(events[0], "Warning GangRejected "+tt.want), events[0])
		})
	}
}

func TestPostFilterBeforeQuorumRejectsTheGroup(t *testing.T) {
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()}
	f := newFixture(t, Args{BackoffSeconds: ptr.To[int64](10)}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, members)
	_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	require.True(t, status.IsSuccess())
	for _, pod := range members[:2] {
		require.Equal(t, fwk.Wait, f.reserveAndPermit(t, pod).Code())
	}

	_, status = f.gang.PostFilter(f.ctx, f.recorded(members[2]), members[2], nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "no preemption for a gang being torn down")
	for _, pod := range members[:2] {
		outcome := f.outcome(pod)
		assert.Equal(t, fwk.Unschedulable, outcome.Code(), "waiting member %s is rejected in the same step", pod.Name)
		assert.Contains(t, outcome.Message(), "group team-a/job rejected: member p2 fits on no node")
	}
	events := f.drainEvents()
	require.Len(t, events, 1)
	assert.True(t, strings.HasPrefix(events[0], "Warning GangRejected member p2 fits on no node, and no lower-priority victims would make room for all the members the gang lacks; released 2 reservations; retrying in 10s"), events[0])

	// The group backs off, then its pending members are woken.
	_, status = f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), "backs off for 10s more after a failed attempt: member p2 fits on no node, and no lower-priority victims would make room",
		"a member turned away by the backoff says why the attempt failed")
	_, status = f.gang.PostFilter(f.ctx, f.recorded(members[0]), members[0], nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Empty(t, status.Message(), "PreFilter's message says it once; the scheduler writes PostFilter's after it")
	assert.Empty(t, f.drainEvents(), "the backoff is not a new failure")
	f.clock.Step(10 * time.Second)
	assert.ElementsMatch(t, []string{"team-a/p0", "team-a/p1", "team-a/p2"}, f.activator.Activated)
	_, status = f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	assert.True(t, status.IsSuccess(), "tried again once the backoff ends")
}

func TestAnAttemptsFirstReservationWakesTheMembersTheGroupsBackoffTurnedAway(t *testing.T) {
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()}
	f := newFixture(t, Args{BackoffSeconds: ptr.To[int64](10)}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, members)
	_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[2], nil)
	require.True(t, status.IsSuccess())
	f.gang.PostFilter(f.ctx, f.recorded(members[2]), members[2], nil)

	// p1 is tried during the backoff and turned away; p2 found no room.
	_, status = f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[1], nil)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	f.clock.Step(10 * time.Second)
	f.activator.Activated = nil

	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, members[0]).Code())
	assert.Equal(t, []string{"team-a/p1"}, f.activator.Activated,
		"the member turned away is brought back as the attempt holds room; the one that found none waits for an event that can help it")
	f.activator.Activated = nil
	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, members[1]).Code())
	assert.Empty(t, f.activator.Activated, "only the first reservation wakes them, once")
}

func TestAGangThatNeverWaitedOutABackoffWakesNoMemberAtItsFirstReservation(t *testing.T) {
	// With no gang backoff, a gang that cannot fit must stay still until an
	// event can help it: its own reservation is none.
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()}
	f := newFixture(t, Args{BackoffSeconds: ptr.To[int64](0)}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj()}, members)
	for range 2 {
		require.Equal(t, fwk.Wait, f.reserveAndPermit(t, members[0]).Code())
		f.gang.PostFilter(f.ctx, f.recorded(members[1]), members[1], nil)
		_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[1], nil)
		require.True(t, status.IsSuccess(), "no backoff turns it away")
	}
	assert.Empty(t, f.activator.Activated)
}

func TestAGangThatLostItsDomainToAnotherPodKeepsItsPlaceInTheQueue(t *testing.T) {
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()}
	untried := member("newer", "n0").Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{
		podGroup("job", 2).Time(epoch).Obj(),
		podGroup("newer", 2).Time(epoch.Add(time.Minute)).Obj(),
	}, append(members, untried))
	f.clock.Step(2 * time.Minute)
	key := types.NamespacedName{Namespace: ns, Name: "job"}
	attempt := func(d groupstate.Domain) {
		_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
		require.True(t, status.IsSuccess(), status.Message())
		f.model.Attempts().ChooseDomain(key, d)
		f.gang.PostFilter(f.ctx, f.recorded(members[1]), members[1], nil)
	}

	// The members are queued again as the attempt ends.
	attempt(groupstate.Domain{Name: "rack-a"})
	assert.True(t, f.gang.Less(queued(members[1], f.clock.Now()), queued(untried, epoch)),
		"another pod took room of its domain: the gang lost a race, not for want of room, and keeps its place")
	f.clock.Step(time.Minute)
	attempt(groupstate.Domain{Unplaceable: "no topology.kubernetes.io/rack domain has room"})
	assert.False(t, f.gang.Less(queued(members[1], f.clock.Now()), queued(untried, epoch)),
		"a gang that fits in no domain goes behind the gangs not tried yet")
}

func TestAGangThatFitsNoTopologyDomainIsRejectedSayingWhichCameClosest(t *testing.T) {
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj()}, members)
	_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	require.True(t, status.IsSuccess())
	key := types.NamespacedName{Namespace: ns, Name: "job"}
	why := topology.NoDomainMessage(key, "topology.kubernetes.io/rack", 2, "rack-3", 1)
	f.model.Attempts().ChooseDomain(key, groupstate.Domain{Unplaceable: why})

	_, status = f.gang.PostFilter(f.ctx, f.recorded(members[0]), members[0], nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Equal(t, "group team-a/job rejected: "+why, status.Message())
	events := f.drainEvents()
	require.Len(t, events, 1)
	assert.True(t, strings.HasPrefix(events[0], "Warning GangRejected "+why), events[0])
	_, chosen := f.model.Attempts().Domain(key)
	assert.False(t, chosen, "the next attempt chooses again")
}

// TestAGangWhoseDomainTurnedOutFullTriesAnotherWithinASecond: a gang with
// no member bound tries another domain after a second; one with members
// bound has no other, and backs off in full.
func TestAGangWhoseDomainTurnedOutFullTriesAnotherWithinASecond(t *testing.T) {
	tests := []struct {
		name        string
		members     []*corev1.Pod
		want        string
		wantBackoff string
		// another: the next attempt tries another domain.
		another bool
	}{
		{
			name:        "no member bound: another domain within a second",
			members:     []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()},
			want:        "group team-a/job rejected: member p2 fits in no node of the gang's domain rack-a; trying another",
			wantBackoff: "retrying in 1s", another: true,
		},
		{
			name:        "a member bound: no other domain, the full backoff",
			members:     []*corev1.Pod{member("job", "p0").Node("node-1").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()},
			want:        "group team-a/job rejected: member p2 fits in no node of the gang's domain rack-a, where its bound members are",
			wantBackoff: "retrying in 10s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Args{BackoffSeconds: ptr.To[int64](10)}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, tt.members)
			_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), tt.members[1], nil)
			require.True(t, status.IsSuccess())
			key := types.NamespacedName{Namespace: ns, Name: "job"}
			f.model.Attempts().ChooseDomain(key, groupstate.Domain{Name: "rack-a"})

			_, status = f.gang.PostFilter(f.ctx, f.recorded(tt.members[2]), tt.members[2], nil)
			assert.Equal(t, tt.want, status.Message())
			events := f.drainEvents()
			require.Len(t, events, 1)
			assert.True(t, strings.HasSuffix(events[0], tt.wantBackoff), "%s: %s", tt.wantBackoff, events[0])
			if tt.another {
				assert.ElementsMatch(t, []string{"rack-a"}, f.model.Attempts().TriedDomains(key).UnsortedList())
				f.clock.Step(anotherDomainBackoff)
				assert.ElementsMatch(t, []string{"team-a/p0", "team-a/p1", "team-a/p2"}, f.activator.Activated, "woken for the next domain")
			}
		})
	}
}

// TestAGangWaitingForItsMembersClaimsIsNotRejected: Placement could not
// count the devices of members whose ResourceClaims are not made yet; the
// attempt ends without a GangRejected, which would outlive the wait, and
// the gang tries again within a second.
func TestAGangWaitingForItsMembersClaimsIsNotRejected(t *testing.T) {
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()}
	f := newFixture(t, Args{BackoffSeconds: ptr.To[int64](10)}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj()}, members)
	_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	require.True(t, status.IsSuccess())
	key := types.NamespacedName{Namespace: ns, Name: "job"}
	why := "group team-a/job waits for its members' ResourceClaims, which kube-controller-manager makes from their templates: member p1: not found"
	f.model.Attempts().ChooseDomain(key, groupstate.Domain{WaitsForClaims: true, Unplaceable: why})

	_, status = f.gang.PostFilter(f.ctx, f.recorded(members[0]), members[0], nil)
	assert.Equal(t, "group team-a/job rejected: "+why, status.Message(), "the member's status says what the gang waits for")
	assert.Empty(t, f.drainEvents(), "no GangRejected")
	assert.Empty(t, f.model.Attempts().TriedDomains(key), "no domain was tried")
	f.clock.Step(anotherDomainBackoff)
	assert.ElementsMatch(t, []string{"team-a/p0", "team-a/p1"}, f.activator.Activated, "woken within a second")
}

func TestPostFilterAfterQuorumLeavesTheGroupAlone(t *testing.T) {
	members := []*corev1.Pod{
		member("job", "p0").Node("node-1").Obj(),
		member("job", "p1").Node("node-1").Obj(),
		member("job", "late").Obj(),
	}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj()}, members)
	_, status := f.gang.PostFilter(f.ctx, f.recorded(members[2]), members[2], nil)
	assert.Equal(t, fwk.Unschedulable, status.Code(), "the late member retries, and may preempt")
	assert.Empty(t, f.drainEvents())
	_, status = f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[2], nil)
	assert.True(t, status.IsSuccess(), "no backoff for a group that keeps its quorum")
}

func TestUnreserveBeforeQuorumRollsTheGroupBack(t *testing.T) {
	// A member that times out at Permit, or fails to bind, takes its
	// waiting siblings with it.
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, members)
	_, _ = f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	for _, pod := range members[:2] {
		require.Equal(t, fwk.Wait, f.reserveAndPermit(t, pod).Code())
	}
	f.fw.RunReservePluginsUnreserve(f.ctx, f.recorded(members[0]), members[0], "node-1")
	assert.Equal(t, fwk.Unschedulable, f.outcome(members[1]).Code())
	// The rejected sibling's binding cycle unreserves it in turn.
	f.fw.RunReservePluginsUnreserve(f.ctx, f.recorded(members[1]), members[1], "node-1")
	placed, _ := f.gang.groups.Quorum(types.NamespacedName{Namespace: ns, Name: "job"}, 3, groupstate.Counting{})
	assert.Equal(t, int32(0), placed, "every reservation is released")
	events := f.drainEvents()
	require.Len(t, events, 1, "one teardown, one event: %v", events)
	assert.Contains(t, events[0], "Warning GangRejected member p0 lost its reservation before the group was complete")
}

func TestUnreserveAfterQuorumKeepsTheGroup(t *testing.T) {
	members := []*corev1.Pod{
		member("job", "p0").Node("node-1").Obj(),
		member("job", "p1").Node("node-1").Obj(),
		member("job", "late").Obj(),
		member("job", "later").Obj(),
	}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj()}, members)
	require.True(t, f.reserveAndPermit(t, members[2]).IsSuccess())
	f.gang.Unreserve(f.ctx, f.recorded(members[3]), members[3], "node-1")
	assert.Empty(t, f.drainEvents(), "nothing is torn down")
}

func TestPreFilterChecksMinResources(t *testing.T) {
	nodes := tf.BuildNodeInfos([]*corev1.Node{
		st.MakeNode().Name("n1").Capacity(map[corev1.ResourceName]string{"cpu": "32", "memory": "64Gi"}).Obj(),
		st.MakeNode().Name("n2").Capacity(map[corev1.ResourceName]string{"cpu": "32", "memory": "64Gi"}).Obj(),
	})
	tests := []struct {
		name    string
		min     map[corev1.ResourceName]string
		wantErr string
	}{
		{name: "fits", min: map[corev1.ResourceName]string{"cpu": "64", "memory": "100Gi"}},
		{name: "too much CPU", min: map[corev1.ResourceName]string{"cpu": "65"}, wantErr: "cpu (needs 65, 64 free)"},
		{name: "a GPU the nodes lack", min: map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}, wantErr: "nvidia.com/gpu (needs 1, 0 free)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := podGroup("job", 1).MinResources(tt.min).Obj()
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, nil)
			_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), member("job", "p0").Obj(), nodes)
			if tt.wantErr == "" {
				assert.True(t, status.IsSuccess(), status.Message())
				return
			}
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
			assert.Contains(t, status.Message(), tt.wantErr)
		})
	}
}

func TestUnreserveAfterAdmissionKeepsTheGroup(t *testing.T) {
	// An admitted member that fails later, such as a launcher whose
	// launch-order hold timed out, retries alone: its bound siblings stay
	// and the group does not back off.
	members := []*corev1.Pod{member("job", "w0").Obj(), member("job", "w1").Obj(), member("job", "launcher").Obj()}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, members)
	_, _ = f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, members[0]).Code())
	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, members[1]).Code())
	require.True(t, f.reserveAndPermit(t, members[2]).IsSuccess())
	f.drainEvents()

	f.gang.Unreserve(f.ctx, f.recorded(members[2]), members[2], "node-1")
	assert.Empty(t, f.drainEvents(), "nothing is torn down")
	_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[2], nil)
	assert.True(t, status.IsSuccess(), "the member retries at once: %v", status)
}

// boundAt makes a member bound to node-1 at the given time, as the API
// server records a bind in the PodScheduled condition.
func boundAt(w *st.PodWrapper, at time.Time) *corev1.Pod {
	pod := w.Node("node-1").Obj()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	return pod
}

func TestLessPutsAPartlyBoundGangFirst(t *testing.T) {
	// "newer" was left with one of its two members bound, by a scheduler
	// that crashed between binds; "older" has none.
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{
		podGroup("older", 2).Time(epoch).Obj(),
		podGroup("newer", 2).Time(epoch.Add(time.Minute)).Obj(),
		podGroup("whole", 1).Time(epoch.Add(time.Minute)).Obj(),
	}, []*corev1.Pod{boundAt(member("newer", "n0"), epoch), boundAt(member("whole", "w0"), epoch)})

	partly := queued(member("newer", "n1").Obj(), epoch.Add(time.Hour))
	fresh := queued(member("older", "o0").Obj(), epoch)
	assert.True(t, f.gang.Less(partly, fresh), "the partly bound gang goes first, whatever its age")
	assert.False(t, f.gang.Less(fresh, partly))

	// A gang whose bound members make its quorum is not partly bound: an
	// extra member of it waits its turn.
	extra := queued(member("whole", "w1").Obj(), epoch.Add(time.Hour))
	assert.True(t, f.gang.Less(fresh, extra))

	higher := queued(member("older", "o1").Priority(10).Obj(), epoch)
	assert.True(t, f.gang.Less(higher, partly), "priority still comes first")
}

// olderAndNewerGangs returns a fixture with two gangs of two, "older"
// created first, and a member of each queued, the newer one later.
func olderAndNewerGangs(t *testing.T) (f *fixture, fresh, sibling fwk.QueuedEntityInfo) {
	f = newFixture(t, Args{}, []*v1alpha1.PodGroup{
		podGroup("older", 2).Time(epoch).Obj(),
		podGroup("newer", 2).Time(epoch.Add(time.Minute)).Obj(),
	}, nil)
	return f, queued(member("older", "o0").Obj(), epoch), queued(member("newer", "n1").Obj(), epoch.Add(time.Hour))
}

func TestLessFinishesAnAttemptThatHoldsReservationsFirst(t *testing.T) {
	// "newer" has one of its two members reserved, waiting at Permit;
	// "older" has none, and would otherwise go first.
	f, fresh, sibling := olderAndNewerGangs(t)
	assert.True(t, f.gang.Less(fresh, sibling), "no attempt under way: the older gang first")

	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, member("newer", "n0").Obj()).Code())
	// The sibling queued again while its gang's attempt holds reservations.
	sibling = queued(member("newer", "n1").Obj(), epoch.Add(2*time.Hour))
	assert.True(t, f.gang.Less(sibling, fresh), "the attempt under way is finished first")
	assert.False(t, f.gang.Less(fresh, sibling))

	higher := queued(member("older", "o1").Priority(10).Obj(), epoch)
	assert.True(t, f.gang.Less(higher, sibling), "priority still comes first")
}

func TestAQueuedPodsPlaceNeverMovesBack(t *testing.T) {
	// The active queue is a heap: a pod whose place moves back while it
	// sits in it holds the pods below it, which now sort first, there.
	f, fresh, sibling := olderAndNewerGangs(t)
	require.True(t, f.gang.Less(fresh, sibling))

	key := types.NamespacedName{Namespace: ns, Name: "older"}
	f.gang.attempts.Begin(key)
	f.gang.attempts.Fail(key, epoch.Add(2*time.Minute), time.Second, groupstate.FoundNoRoom, "member x fits on no node")
	assert.True(t, f.gang.Less(fresh, sibling), "the older gang failed while both were queued: their order holds")
	assert.False(t, f.gang.Less(sibling, fresh))

	requeued := queued(member("older", "o0").Obj(), epoch.Add(3*time.Hour))
	assert.True(t, f.gang.Less(sibling, requeued), "queued again, the failed gang's member takes its new place")
}

func TestAQueuedPodsPlaceMovesForwardWhenItsGangsAttemptBegins(t *testing.T) {
	f, fresh, sibling := olderAndNewerGangs(t)
	require.True(t, f.gang.Less(fresh, sibling))

	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, member("newer", "n0").Obj()).Code())
	assert.True(t, f.gang.Less(sibling, fresh), "the newer gang's attempt holds a reservation: its queued member goes first at once")
	assert.False(t, f.gang.Less(fresh, sibling))

	key := types.NamespacedName{Namespace: ns, Name: "newer"}
	f.gang.attempts.Fail(key, epoch.Add(2*time.Minute), time.Second, groupstate.FoundNoRoom, "member x fits on no node")
	assert.True(t, f.gang.Less(sibling, fresh), "the attempt failed while the member was queued: it keeps the better place")
}

func TestTheQueuePopsTheQueuedMembersOfAnAttemptThatBeganAheadOfOlderGangs(t *testing.T) {
	// Eight gangs of four and a ninth, the newest, all queued in
	// kube-scheduler's own heap. Then the newest gang's attempt begins: a
	// member outside the queue is reserved. Its queued members, last in the
	// queue until then, are popped before the four newest of the others.
	const gangs, size = 8, 4
	var podGroups []*v1alpha1.PodGroup
	for i := range gangs + 1 {
		podGroups = append(podGroups, podGroup(fmt.Sprintf("g%d", i), size).Time(epoch.Add(time.Duration(i)*time.Minute)).Obj())
	}
	f := newFixture(t, Args{}, podGroups, nil)
	queue := heap.New(func(e *framework.QueuedPodInfo) string { return e.Pod.Name },
		func(a, b *framework.QueuedPodInfo) bool { return f.gang.Less(a, b) })
	var late []string
	for i := range gangs + 1 {
		for j := range size {
			name := fmt.Sprintf("g%d-%d", i, j)
			if i == gangs && j == 0 {
				continue // the member the attempt reserves
			}
			if i == gangs {
				late = append(late, name)
			}
			queue.AddOrUpdate(queued(member(fmt.Sprintf("g%d", i), name).Obj(), epoch.Add(time.Hour)).(*framework.QueuedPodInfo))
		}
	}
	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, member(fmt.Sprintf("g%d", gangs), fmt.Sprintf("g%d-0", gangs)).Obj()).Code())

	var popped []string
	for queue.Len() > 0 {
		e, err := queue.Pop()
		require.NoError(t, err)
		popped = append(popped, e.Pod.Name)
	}
	firstOfTheNewest := slices.IndexFunc(popped, func(name string) bool {
		var i, j int
		_, err := fmt.Sscanf(name, "g%d-%d", &i, &j)
		return err == nil && i >= gangs/2 && i < gangs
	})
	for _, name := range late {
		assert.Less(t, slices.Index(popped, name), firstOfTheNewest, "%s is popped before the newest other gangs' members: %v", name, popped)
	}
}

func TestAPodBoundOrGoneLeavesNoQueuePlaceBehind(t *testing.T) {
	pod := member("job", "p0").Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 1).Obj()}, []*corev1.Pod{pod})
	other := queued(member("job", "p1").Obj(), epoch)
	f.gang.Less(queued(pod, epoch), other)
	require.Len(t, f.gang.places.places, 2)

	changed := f.gang.podChanged(klog.Background())
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "node-a"
	changed(group.Updated(pod, bound))
	assert.Len(t, f.gang.places.places, 1, "a bound pod is queued no more")
	changed(group.Deleted(member("job", "p1").Obj()))
	assert.Empty(t, f.gang.places.places, "a deleted pod is queued no more")
}

func TestLoweredMinMemberAdmitsWaitingMembersAtOnce(t *testing.T) {
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()}
	pg := podGroup("job", 4).Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, members)
	for _, pod := range members {
		require.Equal(t, fwk.Wait, f.reserveAndPermit(t, pod).Code())
	}

	lowered := pg.DeepCopy()
	lowered.Spec.MinMember = 3
	require.NoError(t, f.podGroups.Update(lowered))
	handler := f.gang.podGroupHandler(klog.Background()).(cache.ResourceEventHandlerFuncs)
	handler.UpdateFunc(pg, lowered)
	for _, pod := range members {
		assert.True(t, f.outcome(pod).IsSuccess(), "member %s is allowed once minMember is 3", pod.Name)
	}
	assert.Contains(t, f.drainEvents(), "Normal GangAdmitted 3/3 members placed; all are allowed to bind")
}

func TestAPartlyBoundGangIsEvictedAfterItsTimeout(t *testing.T) {
	// Two of four members were bound at epoch; the other two fit nowhere.
	members := []*corev1.Pod{
		boundAt(member("job", "p0"), epoch), boundAt(member("job", "p1"), epoch),
		member("job", "p2").Obj(), member("job", "p3").Obj(),
	}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 4).ScheduleTimeoutSeconds(30).Obj()}, members)

	f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[2], nil)
	f.gang.PostFilter(f.ctx, f.recorded(members[2]), members[2], nil)
	assert.Contains(t, f.drainEvents()[0], "GangRejected member p2 fits on no node")
	pods, err := f.client.CoreV1().Pods(ns).List(f.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 4, "nothing is evicted before the timeout")

	f.clock.Step(30 * time.Second)
	pods, err = f.client.CoreV1().Pods(ns).List(f.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var left []string
	for _, pod := range pods.Items {
		left = append(left, pod.Name)
	}
	assert.Equal(t, []string{"p2", "p3"}, left, "the bound members are evicted, the pending ones stay")
	assert.Equal(t, []string{"Warning GangEvicted 2/4 members placed and 2 more could not be placed within 30s of the last bind; evicted the bound members p0, p1 so that they hold no room the gang cannot use"}, f.drainEvents())
}

func TestAPartlyBoundGangThatCompletesIsNotEvicted(t *testing.T) {
	members := []*corev1.Pod{boundAt(member("job", "p0"), epoch), member("job", "p1").Obj(), member("job", "p2").Obj()}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 3).ScheduleTimeoutSeconds(30).Obj()}, members)
	f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[1], nil)
	f.gang.PostFilter(f.ctx, f.recorded(members[1]), members[1], nil)
	f.drainEvents()

	// Its missing members are placed before the deadline, and bind after.
	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, members[1]).Code())
	require.True(t, f.reserveAndPermit(t, members[2]).IsSuccess())
	f.clock.Step(30 * time.Second)
	pods, err := f.client.CoreV1().Pods(ns).List(f.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 3, "a gang on its way is left alone")
}

// TestARaisedQuorumIsNotPartlyBound: a gang of two ran whole; its
// minMember is raised to 3 and the third member fits nowhere. It had its
// quorum: it is not sorted ahead as a partly bound gang, and its running
// members are never evicted, however long the third waits.
func TestARaisedQuorumIsNotPartlyBound(t *testing.T) {
	members := []*corev1.Pod{boundAt(member("job", "p0"), epoch), boundAt(member("job", "p1"), epoch), member("job", "p2").Obj()}
	pg := podGroup("job", 2).ScheduleTimeoutSeconds(30).Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg, podGroup("other", 1).Time(epoch.Add(-time.Minute)).Obj()}, members)
	raised := pg.DeepCopy()
	raised.Spec.MinMember = 3
	require.NoError(t, f.podGroups.Update(raised))

	other := queued(member("other", "o0").Obj(), epoch)
	assert.True(t, f.gang.Less(other, queued(members[2], epoch.Add(time.Hour))), "the raised gang is not put ahead as partly bound")
	f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[2], nil)
	f.gang.PostFilter(f.ctx, f.recorded(members[2]), members[2], nil)
	assert.Contains(t, f.drainEvents()[0], "GangRejected member p2 fits on no node")
	f.clock.Step(time.Hour)
	pods, err := f.client.CoreV1().Pods(ns).List(f.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 3, "nothing that runs is evicted")
	for _, e := range f.drainEvents() {
		assert.NotContains(t, e, "GangEvicted")
	}
}

func TestALateMemberGetsItsRoomHeld(t *testing.T) {
	// An MPIJob under WaitForWorkersReady: minMember counts a launcher its
	// operator creates only once the two workers are Ready.
	pg := podGroup("job", 3).Obj()
	pg.Annotations = map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
		topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"3"}}}`,
	}
	worker := func(name string) *corev1.Pod {
		return member("job", name).Label(topology.RoleLabel, "worker").Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj()
	}
	workers := []*corev1.Pod{worker("w0"), worker("w1")}
	// The cycle's snapshot has w0, reserved on node-1 in an earlier cycle.
	assumedW0 := st.MakePod().Namespace(ns).Name("assumed-w0").UID("assumed-w0").Node("node-1").Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, append(workers, assumedW0))
	key := types.NamespacedName{Namespace: ns, Name: "job"}

	assert.Nil(t, f.gang.PreEnqueue(f.ctx, workers[0]), "two workers and the launcher to come make the gang of 3")
	require.Equal(t, fwk.Wait, f.reserveAndPermit(t, workers[0]).Code())
	require.True(t, f.reserveAndPermit(t, workers[1]).IsSuccess(), "admitted with the launcher's room held")
	assert.True(t, f.outcome(workers[0]).IsSuccess())
	node, held := heldNode(f.model.Rooms(), key, "launcher")
	require.True(t, held)
	// Both workers reserved on node-1 leave 2 CPUs there: the launcher's 3
	// are held on node-2.
	assert.Equal(t, "node-2", node)

	nodeInfos, err := f.fw.SnapshotSharedLister().NodeInfos().List()
	require.NoError(t, err)
	var node2 fwk.NodeInfo
	for _, ni := range nodeInfos {
		if ni.Node().Name == "node-2" {
			node2 = ni
		}
	}
	other := st.MakePod().Namespace(ns).Name("other").UID("other").Req(map[corev1.ResourceName]string{"cpu": "2"}).Obj()
	status := f.held.Filter(f.ctx, f.recorded(other), other, node2)
	assert.Equal(t, fwk.Unschedulable, status.Code(), "another pod does not get the held room")
	assert.Contains(t, status.Message(), "room on the node is held for the members [team-a/job] will create later")

	launcher := member("job", "l0").Label(topology.RoleLabel, "launcher").Req(map[corev1.ResourceName]string{"cpu": "3"}).Obj()
	state := framework.NewCycleState()
	result, status, _ := f.fw.RunPreFilterPlugins(f.ctx, state, launcher)
	require.True(t, status.IsSuccess(), status.Message())
	assert.Equal(t, []string{"node-2"}, sets.List(result.NodeNames), "the launcher goes to its room")
	assert.Nil(t, f.fw.RunFilterPlugins(f.ctx, state, launcher, node2), "its own room fits it")
	require.True(t, f.fw.RunReservePluginsReserve(f.ctx, state, launcher, "node-2").IsSuccess())
	_, held = heldNode(f.model.Rooms(), key, "launcher")
	assert.False(t, held, "the room is the launcher's now")
	assert.Nil(t, f.held.Filter(f.ctx, f.recorded(other), other, node2))

	f.fw.RunReservePluginsUnreserve(f.ctx, state, launcher, "node-2")
	node, held = heldNode(f.model.Rooms(), key, "launcher")
	assert.True(t, held && node == "node-2", "a launcher that fails to bind gives its room back: held on %q (%v)", node, held)
	assert.Equal(t, fwk.Unschedulable, f.held.Filter(f.ctx, f.recorded(other), other, node2).Code(), "the room is held from others again")
}

func TestALateMemberIsHeldRoomWhereItsTemplateLetsItRun(t *testing.T) {
	tests := []struct {
		name, late string
		// node is where the room is held, or "" when there is none and the
		// gang is not admitted.
		node string
	}{
		{"no constraint: beside the worker", `{"launcher":{"requests":{"cpu":"1"}}}`, "node-1"},
		{"a node selector", `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"cpu"}}}`, "node-2"},
		{"a required node affinity", `{"launcher":{"requests":{"cpu":"1"},"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":` +
			`{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["cpu"]}]}]}}}}`, "node-2"},
		{"a node selector no node matches", `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"highmem"}}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := podGroup("job", 2).Obj()
			pg.Annotations = map[string]string{
				topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=1",
				topology.LateMembersAnnotation: tt.late,
			}
			w0 := member("job", "w0").Label(topology.RoleLabel, "worker").Req(map[corev1.ResourceName]string{"cpu": "1"}).Obj()
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, []*corev1.Pod{w0})
			if tt.node == "" {
				state := framework.NewCycleState()
				_, status, _ := f.fw.RunPreFilterPlugins(f.ctx, state, w0)
				require.True(t, status.IsSuccess(), "PreFilter: %v", status)
				status = f.fw.RunReservePluginsReserve(f.ctx, state, w0, "node-1")
				assert.Equal(t, fwk.Unschedulable, status.Code(), "no room for the launcher: the attempt ends at once, not at Permit's timeout")
				f.fw.RunReservePluginsUnreserve(f.ctx, state, w0, "node-1")
				_, held := heldNode(f.model.Rooms(), types.NamespacedName{Namespace: ns, Name: "job"}, "launcher")
				assert.False(t, held)
				events := f.drainEvents()
				require.Len(t, events, 1)
				assert.True(t, strings.HasPrefix(events[0], "Warning GangRejected the room of group team-a/job's late member launcher cannot be held: "+
					"no node of the 2 it could use matches its node selector, node affinity and tolerations"), events[0])
				return
			}
			status := f.reserveAndPermit(t, w0)
			node, _ := heldNode(f.model.Rooms(), types.NamespacedName{Namespace: ns, Name: "job"}, "launcher")
			assert.True(t, status.IsSuccess(), "admitted: %v", status)
			assert.Equal(t, tt.node, node)
		})
	}
}

func TestTheMemberThatCompletesAGangWithALateMemberWakesItsSiblings(t *testing.T) {
	pg := podGroup("job", 3).Obj()
	pg.Annotations = map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
		topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"}}}`,
	}
	w0 := member("job", "w0").Label(topology.RoleLabel, "worker").Obj()
	w1 := member("job", "w1").Label(topology.RoleLabel, "worker").Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, []*corev1.Pod{w0, w1})
	handler := f.gang.podChanged(klog.Background())
	handler(group.Added(w1))
	assert.ElementsMatch(t, []string{"team-a/w0", "team-a/w1"}, f.activator.Activated,
		"the second worker and the launcher to come make the gang of 3")
}

// TestAMemberArrivingPastTheQuorumWakesItself: the queue may gate a
// member at PreEnqueue before the model has counted the members that
// complete its group, and the model's wake-up of the group, as the census
// reaches minMember, names only the members the model knew then. A member
// the model counts past minMember wakes itself alone, lest it stay gated
// with nothing to wake it (an elastic StatefulSet created in parallel left
// one of six so).
func TestAMemberArrivingPastTheQuorumWakesItself(t *testing.T) {
	tests := []struct {
		name    string
		arrives string
		want    []string
	}{
		{"the member that completes the group wakes every member", "p1", []string{"team-a/p0", "team-a/p1"}},
		{"a member past the quorum wakes itself alone", "p2", []string{"team-a/p2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj()}
			if tt.arrives == "p2" {
				pods = append(pods, member("job", "p2").Obj())
			}
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 2).Obj()}, pods)
			f.activator.Activated = nil
			f.gang.podChanged(klog.Background())(group.Added(pods[len(pods)-1]))
			assert.ElementsMatch(t, tt.want, f.activator.Activated)
		})
	}
}

func TestARestartedSchedulerHoldsTheLateRoomOfAnAdmittedGangAgain(t *testing.T) {
	worker := func(name string) *st.PodWrapper {
		return member("job", name).Label(topology.RoleLabel, "worker").Req(map[corev1.ResourceName]string{"cpu": "1"})
	}
	launcher := member("job", "l0").Label(topology.RoleLabel, "launcher")
	tests := []struct {
		name string
		pods []*corev1.Pod
		held bool
	}{
		{"both workers bound, the launcher to come", []*corev1.Pod{worker("w0").Node("node-1").Obj(), worker("w1").Node("node-1").Obj()}, true},
		{"one worker bound: the gang was never admitted", []*corev1.Pod{worker("w0").Node("node-1").Obj(), worker("w1").Obj()}, false},
		{"the launcher has finished", []*corev1.Pod{worker("w0").Node("node-1").Obj(), worker("w1").Node("node-1").Obj(),
			launcher.Node("node-2").Phase(corev1.PodSucceeded).Obj()}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := podGroup("job", 3).Obj()
			pg.Annotations = map[string]string{
				topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
				topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"cpu"}}}`,
			}
			f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, tt.pods)
			// The restarted scheduler's informer lists the pods.
			for _, pod := range tt.pods {
				f.model.Take(group.Added(pod))
			}
			other := st.MakePod().Namespace(ns).Name("other").UID("other").Obj()
			nodeInfos, err := f.fw.SnapshotSharedLister().NodeInfos().List()
			require.NoError(t, err)
			_, status := f.held.PreFilter(f.ctx, f.recorded(other), other, nodeInfos)
			require.True(t, status.IsSuccess())
			node, held := heldNode(f.model.Rooms(), types.NamespacedName{Namespace: ns, Name: "job"}, "launcher")
			assert.Equal(t, tt.held, held)
			if tt.held {
				assert.Equal(t, "node-2", node, "where the launcher's template lets it run")
			}
		})
	}
}

func TestTheRoomOfALateMemberThatNeverComesIsReleased(t *testing.T) {
	pg := podGroup("job", 2).ScheduleTimeoutSeconds(30).Obj()
	pg.Annotations = map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=1",
		topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"}}}`,
	}
	w0 := member("job", "w0").Label(topology.RoleLabel, "worker").Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, []*corev1.Pod{w0})
	require.True(t, f.reserveAndPermit(t, w0).IsSuccess())
	f.drainEvents()

	f.clock.Step(30 * time.Second)
	assert.Zero(t, f.model.Rooms().Count(types.NamespacedName{Namespace: ns, Name: "job"}, ""))
	assert.Equal(t, []string{"Warning LateMemberMissing 1 late members were not created within 30s of the gang's admission; released the room held for them"}, f.drainEvents())
}

func TestLessGivesIdleRoomToTheLeastFulfilledElasticGroup(t *testing.T) {
	// Elastic groups of 1 to 5 workers: "half" has 3 bound, score 0.5;
	// "low" has 2 bound, score 0.25; "starting" has none bound yet. "rigid"
	// is a gang of two with none bound.
	bound := func(group string, n int) []*corev1.Pod {
		var pods []*corev1.Pod
		for i := range n {
			pods = append(pods, boundAt(member(group, fmt.Sprintf("%s-%d", group, i)), epoch))
		}
		return pods
	}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{
		podGroup("half", 1).Elastic("worker=5", "1:5").Time(epoch).Obj(),
		podGroup("low", 1).Elastic("worker=5", "1:5").Time(epoch.Add(time.Minute)).Obj(),
		podGroup("starting", 1).Elastic("worker=5", "1:5").Time(epoch.Add(time.Hour)).Obj(),
		podGroup("rigid", 2).Time(epoch.Add(time.Hour)).Obj(),
	}, append(bound("half", 3), bound("low", 2)...))

	half := queued(member("half", "half-3").Obj(), epoch)
	low := queued(member("low", "low-2").Obj(), epoch)
	starting := queued(member("starting", "starting-0").Obj(), epoch)
	rigid := queued(member("rigid", "rigid-0").Obj(), epoch)
	for _, tt := range []struct {
		name  string
		a, b  fwk.QueuedEntityInfo
		first bool
	}{
		{"the least fulfilled group's extra first, whatever its age", low, half, true},
		{"a rigid gang's member before an elastic group's extra", rigid, low, true},
		{"an elastic group's member needed for its min before an extra", starting, low, true},
		{"priority still comes first", queued(member("half", "half-4").Priority(10).Obj(), epoch), rigid, true},
	} {
		assert.Equal(t, tt.first, f.gang.Less(tt.a, tt.b), tt.name)
		assert.Equal(t, !tt.first, f.gang.Less(tt.b, tt.a), tt.name+": the order must be strict")
	}
}

func TestAnElasticGroupsExtraLeavesRoomToAGangWaitingForItsMin(t *testing.T) {
	cpu := func(w *st.PodWrapper, n string) *corev1.Pod {
		return w.Req(map[corev1.ResourceName]string{"cpu": n}).Obj()
	}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{
		podGroup("elastic", 1).Elastic("worker=3", "1:3").Obj(),
		podGroup("rigid", 2).Obj(),
		podGroup("low", 2).Obj(),
		podGroup("huge", 2).Obj(),
		podGroup("starting", 1).Elastic("worker=3", "1:3").Obj(),
	}, []*corev1.Pod{
		boundAt(member("elastic", "e0"), epoch),
		cpu(member("rigid", "r0"), "1"), cpu(member("rigid", "r1"), "1"),
		cpu(member("low", "l0").Priority(-1), "1"), cpu(member("low", "l1").Priority(-1), "1"),
		cpu(member("huge", "h0"), "1000"), cpu(member("huge", "h1"), "1000"),
	})
	nodeInfos, err := f.fw.SnapshotSharedLister().NodeInfos().List()
	require.NoError(t, err)
	node := nodeInfos[0]
	// fail ends an attempt of the group whose members fit nowhere, as the
	// scheduler marks them.
	fail := func(name string) {
		key := types.NamespacedName{Namespace: ns, Name: name}
		f.gang.attempts.Begin(key)
		f.gang.attempts.Fail(key, f.clock.Now(), time.Second, groupstate.FoundNoRoom, "member x fits on no node")
		markUnschedulable(t, f, name)
	}
	// filter runs a cycle of the pod: PreFilter, then Filter on the node.
	filter := func(pod *corev1.Pod) *fwk.Status {
		state := f.recorded(pod)
		_, status := f.held.PreFilter(f.ctx, state, pod, nodeInfos)
		require.True(t, status.IsSuccess(), "PreFilter: %v", status)
		return f.held.Filter(f.ctx, state, pod, node)
	}
	extra := member("elastic", "e1").Obj()
	assert.Nil(t, filter(extra), "no gang waits")

	fail("low")
	fail("huge")
	assert.Nil(t, filter(extra), "a gang of lower priority, or one no node can ever hold, keeps no room")

	fail("rigid")
	status := filter(extra)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "room on the node is kept for gang team-a/rigid, which waits for its min")
	assert.Nil(t, filter(member("starting", "s0").Obj()), "a member its group needs for its min is not held back")

	f.gang.attempts.Admit(types.NamespacedName{Namespace: ns, Name: "rigid"}, f.clock.Now())
	assert.Nil(t, filter(extra), "an admitted gang waits no more")
}

// markUnschedulable marks the group's members as the scheduler does when
// it finds no room for them.
func markUnschedulable(t *testing.T, f *fixture, name string) {
	t.Helper()
	members, err := group.Members(f.pods, types.NamespacedName{Namespace: ns, Name: name})
	require.NoError(t, err)
	for _, pod := range members {
		marked := pod.DeepCopy()
		marked.Status.Conditions = append(marked.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		})
		require.NoError(t, f.pods.Update(marked))
	}
}

func TestAGangWaitingForRoomIsRetriedAtOnceWhenABoundMemberGoes(t *testing.T) {
	extra := boundAt(member("elastic", "e1"), epoch)
	plain := boundAt(member("other", "o0"), epoch)
	pending := member("other", "o1").Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{
		podGroup("elastic", 1).Elastic("worker=3", "1:3").Obj(),
		podGroup("other", 1).Obj(),
		podGroup("rigid", 2).Obj(),
	}, []*corev1.Pod{
		boundAt(member("elastic", "e0"), epoch), extra, plain, pending,
		member("rigid", "r0").Obj(), member("rigid", "r1").Obj(),
	})
	rigid := types.NamespacedName{Namespace: ns, Name: "rigid"}
	f.gang.attempts.Begin(rigid)
	f.gang.attempts.Fail(rigid, f.clock.Now(), f.gang.args.backoff(), groupstate.FoundNoRoom, "member x fits on no node")
	markUnschedulable(t, f, "rigid")
	handler := f.gang.podChanged(klog.Background())

	handler(group.Deleted(pending))
	assert.NotNil(t, f.gang.backoffStatus(rigid), "a member that held no room leaves none: the backoff stands")
	assert.Empty(t, f.activator.Activated)

	handler(group.Deleted(extra))
	assert.Nil(t, f.gang.backoffStatus(rigid), "room an elastic group gives back is taken at once")
	assert.ElementsMatch(t, []string{"team-a/r0", "team-a/r1"}, f.activator.Activated)

	// Room another gang leaves may be enough: the gang is retried a
	// second after its failure rather than after its whole backoff.
	f.activator.Activated = nil
	f.gang.attempts.Begin(rigid)
	f.gang.attempts.Fail(rigid, f.clock.Now(), f.gang.args.backoff(), groupstate.FoundNoRoom, "member x fits on no node")
	handler(group.Deleted(plain))
	assert.NotNil(t, f.gang.backoffStatus(rigid), "within a second of its failure the gang still backs off")
	assert.Empty(t, f.activator.Activated)
	f.clock.Step(roomFreedBackoff)
	assert.Nil(t, f.gang.backoffStatus(rigid), "a second after its failure the gang is tried again")
	assert.ElementsMatch(t, []string{"team-a/r0", "team-a/r1"}, f.activator.Activated)
}

func TestLessOrdersAnEntityThatIsNotOnePodByPriorityThenQueueTime(t *testing.T) {
	// An upstream scheduling.k8s.io PodGroup is queued as one entity, with
	// no pod for muster's rules to read.
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("older", 1).Obj()}, nil)
	upstream := func(priority int32, at time.Time) fwk.QueuedEntityInfo {
		return &framework.QueuedPodGroupInfo{
			PodGroupInfo: &framework.PodGroupInfo{Namespace: ns, Name: "upstream", Type: fwk.PodGroupKeyType,
				PodGroup: &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{Priority: ptr.To(priority)}}},
			QueueingParams: framework.QueueingParams{Timestamp: at},
		}
	}
	for _, tt := range []struct {
		name  string
		a, b  fwk.QueuedEntityInfo
		first bool
	}{
		{"higher priority first", upstream(10, epoch.Add(time.Hour)), queued(member("older", "a").Obj(), epoch), true},
		{"then the earlier queued", queued(member("older", "a").Obj(), epoch), upstream(0, epoch.Add(time.Second)), true},
		{"between two groups, the earlier queued", upstream(0, epoch), upstream(0, epoch.Add(time.Second)), true},
	} {
		assert.Equal(t, tt.first, f.gang.Less(tt.a, tt.b), tt.name)
		assert.Equal(t, !tt.first, f.gang.Less(tt.b, tt.a), tt.name+": the order must be strict")
	}
}

func TestAMemberWhosePlaceAnotherHoldsWaits(t *testing.T) {
	pg := podGroup("job", 2).Obj()
	pg.Annotations = map[string]string{topology.RolesAnnotation: "worker=2"}
	worker := func(name string, index int, created time.Time) *st.PodWrapper {
		return member("job", name).Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, fmt.Sprint(index)).CreationTimestamp(metav1.NewTime(created))
	}
	// Two pods of worker 0 created in the same instant, as a burst of
	// creates lets through muster-controller's webhook.
	first, twin := worker("a-worker-0", 0, epoch).Obj(), worker("b-worker-0", 0, epoch).Obj()
	w1 := worker("worker-1", 1, epoch).Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{pg}, []*corev1.Pod{first, twin, w1})

	assert.Nil(t, f.gang.PreEnqueue(f.ctx, first), "the first by name holds worker 0")
	assert.Nil(t, f.gang.PreEnqueue(f.ctx, w1))
	status := f.gang.PreEnqueue(f.ctx, twin)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), "pod a-worker-0 has the same role (worker) and index in group job and holds them")
	_, status = f.gang.PreFilter(f.ctx, framework.NewCycleState(), twin, nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "a twin that got into the queue first is turned away in its cycle")
	assert.Equal(t, []string{"Warning DuplicateMember " + group.HeldByMessage(twin, first)}, f.drainEvents(), "told once")

	// The twin got reserved before the first was seen: it holds the place.
	f.gang.attempts.Reserve(types.NamespacedName{Namespace: ns, Name: "job"}, twin.UID)
	assert.Nil(t, f.gang.PreEnqueue(f.ctx, twin))
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, f.gang.PreEnqueue(f.ctx, first).Code(), "a reserved twin holds worker 0")

	// The holder finishes: its place is free.
	f.gang.attempts.Unreserve(types.NamespacedName{Namespace: ns, Name: "job"}, twin.UID)
	finished := first.DeepCopy()
	finished.Status.Phase = corev1.PodSucceeded
	require.NoError(t, f.pods.Update(finished))
	assert.Nil(t, f.gang.PreEnqueue(f.ctx, twin), "a finished member holds nothing")
}

func TestAGangWaitingForItsVictimsKeepsItsPlaceInTheQueue(t *testing.T) {
	older := podGroup("older", 2).Time(epoch).Obj()
	newer := podGroup("newer", 2).Time(epoch.Add(time.Minute)).Obj()
	waiting, untried := member("older", "a").Obj(), member("newer", "b").Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{older, newer}, []*corev1.Pod{waiting, untried})
	f.clock.Step(2 * time.Minute)
	end := func(roomMade bool) {
		state := framework.NewCycleState()
		_, status := f.gang.PreFilter(f.ctx, state, waiting, nil)
		require.True(t, status.IsSuccess(), status.Message())
		if roomMade {
			state.Write(groupstate.RoomMadeKey, &groupstate.RoomMade{At: f.clock.Now()})
		}
		f.gang.PostFilter(f.ctx, state, waiting, nil)
	}

	// The failed member is queued again as its attempt ends; the untried
	// one stays queued from the start.
	end(true)
	assert.True(t, f.gang.Less(queued(waiting, f.clock.Now()), queued(untried, epoch)),
		"victims go for the older gang: its attempt ended only to wait for them, and it keeps its place")
	f.clock.Step(time.Minute)
	end(false)
	assert.False(t, f.gang.Less(queued(waiting, f.clock.Now()), queued(untried, epoch)),
		"a gang that fits nowhere goes behind the gangs not tried yet")
}

func TestLessOrdersGangsCreatedInTheSameSecondByWhenTheyWereReady(t *testing.T) {
	// Creation times have a second's grain: gangs created in one second
	// go in the order their quorum of members came, not by name.
	first, second := podGroup("zeta", 1).Time(epoch).Obj(), podGroup("alpha", 1).Time(epoch).Obj()
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{first, second}, nil)
	f.gang.attempts.Seen(types.NamespacedName{Namespace: ns, Name: "zeta"}, epoch.Add(100*time.Millisecond))
	f.gang.attempts.Seen(types.NamespacedName{Namespace: ns, Name: "alpha"}, epoch.Add(700*time.Millisecond))

	a, b := queued(member("zeta", "a").Obj(), epoch), queued(member("alpha", "b").Obj(), epoch)
	assert.True(t, f.gang.Less(a, b), "zeta was ready first")
	assert.False(t, f.gang.Less(b, a), "the order must be strict")
}

// waitingSiblings reserves every member but the last and leaves them
// waiting at Permit; the last one's cycle has begun.
func waitingSiblings(t *testing.T) (*fixture, []*corev1.Pod) {
	t.Helper()
	members := []*corev1.Pod{member("job", "p0").Obj(), member("job", "p1").Obj(), member("job", "p2").Obj()}
	f := newFixture(t, Args{}, []*v1alpha1.PodGroup{podGroup("job", 3).Obj()}, members)
	for _, pod := range members[:2] {
		_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), pod, nil)
		require.True(t, status.IsSuccess(), status.Message())
		require.Equal(t, fwk.Wait, f.reserveAndPermit(t, pod).Code())
	}
	_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[2], nil)
	require.True(t, status.IsSuccess(), status.Message())
	return f, members
}

func TestAMemberWhoseRoomIsNotFreeYetFailsAlone(t *testing.T) {
	f, members := waitingSiblings(t)
	state := f.recorded(members[2])
	state.Write(groupstate.RoomMadeKey, &groupstate.RoomMade{Pending: true})

	_, status := f.gang.PostFilter(f.ctx, state, members[2], nil)
	assert.Equal(t, fwk.Unschedulable, status.Code(), "it retries as the victims go")
	for _, pod := range members[:2] {
		assert.NotNil(t, f.fw.GetWaitingPod(pod.UID), "sibling %s keeps its room", pod.Name)
	}
	assert.Empty(t, f.drainEvents(), "nothing is torn down")
}

func TestASiblingRejectedWithItsGangDoesNotEndTheNextAttempt(t *testing.T) {
	// Room was made for the gang: its attempt ends with no backoff, the
	// waiting siblings are rejected, and a member's next cycle begins
	// before their binding cycles unreserve them.
	f, members := waitingSiblings(t)
	state := f.recorded(members[2])
	state.Write(groupstate.RoomMadeKey, &groupstate.RoomMade{At: f.clock.Now()})
	f.gang.PostFilter(f.ctx, state, members[2], nil)
	require.Equal(t, fwk.Unschedulable, f.outcome(members[0]).Code())
	f.drainEvents()
	_, status := f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[2], nil)
	require.True(t, status.IsSuccess(), status.Message())

	for _, pod := range members[:2] {
		f.fw.RunReservePluginsUnreserve(f.ctx, f.recorded(pod), pod, "node-1")
	}
	assert.Empty(t, f.drainEvents(), "the rejected siblings gave their room up with the attempt that ended")
	_, status = f.gang.PreFilter(f.ctx, framework.NewCycleState(), members[0], nil)
	assert.True(t, status.IsSuccess(), "no backoff: %v", status)
}

// heldNode returns the node of a room the group holds for role.
func heldNode(rooms *groupstate.Rooms, key types.NamespacedName, role string) (string, bool) {
	if r := rooms.Held(key, role); r != nil {
		return r.Node, true
	}
	return "", false
}
