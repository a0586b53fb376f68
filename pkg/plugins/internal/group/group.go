// Package group is what muster's scheduler plugins share about PodGroups:
// the model of the scheduler's groups (one PodGroup informer, the member
// index, each topology parsed once, bind times), the state the plugins
// change (attempts, rooms held for late members), the marks they leave
// each other in a cycle, and the queueing hints they share.
package group

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
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
