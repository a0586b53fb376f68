// Package group is what muster's scheduler plugins share about PodGroups:
// the model of the scheduler's groups (one PodGroup informer, the member
// index, each topology parsed once, bind times), the state the plugins
// change (attempts, rooms held for late members), the marks they leave
// each other in a cycle, and the queueing hints they share.
package group

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

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

// PodGroupResource is how the scheduler names PodGroup events: the
// resource.version.group of the CRD, watched through a dynamic informer.
var PodGroupResource = fwk.EventResource(fmt.Sprintf("podgroups.%s.%s", v1alpha1.SchemeGroupVersion.Version, v1alpha1.SchemeGroupVersion.Group))

// IsOwnPodGroup is a queueing hint: it wakes a pod when its own PodGroup is
// created, or changed in a way that matters to scheduling (Changed); a
// status-only write wakes nobody.
func IsOwnPodGroup(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	obj, err := meta.Accessor(newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("reading a PodGroup event: %w", err)
	}
	key, ok := topology.GroupOf(pod)
	if !ok || key != (types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}) {
		return fwk.QueueSkip, nil
	}
	if oldObj == nil {
		logger.V(5).Info("PodGroup created; the pod may be schedulable", "pod", klog.KObj(pod), "podGroup", key)
		return fwk.Queue, nil
	}
	old, errOld := asPodGroup(oldObj)
	updated, errNew := asPodGroup(newObj)
	if errOld != nil || errNew != nil {
		return fwk.Queue, fmt.Errorf("reading a PodGroup event: %w", errors.Join(errOld, errNew))
	}
	if !Changed(old, updated) {
		logger.V(5).Info("PodGroup update changed neither its spec nor its topology; the pod stays", "pod", klog.KObj(pod), "podGroup", key)
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("PodGroup spec or topology changed; the pod may be schedulable", "pod", klog.KObj(pod), "podGroup", key)
	return fwk.Queue, nil
}

// asPodGroup reads a PodGroup from an event: the scheduler's own informer
// hands over unstructured objects.
func asPodGroup(obj any) (*v1alpha1.PodGroup, error) {
	switch obj := obj.(type) {
	case *v1alpha1.PodGroup:
		return obj, nil
	case *unstructured.Unstructured:
		pg := &v1alpha1.PodGroup{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), pg); err != nil {
			return nil, err
		}
		return pg, nil
	}
	return nil, fmt.Errorf("unexpected object of type %T", obj)
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

// RecordEvent records an event on the PodGroup, in whichever API it lives.
// The reference is built by hand: the event recorder's scheme does not
// know the PodGroup types.
func RecordEvent(handle fwk.Handle, pg *v1alpha1.PodGroup, eventType, reason, action, note string) {
	apiVersion := v1alpha1.SchemeGroupVersion.String()
	if topology.IsUpstream(pg) {
		apiVersion = topology.UpstreamPodGroupVersion.String()
	}
	ref := &corev1.ObjectReference{
		APIVersion: apiVersion,
		Kind:       "PodGroup",
		Namespace:  pg.Namespace,
		Name:       pg.Name,
		UID:        pg.UID,
	}
	handle.EventRecorder().Eventf(ref, nil, eventType, reason, action, "%s", note)
}
