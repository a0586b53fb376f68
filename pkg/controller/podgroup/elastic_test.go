package podgroup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// The members that complete an elastic group's min are bound within a
// second of each other, and idle room is shared at most once a second: a
// group looked at too soon is looked at again as soon as room may be
// shared, not a window later, or it sits at its min for the window.
func TestAGroupBelowItsMaxIsLookedAtAgainAsSoonAsIdleRoomMayBeShared(t *testing.T) {
	pg := podGroup(2, v1alpha1.PodGroupStatus{})
	pg.Annotations = map[string]string{topology.RolesAnnotation: "worker=4", topology.ElasticAnnotation: "2:4"}
	worker := func(i string) *corev1.Pod {
		return member("job-worker-"+i).Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, i).Node("n1").Obj()
	}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pg, worker("0"), worker("1")).
		WithIndex(&corev1.Pod{}, groupField, podGroupIndex).Build()
	clock := testingclock.NewFakeClock(epoch.Time)
	r := &ElasticScaler{Client: c, Rooms: fakeCache{Reader: c}, Reader: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(10), Clock: clock, Window: 15 * time.Second,
		madeRoom: map[types.NamespacedName]time.Time{}, workers: map[types.NamespacedName]int{}, announced: map[types.NamespacedName]int{}}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "job"}}

	result, err := r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Zero(t, result.RequeueAfter, "after a look, the next is when room is freed, on no timer")

	clock.Step(400 * time.Millisecond)
	result, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, idleRoomInterval-400*time.Millisecond, result.RequeueAfter, "too soon to look: looked at again when it may")
}

// ownerReads counts the reads of an owner's scale subresource.
func ownerReads(reads *int) interceptor.Funcs {
	return interceptor.Funcs{SubResourceGet: func(ctx context.Context, c client.Client, subResource string, obj, sub client.Object, opts ...client.SubResourceGetOption) error {
		*reads++
		return c.SubResource(subResource).Get(ctx, obj, sub, opts...)
	}}
}

// elasticSetOnN1 is an elastic group "job" of 2 to 4 one-CPU workers of a
// StatefulSet, and its worker i, bound to node n1.
func elasticSetOnN1() (*v1alpha1.PodGroup, func(i string) *corev1.Pod) {
	pg := podGroup(2, v1alpha1.PodGroupStatus{})
	pg.Annotations = map[string]string{topology.RolesAnnotation: "worker=4", topology.ElasticAnnotation: "2:4"}
	set := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "job-worker", UID: "set", Controller: ptr.To(true)}
	return pg, func(i string) *corev1.Pod {
		pod := member("job-worker-"+i).Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, i).Node("n1").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
		pod.OwnerReferences = []metav1.OwnerReference{*set}
		return pod
	}
}

// A cluster with no idle room costs the elastic scaler no request a
// second: it reads a group's owner only when the plan gives the group room
// to grow into.
func TestNoOwnerIsReadWhileNoRoomIsIdle(t *testing.T) {
	pg, worker := elasticSetOnN1()
	node := func(cpu string) *corev1.Node {
		return st.MakeNode().Name("n1").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourcePods: "110"}).Obj()
	}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	for _, tt := range []struct {
		cpu       string
		wantReads bool
	}{
		{cpu: "2", wantReads: false},
		{cpu: "3", wantReads: true},
	} {
		reads := 0
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pg, worker("0"), worker("1"), node(tt.cpu)).
			WithIndex(&corev1.Pod{}, groupField, podGroupIndex).WithInterceptorFuncs(ownerReads(&reads)).Build()
		r := &ElasticScaler{Client: c, Rooms: fakeCache{Reader: c}, Reader: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(10), Clock: testingclock.NewFakeClock(epoch.Time), Window: 15 * time.Second,
			madeRoom: map[types.NamespacedName]time.Time{}, workers: map[types.NamespacedName]int{}, announced: map[types.NamespacedName]int{}}

		// The fake client serves no scale subresource: what matters is
		// whether it was asked.
		_, _ = r.growIntoIdleRoom(context.Background())
		assert.Equal(t, tt.wantReads, reads > 0, "a node of %s CPUs under two workers of one: owner read %d times", tt.cpu, reads)
	}
}

