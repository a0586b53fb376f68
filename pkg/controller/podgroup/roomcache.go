package podgroup

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewRoomCache returns the cache the elastic scaler reads each node's free
// room from: every node, and every pod bound to a node that has not
// finished, each kept with only the fields that room is counted from. It is
// filled by one LIST of each at start and kept by watches, so that how
// often the scaler looks costs the API server nothing, whatever the
// cluster's size. The manager's own cache keeps grouped pods only.
func NewRoomCache(config *rest.Config, scheme *runtime.Scheme) (cache.Cache, error) {
	running := fields.AndSelectors(
		fields.OneTermNotEqualSelector("spec.nodeName", ""),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
	)
	c, err := cache.New(config, cache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Field: running, Transform: roomOfPod},
			&corev1.Node{}: {Transform: roomOfNode},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of nodes and bound pods: %w", err)
	}
	return c, nil
}

// roomOfPod keeps of a pod what takes room on its node: its node, whether
// it is active, and what resources.OfPod reads.
func roomOfPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	kept := &corev1.Pod{
		ObjectMeta: identityOf(pod.ObjectMeta),
		Spec: corev1.PodSpec{
			NodeName:  pod.Spec.NodeName,
			Overhead:  pod.Spec.Overhead,
			Resources: pod.Spec.Resources,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, c := range pod.Spec.Containers {
		kept.Spec.Containers = append(kept.Spec.Containers, corev1.Container{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.InitContainers {
		kept.Spec.InitContainers = append(kept.Spec.InitContainers, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	return kept, nil
}

// roomOfNode keeps of a node what says which pods may use it and how much
// it holds: its labels, taints, schedulability and allocatable.
func roomOfNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	meta := identityOf(node.ObjectMeta)
	meta.Labels = node.Labels
	return &corev1.Node{
		ObjectMeta: meta,
		Spec:       corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: node.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: node.Status.Allocatable},
	}, nil
}

// identityOf keeps an object's identity, what an informer needs to
// key and update it, and whether it is being deleted.
func identityOf(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
	}
}
