package launchorder

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/topology"
)

// EventsToRegister lists the events that can help a pod this plugin turned
// away: a sibling's state changing. Its PodGroup fixed wakes it from the
// group model's one PodGroup watch.
func (l *LaunchOrder) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Update}, QueueingHintFn: isSiblingUpdated},
	}, nil
}

func isSiblingUpdated(_ klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	_, updated, err := util.As[*corev1.Pod](nil, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	key, ok := topology.GroupOf(pod)
	other, otherOK := topology.GroupOf(updated)
	if ok && otherOK && key == other && updated.UID != pod.UID {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// podHandler acts when a member reaches its group's start-after state: it
// releases the held successors that now may bind, and wakes those that
// went back to the queue after a hold timed out, as the queue is not told
// of a bound pod's status changes. Only such transitions count, so a
// member's routine status updates cost nothing.
func (l *LaunchOrder) podChanged(logger klog.Logger) func(group.PodChange) {
	return func(change group.PodChange) {
		if !change.Grouped || change.Deleted || !reachedAnyNow(change.Old, change.Pod) {
			return
		}
		topo, err := l.topology(change.Key)
		if err != nil || topo == nil || !ordered(topo) {
			return
		}
		if !topology.HasReached(change.Pod, topo.StartAfter) || (change.Old != nil && topology.HasReached(change.Old, topo.StartAfter)) {
			return
		}
		l.release(logger, change.Key, l.clock.Now())
		l.wake(logger, change.Key, topo)
	}
}

// ordered reports whether a role of the group waits for another: a group
// without a launch order has no successor to release or wake.
func ordered(topo *topology.Topology) bool {
	for _, role := range topo.Roles {
		if len(topo.Predecessors(role)) > 0 {
			return true
		}
	}
	return false
}

// reachedAnyNow reports whether the pod reached a start-after state it had
// not reached before, whichever the group's is: most of a member's status
// updates reach none, and cost no read of its group.
func reachedAnyNow(old, pod *corev1.Pod) bool {
	for _, state := range []topology.StartAfter{topology.StartAfterScheduled, topology.StartAfterRunning, topology.StartAfterReady} {
		if topology.HasReached(pod, state) && (old == nil || !topology.HasReached(old, state)) {
			return true
		}
	}
	return false
}

// podGroupHandler re-evaluates a group's holds when its PodGroup's spec or
// topology changes, for example its start-after; a status-only write
// changes nothing.
func (l *LaunchOrder) podGroupHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, okOld := oldObj.(*v1alpha1.PodGroup)
			pg, okNew := newObj.(*v1alpha1.PodGroup)
			if okOld && okNew && group.Changed(old, pg) {
				l.release(logger, types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, l.clock.Now())
			}
		},
	}
}

// wake moves the group's unbound, unheld successors whose predecessors are
// up back to the active queue: those that left Permit on a timeout.
func (l *LaunchOrder) wake(logger klog.Logger, key types.NamespacedName, topo *topology.Topology) {
	unbound := l.groups.Pending(key)
	l.mu.Lock()
	held := l.held[key]
	pending := map[string]*corev1.Pod{}
	for _, pod := range unbound {
		role, ok := topology.RoleOf(pod)
		if !ok || len(topo.Predecessors(role)) == 0 {
			continue
		}
		if _, isHeld := held[pod.UID]; !isHeld {
			pending[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	l.mu.Unlock()
	for name, pod := range pending {
		role, _ := topology.RoleOf(pod)
		if len(l.unmet(key, topo, role)) > 0 {
			delete(pending, name)
		}
	}
	if len(pending) > 0 {
		l.handle.Activate(logger, pending)
	}
}