// Room a gang just created is about to take is not idle: the scaler does
// not grow a group into it before the scheduler has tried the gang, or
// while its PodGroup, just made, waits for its owner's pods; unless they
// were made longer ago than untriedGrace.
func TestRoomAGangNotTriedYetIsAboutToTakeIsNotIdle(t *testing.T) {
	pg, worker := elasticSetOnN1()
	other := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}
	node := st.MakeNode().Name("n1").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "3", corev1.ResourcePods: "110"}).Obj()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	for _, tt := range []struct {
		name      string
		age       time.Duration
		noPodYet  bool
		wantReads bool
	}{
		{"its member made just now", time.Second, false, false},
		{"its member made longer ago than the grace", untriedGrace + time.Second, false, true},
		{"its PodGroup made just now, its pod not yet", time.Second, true, false},
		{"its PodGroup made longer ago than the grace, its pod not yet", untriedGrace + time.Second, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			untried := st.MakePod().Namespace(ns).Name("other-0").UID("other-0").SchedulerName(topology.SchedulerName).Label(topology.GroupLabel, "other").
				Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
			untried.CreationTimestamp = metav1.NewTime(epoch.Add(-tt.age))
			made := other.DeepCopy()
			made.CreationTimestamp = untried.CreationTimestamp
			if !tt.noPodYet {
				made.CreationTimestamp = metav1.NewTime(epoch.Add(-time.Hour))
			}
			objects := []client.Object{pg, made, worker("0"), worker("1"), node}
			if !tt.noPodYet {
				objects = append(objects, untried)
			}
			reads := 0
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).
				WithIndex(&corev1.Pod{}, groupField, podGroupIndex).WithInterceptorFuncs(ownerReads(&reads)).Build()
			r := &ElasticScaler{Client: c, Rooms: fakeCache{Reader: c}, Reader: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(10), Clock: testingclock.NewFakeClock(epoch.Time), Window: 15 * time.Second,
				madeRoom: map[types.NamespacedName]time.Time{}, workers: map[types.NamespacedName]int{}, announced: map[types.NamespacedName]int{}}

			_, _ = r.growIntoIdleRoom(context.Background())
			assert.Equal(t, tt.wantReads, reads > 0, "the node's third CPU, other-0's to take: owner read %d times", reads)
		})
	}
}

// Room that a member's binding took is not idle while the room cache,
// which watches apart from the manager's, has not seen the binding yet:
// a look set off by a gang that stopped waiting would otherwise grow a
// group into the gang's room.
func TestRoomTheRoomCacheHasNotSeenTakenIsNotIdle(t *testing.T) {
	pg := podGroup(1, v1alpha1.PodGroupStatus{})
	pg.Annotations = map[string]string{topology.RolesAnnotation: "worker=4", topology.ElasticAnnotation: "1:4"}
	set := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "job-worker", UID: "set", Controller: ptr.To(true)}
	worker := member("job-worker-0").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0").Node("n1").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	worker.OwnerReferences = []metav1.OwnerReference{*set}
	justBound := st.MakePod().Namespace(ns).Name("gang-0").UID("gang-0").SchedulerName(topology.SchedulerName).Label(topology.GroupLabel, "gang").Node("n1").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	node := st.MakeNode().Name("n1").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourcePods: "110"}).Obj()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	reads := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pg, worker, justBound).
		WithIndex(&corev1.Pod{}, groupField, podGroupIndex).WithInterceptorFuncs(ownerReads(&reads)).Build()
	rooms := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, worker.DeepCopy()).Build()
	r := &ElasticScaler{Client: c, Rooms: fakeCache{Reader: rooms}, Reader: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(10), Clock: testingclock.NewFakeClock(epoch.Time), Window: 15 * time.Second,
		madeRoom: map[types.NamespacedName]time.Time{}, workers: map[types.NamespacedName]int{}, announced: map[types.NamespacedName]int{}}

	_, err := r.growIntoIdleRoom(context.Background())
	require.NoError(t, err)
	assert.Zero(t, reads, "the node's second CPU is gang-0's, bound in the manager's cache")
}

// fakeCache serves a fake client's objects as a cache (the scaler's
// Rooms, Groups' upstream members) whose informers the tests never start.
type fakeCache struct {
	cache.Cache
	client.Reader
}

func (f fakeCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return f.Reader.Get(ctx, key, obj, opts...)
}

func (f fakeCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return f.Reader.List(ctx, list, opts...)
}

// Only an update that may free room sets off a look: a heartbeat does not.
func TestRoomChanged(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}, ResourceVersion: "1"},
		Status:     corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
	}
	heartbeat := node.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	assert.False(t, roomChanged(node, heartbeat), "a heartbeat")

	grown := node.DeepCopy()
	grown.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8")
	assert.True(t, roomChanged(node, grown), "allocatable grew")
	cordoned := node.DeepCopy()
	cordoned.Spec.Unschedulable = true
	assert.True(t, roomChanged(node, cordoned), "schedulability changed")
	relabelled := node.DeepCopy()
	relabelled.Labels["pool"] = "b"
	assert.True(t, roomChanged(node, relabelled), "labels changed")
}

// A gang that waited for room had room kept from growth for it: once it
// no longer waits, or is gone, idle room is shared out at once.
func TestAGangThatStopsWaitingSetsOffALook(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&corev1.Pod{}, groupField, podGroupIndex).Build()
	clock := testingclock.NewFakeClock(epoch.Time)
	r := &ElasticScaler{Client: c, Rooms: fakeCache{Reader: c}, Reader: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(10), Clock: clock, Window: 15 * time.Second,
		madeRoom: map[types.NamespacedName]time.Time{}, workers: map[types.NamespacedName]int{}, announced: map[types.NamespacedName]int{},
		waiting: sets.New[types.NamespacedName]()}
	key := types.NamespacedName{Namespace: ns, Name: "gone"}

	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	require.NoError(t, err)
	assert.True(t, r.lookedForRoom.IsZero(), "a group that never waited sets off no look")

	r.waiting.Insert(key)
	_, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	require.NoError(t, err)
	assert.Equal(t, clock.Now(), r.lookedForRoom, "the room kept for the gone gang was looked at")
	assert.False(t, r.waiting.Has(key))
}
