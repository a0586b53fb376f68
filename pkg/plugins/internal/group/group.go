// Package group is what muster's scheduler plugins share about PodGroups:
// the index that finds a group's members in the scheduler's pod informer,
// the PodGroup informer, and the queueing hint for PodGroup events.
package group

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	schedulinginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	schedulinglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// IndexName indexes the scheduler's pod informer by "namespace/group", so
// that a member's siblings are found without scanning the cluster's pods.
const IndexName = "muster.dev/pod-group"

// IndexFunc is the index's function.
func IndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if key, ok := topology.GroupOf(pod); ok {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// PodIndexer returns the scheduler's pod informer with the group index,
// adding the index unless another plugin already has.
func PodIndexer(handle framework.Handle) (cache.SharedIndexInformer, error) {
	informer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if _, ok := informer.GetIndexer().GetIndexers()[IndexName]; ok {
		return informer, nil
	}
	if err := informer.AddIndexers(cache.Indexers{IndexName: IndexFunc}); err != nil {
		return nil, fmt.Errorf("indexing pods by group: %w", err)
	}
	return informer, nil
}

// Members returns the pods of the group that the indexer holds.
func Members(indexer cache.Indexer, key types.NamespacedName) ([]*corev1.Pod, error) {
	objs, err := indexer.ByIndex(IndexName, key.String())
	if err != nil {
		return nil, fmt.Errorf("listing the members of %s: %w", key, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		pods = append(pods, obj.(*corev1.Pod))
	}
	return pods, nil
}

// PodGroupInformer starts an informer of PodGroups and waits for it to
// sync; handler, when not nil, is told of every change.
func PodGroupInformer(ctx context.Context, handle framework.Handle, handler cache.ResourceEventHandler) (schedulinglisters.PodGroupLister, error) {
	client, err := schedulingclient.NewForConfig(handle.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("creating the PodGroup client: %w", err)
	}
	factory := schedulinginformers.NewSharedInformerFactory(client, 0)
	podGroups := factory.Scheduling().V1alpha1().PodGroups()
	if handler != nil {
		if _, err := podGroups.Informer().AddEventHandler(handler); err != nil {
			return nil, fmt.Errorf("watching PodGroups: %w", err)
		}
	}
	factory.Start(ctx.Done())
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return nil, fmt.Errorf("syncing the informer of %v", typ)
		}
	}
	return podGroups.Lister(), nil
}

// PodGroupResource is how the scheduler names PodGroup events: the
// resource.version.group of the CRD, watched through a dynamic informer.
var PodGroupResource = fwk.EventResource(fmt.Sprintf("podgroups.%s.%s", v1alpha1.SchemeGroupVersion.Version, v1alpha1.SchemeGroupVersion.Group))

// IsOwnPodGroup is a queueing hint: it wakes a pod on an event of its own
// PodGroup only.
func IsOwnPodGroup(_ klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	obj, err := meta.Accessor(newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("reading a PodGroup event: %w", err)
	}
	key, ok := topology.GroupOf(pod)
	if ok && key == (types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// KeyOf returns the key of a PodGroup seen by an informer handler, which
// may hand over a tombstone.
func KeyOf(obj any) (types.NamespacedName, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pg, ok := obj.(*v1alpha1.PodGroup)
	if !ok {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, true
}
