package launchorder

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
	"github.com/muster-dev/muster/pkg/topology"
)

const ns = "team-a"

type fixture struct {
	ctx       context.Context
	logger    klog.Logger
	fw        framework.Framework
	plugin    *LaunchOrder
	pods      cache.Indexer
	model     *group.Model
	events    *events.FakeRecorder
	activator *plugintest.Activator
}

// recorded is a cycle state holding the record Gang's PreFilter, first in
// the profile, leaves for the pod, as the model has its group now.
func (f *fixture) recorded(pod *corev1.Pod) fwk.CycleState {
	return plugintest.Recorded(f.model, pod)
}

func newFixture(t *testing.T, annotations map[string]string, pods ...*corev1.Pod) *fixture {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		ctx: ctx, logger: logger,
		pods:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{group.IndexName: group.IndexFunc}),
		events:    events.NewFakeRecorder(100),
		activator: &plugintest.Activator{},
	}
	podGroups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, podGroups.Add(&v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", Annotations: annotations},
		Spec:       v1alpha1.PodGroupSpec{MinMember: 1},
	}))
	for _, pod := range pods {
		require.NoError(t, f.pods.Add(pod))
	}
	factory := func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		f.model = group.NewModel(podGroups, f.pods, topology.SchedulerName)
		f.plugin = newLaunchOrder(h, f.model, testingclock.NewFakeClock(time.Now()))
		return f.plugin, nil
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterPluginAsExtensions(Name, factory, "Reserve", "Permit"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "muster-scheduler",
		frameworkruntime.WithEventRecorder(f.events),
		frameworkruntime.WithPodActivator(f.activator),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
	)
	require.NoError(t, err)
	f.fw = fw
	return f
}

// turnReady has the worker pod turn Ready, in the pods' cache and in the
// plugin's pod handler, as an informer would.
func (f *fixture) turnReady(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	nowReady := ready(&st.PodWrapper{Pod: *pod.DeepCopy()}).Obj()
	f.update(t, nowReady)
	f.plugin.podChanged(f.logger)(group.Updated(pod, nowReady))
}

// update changes a pod in the pods' cache and tells the group model, as
// the informer would.
func (f *fixture) update(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	old, _, err := f.pods.Get(pod)
	require.NoError(t, err)
	require.NoError(t, f.pods.Update(pod))
	f.model.PodEvents().OnUpdate(old, pod)
}

func rolePod(role, name string) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(name).UID(name).SchedulerName(topology.SchedulerName).
		Label(topology.GroupLabel, "job").Label(topology.RoleLabel, role)
}

func ready(w *st.PodWrapper) *st.PodWrapper {
	pod := w.Node("node-1").Phase(corev1.PodRunning).Obj()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return &st.PodWrapper{Pod: *pod}
}

var mpi = map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}

func TestPermitHoldsTheLauncherUntilTheWorkersAreReady(t *testing.T) {
	launcher := rolePod("launcher", "launcher").Obj()
	notReady := rolePod("worker", "w1").Node("node-1").Phase(corev1.PodRunning).Obj()
	f := newFixture(t, mpi, launcher, ready(rolePod("worker", "w0")).Obj(), notReady)

	state := f.recorded(launcher)
	status := plugintest.Permit(f.ctx, f.fw, state, launcher, "node-1")
	require.Equal(t, fwk.Wait, status.Code())
	assert.Equal(t, "Normal LaunchHeld held until worker is Ready (1/2)", <-f.events.Events)

	// A worker that is updated without becoming Ready frees nothing.
	f.plugin.release(f.logger, types.NamespacedName{Namespace: ns, Name: "job"}, time.Now())
	assert.NotNil(t, f.fw.GetWaitingPod(launcher.UID), "still held")

	f.turnReady(t, notReady)
	assert.True(t, f.fw.WaitOnPermit(f.ctx, launcher).IsSuccess(), "released when the last worker turns Ready")
	assert.Contains(t, <-f.events.Events, "LaunchReleased released after")
}

// An elastic Horovod launcher starts once the min workers are Ready: the
// group is admitted at min, and may never get more; the workers above it
// join through discover_hosts.sh.
func TestAnElasticGroupsLauncherWaitsForTheMinWorkers(t *testing.T) {
	elastic := map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=3", topology.ElasticAnnotation: "2:3"}
	launcher := rolePod("launcher", "launcher").Obj()
	notReady := rolePod("worker", "w1").Node("node-1").Phase(corev1.PodRunning).Obj()
	f := newFixture(t, elastic, launcher, ready(rolePod("worker", "w0")).Obj(), notReady)

	require.Equal(t, fwk.Wait, plugintest.Permit(f.ctx, f.fw, f.recorded(launcher), launcher, "node-1").Code())
	assert.Equal(t, "Normal LaunchHeld held until worker is Ready (1/2)", <-f.events.Events)

	f.turnReady(t, notReady)
	assert.True(t, f.fw.WaitOnPermit(f.ctx, launcher).IsSuccess(), "released at the min, with worker 2 not created")
	assert.Contains(t, <-f.events.Events, "worker is Ready (2/2)")
}

