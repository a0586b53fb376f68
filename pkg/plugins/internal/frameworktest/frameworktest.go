// Package frameworktest builds, for unit tests, the scheduler framework of
// a profile over a cluster held in memory: the pods and PodGroups in a fake
// client's informers and in the scheduler's group model, and a snapshot of
// the nodes with the bound pods. The profile's own plugins decide fit, as
// in muster-scheduler.
package frameworktest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/plugintest"
	"github.com/muster-dev/muster/pkg/topology"
)

// Cluster is a unit test's cluster. Its pods are in the pod informer's
// store, which the group model reads; a test that needs the model's
// states to have heard of them tells it (Model.Take).
type Cluster struct {
	Ctx      context.Context
	Client   *fake.Clientset
	Factory  informers.SharedInformerFactory
	Model    *group.Model
	Snapshot *internalcache.Snapshot
	// DRA, when set, is the framework's DRA manager.
	DRA fwk.SharedDRAManager
	// Activator stands in for the queue: the pods the plugins activate.
	Activator *plugintest.Activator
}

// NewCluster holds the nodes, pods and PodGroups.
func NewCluster(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, pgs []*v1alpha1.PodGroup) *Cluster {
	t.Helper()
	schedulermetrics.Register()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var objects []runtime.Object
	var bound []*corev1.Pod
	for _, pod := range pods {
		objects = append(objects, pod)
		if pod.Spec.NodeName != "" {
			bound = append(bound, pod)
		}
	}
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	require.NoError(t, podInformer.AddIndexers(cache.Indexers{group.IndexName: group.IndexFunc}))
	for _, pod := range pods {
		require.NoError(t, podInformer.GetStore().Add(pod))
	}
	podGroups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pg := range pgs {
		require.NoError(t, podGroups.Add(pg))
	}
	return &Cluster{
		Ctx: ctx, Client: client, Factory: factory,
		Model:     group.NewModel(podGroups, podInformer.GetIndexer(), topology.SchedulerName),
		Snapshot:  internalcache.NewSnapshot(bound, nodes),
		Activator: &plugintest.Activator{},
	}
}

// Framework builds muster-scheduler's framework over the cluster with the
// plugins, besides a queue sort and the default binder.
func (c *Cluster) Framework(t *testing.T, plugins ...tf.RegisterPluginFunc) framework.Framework {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	registered := append([]tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, plugins...)
	options := []frameworkruntime.Option{
		frameworkruntime.WithClientSet(c.Client),
		frameworkruntime.WithEventRecorder(events.NewFakeRecorder(100)),
		frameworkruntime.WithInformerFactory(c.Factory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, c.Factory)),
		frameworkruntime.WithSnapshotSharedLister(c.Snapshot),
		frameworkruntime.WithMutableSnapshotLister(c.Snapshot),
		frameworkruntime.WithLogger(logger),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithPodActivator(c.Activator),
	}
	if c.DRA != nil {
		options = append(options, frameworkruntime.WithSharedDRAManager(c.DRA))
	}
	fw, err := tf.NewFramework(c.Ctx, registered, topology.SchedulerName, options...)
	require.NoError(t, err)
	return fw
}

// Filters registers, at PreFilter and Filter, the default filters that
// matter to muster's tests: node selectors and affinity, resources, host
// ports, inter-pod affinity, and topology spreading as muster's profile
// sets it, with no system default.
func Filters() []tf.RegisterPluginFunc {
	fit := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return noderesources.NewFit(ctx, &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
			Type: config.LeastAllocated, Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}}}}, h, feature.Features{})
	}
	ports := func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return nodeports.New(ctx, obj, h, feature.Features{})
	}
	affinity := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return interpodaffinity.New(ctx, &config.InterPodAffinityArgs{}, h, feature.Features{})
	}
	spread := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return podtopologyspread.New(ctx, &config.PodTopologySpreadArgs{DefaultingType: config.ListDefaulting}, h, feature.Features{})
	}
	selector := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return nodeaffinity.New(ctx, &config.NodeAffinityArgs{}, h, feature.Features{})
	}
	return []tf.RegisterPluginFunc{
		tf.RegisterPluginAsExtensions(nodeaffinity.Name, selector, "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(noderesources.Name, fit, "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(nodeports.Name, ports, "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(interpodaffinity.Name, affinity, "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(podtopologyspread.Name, spread, "PreFilter", "Filter"),
	}
}
