package gangpreemption

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// preemptors are the pods held at PreEnqueue while the framework's
// executor deletes the victims of their own preemption (a pod of no gang,
// or a member of a gang that has its quorum). DefaultPreemption registers
// a deleted assigned pod so that the queue looks at such a pod again when
// the last victim goes; GangPreemption registers no event
// (EventsToRegister), so it lets them in itself: on each pod deleted, the
// held pods whose preemption has ended are activated.
type preemptors struct {
	mu   sync.Mutex
	held map[types.UID]*corev1.Pod
}

func newPreemptors() *preemptors { return &preemptors{held: map[types.UID]*corev1.Pod{}} }

// holds reports whether the pod waits for its preemption (running says),
// and if it does keeps it until that ends. running is asked again once
// the pod is kept, so that a last victim deleted between the two is not
// missed: either the second answer or ended sees it gone.
func (p *preemptors) holds(pod *corev1.Pod, running func(types.UID) bool) bool {
	if !running(pod.UID) {
		return false
	}
	p.mu.Lock()
	p.held[pod.UID] = pod
	p.mu.Unlock()
	if running(pod.UID) {
		return true
	}
	p.mu.Lock()
	delete(p.held, pod.UID)
	p.mu.Unlock()
	return false
}

// ended forgets the held pods whose preemption is no longer running, and
// returns them, keyed as the queue's Activate takes them.
func (p *preemptors) ended(running func(types.UID) bool) map[string]*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	var done map[string]*corev1.Pod
	for uid, pod := range p.held {
		if running(uid) {
			continue
		}
		if done == nil {
			done = map[string]*corev1.Pod{}
		}
		done[pod.Namespace+"/"+pod.Name] = pod
		delete(p.held, uid)
	}
	return done
}

// letInPreemptors activates the held pods whose preemption has ended; it
// must not hold preemptors' lock, as Activate takes the queue's, which
// PreEnqueue runs under.
func (pl *GangPreemption) letInPreemptors() {
	if pods := pl.preemptors.ended(pl.executor.IsPodRunningPreemption); len(pods) > 0 {
		klog.Background().V(4).Info("Letting in the pods whose preemption ended", "pods", len(pods))
		pl.handle.Activate(klog.Background(), pods)
	}
}
