package podgroup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
	r := &ElasticScaler{Client: c, Rooms: c, Reader: c, Recorder: record.NewFakeRecorder(10), Clock: clock, Window: 15 * time.Second,
		madeRoom: map[types.NamespacedName]time.Time{}, workers: map[types.NamespacedName]int{}, announced: map[types.NamespacedName]int{}}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "job"}}

	result, err := r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, r.Window, result.RequeueAfter, "after a look, the next is a window later")

	clock.Step(400 * time.Millisecond)
	result, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, idleRoomInterval-400*time.Millisecond, result.RequeueAfter, "too soon to look: looked at again when it may")
}
