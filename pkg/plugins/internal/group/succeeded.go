package group

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/muster-dev/muster/pkg/topology"
)

// succeededPods returns an informer of the pods that succeeded, which the
// scheduler's own pod informer leaves out (it lists no finished pod). A
// member that succeeded counts toward its gang's quorum
// (topology.Census.TowardQuorum), so the model must see it. The informer
// keeps only what a member is counted by (keepWhatCounts), so that the
// finished pods of a busy cluster cost little memory.
func succeededPods(client kubernetes.Interface) (informers.SharedInformerFactory, cache.SharedIndexInformer, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(options *metav1.ListOptions) {
			options.FieldSelector = fields.OneTermEqualSelector("status.phase", string(corev1.PodSucceeded)).String()
		}),
		informers.WithTransform(keepWhatCounts))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{IndexName: IndexFunc}); err != nil {
		return nil, nil, fmt.Errorf("indexing the pods that succeeded by group: %w", err)
	}
	return factory, informer, nil
}

// keepWhatCounts strips a pod that succeeded to what the group state reads
// of it: its group, role, index, scheduler, PodGroup it was built for and
// phase; of a pod of no group, its name alone.
func keepWhatCounts(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	kept := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
	}}
	if _, grouped := topology.GroupOf(pod); !grouped {
		return kept, nil
	}
	kept.Labels, kept.Annotations, kept.CreationTimestamp = pod.Labels, pod.Annotations, pod.CreationTimestamp
	kept.Spec = corev1.PodSpec{SchedulerName: pod.Spec.SchedulerName, SchedulingGroup: pod.Spec.SchedulingGroup, NodeName: pod.Spec.NodeName}
	kept.Status.Phase = pod.Status.Phase
	return kept, nil
}

// SucceededPodEvents is the handler of the pods that succeeded: each
// member is kept, counted toward its gang's quorum, until it is deleted,
// and its group's pending members are woken, as it may complete their
// quorum: the replacement of a member lost may have been turned away just
// before.
func (m *Model) SucceededPodEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				m.observeSucceeded(pod)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if pod, ok := newObj.(*corev1.Pod); ok {
				m.observeSucceeded(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				if key, grouped := topology.GroupOf(pod); grouped {
					m.forgetPod(key, pod)
				}
			}
		},
	}
}

func (m *Model) observeSucceeded(pod *corev1.Pod) {
	key, grouped := topology.GroupOf(pod)
	if !grouped {
		return
	}
	m.observePod(key, pod)
	m.wake(key)
}
