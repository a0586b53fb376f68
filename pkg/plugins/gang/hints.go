package gang

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/topology"
)

// EventsToRegister lists the events that can make a member rejected by this
// plugin schedulable, each with a hint that wakes only the pods it can help.
// A PodGroup created or changed (its minMember lowered, its topology made
// valid) wakes its members from the group model's one PodGroup watch; a
// sibling created, which may complete the group, wakes them from its pod
// handler (podChanged), once, rather than through a queue hint run for
// every pending member on every bind.
func (g *Gang) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A bound pod is deleted or finishes (the scheduler's informer sees
		// a finished pod as deleted), or a reservation is released: room
		// was freed.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: group.IsRoomFreed},
		// A node arrives or grows.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, QueueingHintFn: group.QueueAlways},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeAllocatable}, QueueingHintFn: group.IsAllocatableGrown},
	}, nil
}

// podGroupHandler admits the members waiting at Permit at once when a
// lowered minMember is met; the model wakes the group's pending members. A
// status-only write changes nothing.
func (g *Gang) podGroupHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, okOld := oldObj.(*v1alpha1.PodGroup)
			pg, okNew := newObj.(*v1alpha1.PodGroup)
			if !okOld || !okNew || !group.Changed(old, pg) {
				return
			}
			if key := (types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}); g.attempts.IsWaiting(key) {
				g.admitIfComplete(logger, key, pg, nil)
			}
		},
	}
}

// podChanged forgets the queue place of a pod bound or gone; wakes a
// group's gated members when the member that completes it arrives,
// unscheduled or already bound, and when a member with twins is bound; and
// retries the gangs that wait for room when a group's bound member goes.
// The model has taken the change in already.
func (g *Gang) podChanged(logger klog.Logger) func(group.PodChange) {
	return func(change group.PodChange) {
		pod := change.Pod
		if change.Deleted || pod.Spec.NodeName != "" {
			g.places.forget(pod.UID)
		}
		switch {
		case !change.Grouped:
		case change.Deleted:
			if pod.Spec.NodeName != "" {
				g.retryGangsWaitingForRoom(logger, change.Key)
			}
		case change.Old != nil && change.Old.Spec.NodeName == "" && pod.Spec.NodeName != "":
			// A member bound holds its role and index for good: its twins
			// waiting are told so (heldElsewhere), once.
			if g.groups.HasTwins(pod) {
				g.activate(logger, change.Key)
			}
		case change.Old != nil || !topology.IsActiveMember(pod):
		default:
			pg := g.podGroup(change.Key)
			if pg == nil {
				break
			}
			quorum := topology.QuorumOf(pg)
			switch members := g.groups.Census(change.Key).TowardQuorum() + g.groups.LateMembers(change.Key).Total(); {
			case quorum.CompletedBy(members):
				// The member that completes a group wakes its gated
				// siblings here, once, with the members its owner creates
				// later counted.
				g.activate(logger, change.Key)
			case quorum.EnoughMembers(members, 0):
				// The queue hears of a pod apart from the model, and may
				// have gated this one before the model counted the members
				// that complete the group, and after it woke the members
				// it knew then: this one wakes alone.
				g.groups.ActivateMembers(logger, g.handle, change.Key, []types.UID{pod.UID})
			}
		}
	}
}

// roomFreedBackoff is how long at most a gang that waits for room backs
// off once a bound member of another group is gone, as kube-scheduler's
// initial pod backoff: the room may be enough, and a gang should not sit
// out its whole backoff beside it, yet in a busy cluster a gang that
// cannot fit is not retried on every deletion.
const roomFreedBackoff = time.Second

// retryGangsWaitingForRoom shortens the backoff of the gangs waiting for
// room (topology.WaitingForRoom) when a bound member of a group is gone:
// deleted, or finished, which the scheduler's informer, blind to finished
// pods, tells as gone. Room that an elastic group gives back was made for
// them by muster-controller: they take it at once. Room that any other
// group leaves ends their backoff within roomFreedBackoff of their failure.
func (g *Gang) retryGangsWaitingForRoom(logger klog.Logger, gone types.NamespacedName) {
	after := roomFreedBackoff
	if topo, err := g.groups.Topology(gone); err == nil && topo != nil && topo.Elastic != nil {
		after = 0
	}
	now := g.clock.Now()
	for key := range g.groups.WaitingForRoom() {
		until, shortened := g.attempts.ShortenBackoff(key, after)
		if !shortened {
			continue
		}
		logger.V(5).Info("Shortened a waiting gang's backoff: a group's bound member is gone", "podGroup", key, "from", gone, "retryAt", until)
		if wait := until.Sub(now); wait > 0 {
			g.clock.AfterFunc(wait, func() { g.activate(logger, key) })
			continue
		}
		g.activate(logger, key)
	}
}
