package heldrooms

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// turnedAway holds the pending pods Filter kept off a node for a gang:
// out of room held for its late members, or off room kept for it while it
// waits for its min. When such a gang's PodGroup is deleted, or its held
// room expires, they are moved back to the queue: no queueing hint tells
// of either, as the plugins watch PodGroups only through the group model.
type turnedAway struct {
	mu   sync.Mutex
	pods map[types.UID]*corev1.Pod
	// size lets every pod event skip the lock while none is held.
	size atomic.Int32
}

func newTurnedAway() *turnedAway {
	return &turnedAway{pods: map[types.UID]*corev1.Pod{}}
}

func (t *turnedAway) add(pod *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods[pod.UID] = pod
	t.size.Store(int32(len(t.pods)))
}

// forget drops a pod that no longer waits: bound, or deleted.
func (t *turnedAway) forget(uid types.UID) {
	if t.size.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
	t.size.Store(int32(len(t.pods)))
}

// take returns every pod held, by namespace/name as the queue's Activate
// takes them, and forgets them.
func (t *turnedAway) take() map[string]*corev1.Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	pods := make(map[string]*corev1.Pod, len(t.pods))
	for _, pod := range t.pods {
		pods[pod.Namespace+"/"+pod.Name] = pod
	}
	clear(t.pods)
	t.size.Store(0)
	return pods
}