func TestPermitLetsPodsWithoutPredecessorsThrough(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		pod         *corev1.Pod
	}{
		{"a worker has no predecessor", mpi, rolePod("worker", "w0").Obj()},
		{"launch-order none", map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2", topology.LaunchOrderAnnotation: "none"}, rolePod("launcher", "l").Obj()},
		{"a pod without a role", mpi, st.MakePod().Namespace(ns).Name("x").Label(topology.GroupLabel, "job").Obj()},
		{"a pod without a group", mpi, st.MakePod().Namespace(ns).Name("x").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.annotations, tt.pod)
			assert.True(t, plugintest.Permit(f.ctx, f.fw, f.recorded(tt.pod), tt.pod, "node-1").IsSuccess())
		})
	}
}

func TestWakeActivatesSuccessorsWhosePredecessorsAreUp(t *testing.T) {
	// A launcher whose hold timed out is back in the queue; the queue is
	// not told when the workers turn Ready, so the plugin wakes it.
	launcher := rolePod("launcher", "launcher").Obj()
	f := newFixture(t, mpi, launcher, ready(rolePod("worker", "w0")).Obj(), ready(rolePod("worker", "w1")).Obj())
	topo, errs := topology.Parse(mpi)
	require.Empty(t, errs)
	f.plugin.wake(f.logger, types.NamespacedName{Namespace: ns, Name: "job"}, topo)
	assert.Equal(t, []string{"team-a/launcher"}, f.activator.Activated)
}

func TestAHoldThatTimesOutSaysWhatItWaitedFor(t *testing.T) {
	launcher := rolePod("launcher", "launcher").Obj()
	clock := testingclock.NewFakeClock(time.Now())
	f := newFixture(t, mpi, launcher, rolePod("worker", "w0").Node("node-1").Obj())
	f.plugin.clock = clock
	require.Equal(t, fwk.Wait, plugintest.Permit(f.ctx, f.fw, f.recorded(launcher), launcher, "node-1").Code())
	<-f.events.Events

	clock.Step(group.MaxPermitWait)
	f.plugin.Unreserve(f.ctx, f.recorded(launcher), launcher, "node-1")
	assert.Equal(t, "Warning LaunchHoldTimedOut held for 15m0s, the longest a Permit wait may last; back to the queue, still waiting for worker is Ready (0/2)", <-f.events.Events)

	// A hold that ends early, because the gang was torn down, is no
	// timeout.
	require.Equal(t, fwk.Wait, plugintest.Permit(f.ctx, f.fw, f.recorded(launcher), launcher, "node-1").Code())
	<-f.events.Events
	f.plugin.Unreserve(f.ctx, f.recorded(launcher), launcher, "node-1")
	assert.Empty(t, f.events.Events)
}

// TestHeldPodsGauge follows muster_launch_held_pods through every way a
// hold ends: released, timed out, rejected with its gang, and its pod gone.
func TestHeldPodsGauge(t *testing.T) {
	register()
	key := types.NamespacedName{Namespace: ns, Name: "job"}
	heldNow := func(t *testing.T) float64 {
		t.Helper()
		value, err := testutil.GetGaugeMetricValue(heldPods)
		require.NoError(t, err)
		return value
	}
	hold := func(t *testing.T, f *fixture, pod *corev1.Pod) {
		t.Helper()
		require.Equal(t, fwk.Wait, plugintest.Permit(f.ctx, f.fw, f.recorded(pod), pod, "node-1").Code())
	}
	notReady := rolePod("worker", "w0").Node("node-1").Obj()
	tests := []struct {
		name string
		end  func(t *testing.T, f *fixture, launcher *corev1.Pod)
	}{
		{"released", func(t *testing.T, f *fixture, launcher *corev1.Pod) {
			for _, w := range []*corev1.Pod{ready(rolePod("worker", "w0")).Obj(), ready(rolePod("worker", "w1")).Obj()} {
				f.update(t, w)
			}
			f.plugin.release(f.logger, key, time.Now())
			assert.True(t, f.fw.WaitOnPermit(f.ctx, launcher).IsSuccess())
		}},
		{"timed out", func(t *testing.T, f *fixture, launcher *corev1.Pod) {
			f.plugin.clock.(*testingclock.FakeClock).Step(group.MaxPermitWait)
			f.plugin.Unreserve(f.ctx, f.recorded(launcher), launcher, "node-1")
		}},
		{"rejected with its gang", func(t *testing.T, f *fixture, launcher *corev1.Pod) {
			f.fw.GetWaitingPod(launcher.UID).Reject("Gang", "group rejected")
			f.plugin.Unreserve(f.ctx, f.recorded(launcher), launcher, "node-1")
		}},
		{"its pod gone before the release", func(t *testing.T, f *fixture, launcher *corev1.Pod) {
			f.fw.RejectWaitingPod(launcher.UID)
			for _, w := range []*corev1.Pod{ready(rolePod("worker", "w0")).Obj(), ready(rolePod("worker", "w1")).Obj()} {
				f.update(t, w)
			}
			f.plugin.release(f.logger, key, time.Now())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := heldNow(t)
			launcher := rolePod("launcher", "launcher").Obj()
			f := newFixture(t, mpi, launcher, notReady, rolePod("worker", "w1").Obj())
			hold(t, f, launcher)
			// Permit again for the same pod, as after a retry, holds it once.
			f.plugin.addHold(key, launcher)
			assert.Equal(t, before+1, heldNow(t), "one launcher held")
			tt.end(t, f, launcher)
			assert.Equal(t, before, heldNow(t), "the hold is gone from the gauge")
			f.plugin.mu.Lock()
			defer f.plugin.mu.Unlock()
			assert.NotContains(t, f.plugin.held, key, "no empty map of holds is left for the group")
		})
	}
}
