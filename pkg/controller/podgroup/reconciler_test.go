package podgroup

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// newFakeClient serves objs as the manager's cache does: PodGroups and
// pods with their status subresource, pods indexed by group.
func newFakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.PodGroup{}, &corev1.Pod{}).
		WithIndex(&corev1.Pod{}, groupField, podGroupIndex).Build()
}

func newReconciler(t *testing.T, objs ...client.Object) (*StatusReconciler, client.Client) {
	t.Helper()
	c := newFakeClient(t, objs...)
	return &StatusReconciler{Client: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(100), Clock: testingclock.NewFakeClock(epoch.Time)}, c
}

func reconcileGroup(t *testing.T, r *StatusReconciler) {
	t.Helper()
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "job"}})
	require.NoError(t, err)
}

func condition(t *testing.T, c client.Client, name string) *corev1.PodCondition {
	t.Helper()
	pod := &corev1.Pod{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod))
	return podScheduledCondition(pod)
}

func TestReconcileTellsWaitingMembersWhy(t *testing.T) {
	r, c := newReconciler(t, podGroup(3, v1alpha1.PodGroupStatus{}), member("a").Obj(), member("b").Obj(),
		member("other").Namespace("team-b").Obj())
	reconcileGroup(t, r)

	for _, name := range []string{"a", "b"} {
		cond := condition(t, c, name)
		require.NotNil(t, cond, "pod %s has no PodScheduled condition", name)
		assert.Equal(t, corev1.ConditionFalse, cond.Status)
		assert.Equal(t, WaitingReason, cond.Reason)
		assert.Equal(t, "waiting for 1 more pods of group team-a/job (2/3)", cond.Message, "the pod of team-b must not count")
	}

	// The missing member arrives: the stale message goes.
	require.NoError(t, c.Create(context.Background(), member("c").Obj()))
	reconcileGroup(t, r)
	for _, name := range []string{"a", "b", "c"} {
		assert.Nil(t, condition(t, c, name), "pod %s still says it waits", name)
	}
	pg := &v1alpha1.PodGroup{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "job"}, pg))
	assert.True(t, epoch.Time.Equal(pg.Status.ScheduleStartTime.Time), "scheduling starts when the group is complete, not at %v", pg.Status.ScheduleStartTime)
}

// TestReconcileCountsOnlyTheGroupsMembers: a pod built for an earlier
// PodGroup of the name is told why it is no member; a pod of another
// scheduler is left as it is, and told of once on the PodGroup; neither
// counts toward minMember.
func TestReconcileCountsOnlyTheGroupsMembers(t *testing.T) {
	pg := podGroup(3, v1alpha1.PodGroupStatus{})
	pg.UID = "now"
	r, c := newReconciler(t, pg, member("a").Obj(), member("b").Annotation(topology.BuiltForAnnotation, "now").Obj(),
		member("stale").Annotation(topology.BuiltForAnnotation, "earlier").Obj(),
		member("foreign").SchedulerName(corev1.DefaultSchedulerName).Obj())
	reconcileGroup(t, r)
	reconcileGroup(t, r)

	for _, name := range []string{"a", "b"} {
		assert.Equal(t, "waiting for 1 more pods of group team-a/job (2/3)", condition(t, c, name).Message, "pod %s", name)
	}
	assert.Contains(t, condition(t, c, "stale").Message, "pod stale was built for an earlier PodGroup team-a/job (UID earlier")
	assert.Nil(t, condition(t, c, "foreign"), "another scheduler's pod is left alone")
	events := r.Recorder.(*record.FakeRecorder).Events
	var told []string
	for len(events) > 0 {
		if e := <-events; strings.Contains(e, ReasonOtherSchedulersPods) {
			told = append(told, e)
		}
	}
	assert.Equal(t, []string{"Warning OtherSchedulersPods pods foreign (default-scheduler) name this group but are for another scheduler (spec.schedulerName), so they are not counted toward its minMember; a group's pods are all muster-scheduler's"},
		told, "told once, over two reconciles")
}

func TestReconcileLeavesTheSchedulersConditionAlone(t *testing.T) {
	pod := member("a").Obj()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/4 nodes are available"}}
	r, c := newReconciler(t, podGroup(1, v1alpha1.PodGroupStatus{}), pod)
	reconcileGroup(t, r)
	assert.Equal(t, "0/4 nodes are available", condition(t, c, "a").Message)
}

func TestReconcileWithoutPodGroup(t *testing.T) {
	r, c := newReconciler(t, member("a").Obj())
	reconcileGroup(t, r)
	cond := condition(t, c, "a")
	require.NotNil(t, cond)
	assert.Equal(t, topology.WaitingForPodGroupMessage(types.NamespacedName{Namespace: ns, Name: "job"}, topology.GroupLabelField), cond.Message)
}

func TestReconcileOfAMemberDeletedWhileItWaitsIsNoError(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	// The member is listed from the cache, then deleted before its
	// condition is written.
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(podGroup(3, v1alpha1.PodGroupStatus{}), member("a").Obj()).
		WithStatusSubresource(&v1alpha1.PodGroup{}, &corev1.Pod{}).
		WithIndex(&corev1.Pod{}, groupField, podGroupIndex).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				return apierrors.NewNotFound(corev1.Resource("pods"), obj.GetName())
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	r := &StatusReconciler{Client: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(100), Clock: testingclock.NewFakeClock(epoch.Time)}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "job"}})
	assert.NoError(t, err, "a member that is gone needs no condition")
}
