// Package gang implements the Gang scheduler plugin: the pods of a PodGroup
// (scheduling.x-k8s.io/v1alpha1) are placed all-or-nothing.
//
//   - PreEnqueue keeps a member out of the queue until its PodGroup exists
//     and the group has minMember active pods, and while another member
//     holds its role and index (PreFilter checks that again).
//   - QueueSort keeps a gang's members back to back.
//   - Reserve and Permit hold members, reservations kept, until bound and
//     reserved members, with room held for the members their owner
//     creates later, reach minMember; then all are allowed at once.
//   - PreBind and PostBind let the members allowed together bind a
//     bounded number at a time (maxConcurrentBinds).
//   - PostFilter and Unreserve tear down a group that fails before quorum:
//     every waiting sibling is rejected and the group backs off.
//   - QueueingHints wake a group's pods on the events that can help it.
package gang

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/plugins/internal/stranded"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = "Gang"

var (
	_ fwk.PreEnqueuePlugin  = &Gang{}
	_ fwk.QueueSortPlugin   = &Gang{}
	_ fwk.PreFilterPlugin   = &Gang{}
	_ fwk.PostFilterPlugin  = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.PreBindPlugin     = &Gang{}
	_ fwk.PostBindPlugin    = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
)

// Groups is what Gang reads of the scheduler's groups, and asks of the
// group model that owns them (group.Model).
type Groups interface {
	PodGroup(key types.NamespacedName) *v1alpha1.PodGroup
	PodGroupsOf(key types.NamespacedName, pod *corev1.Pod) (*v1alpha1.PodGroup, *schedulingv1beta1.PodGroup)
	UpstreamPodGroup(key types.NamespacedName) *schedulingv1beta1.PodGroup
	NotAMember(pod *corev1.Pod, pg *v1alpha1.PodGroup) string
	Members(key types.NamespacedName) ([]*corev1.Pod, error)
	Topology(key types.NamespacedName) (*topology.Topology, error)
	TopologyOf(key types.NamespacedName, pg *v1alpha1.PodGroup) (*topology.Topology, error)
	Census(key types.NamespacedName) topology.Census
	BoundCount(key types.NamespacedName) int32
	LateMembers(key types.NamespacedName) group.LateMembers
	LateMembersOf(key types.NamespacedName, topo *topology.Topology) group.LateMembers
	Quorum(key types.NamespacedName, minMember int32, counting groupstate.Counting) (placed int32, reached bool)
	QueuePlaceOf(key types.NamespacedName, pg *v1alpha1.PodGroup) group.QueuePlace
	WaitingForRoom() map[types.NamespacedName]topology.WaitingGang
	ScheduleTimeout(pg *v1alpha1.PodGroup) time.Duration
	HasTwins(pod *corev1.Pod) bool
	HolderOf(key types.NamespacedName, topo *topology.Topology, pod *corev1.Pod) (*corev1.Pod, bool)
	TellHeld(handle fwk.Handle, pod, holder *corev1.Pod)
	ActivatePending(logger klog.Logger, activator fwk.PodActivator, key types.NamespacedName)
	ActivateMembers(logger klog.Logger, activator fwk.PodActivator, key types.NamespacedName, uids []types.UID)
	RecordInitiallyScheduled(logger klog.Logger, pg *v1alpha1.PodGroup, scheduled bool, message string)
}

// Gang places a PodGroup's pods all-or-nothing. The state it changes, the
// attempts, is the group model's.
type Gang struct {
	handle   fwk.Handle
	args     Args
	groups   Groups
	attempts *groupstate.Attempts
	places   *queuePlaces
	binds    bindSlots
	clock    clock.WithDelayedExecution
}

// New builds the plugin from its args, the framework's handle and the
// scheduler's group model.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, groups *group.Model) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	register()
	g := newGang(handle, args, groups, clock.RealClock{})
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	stranded.New(logger, handle, groups, g.clock, reportEvicted)
	groups.OnPodGroupChange(g.podGroupHandler(logger))
	groups.OnPodChange(g.podChanged(logger))
	return g, nil
}

func newGang(handle fwk.Handle, args Args, groups *group.Model, clk clock.WithDelayedExecution) *Gang {
	groups.SetDefaultScheduleTimeout(args.permitTimeout())
	return &Gang{
		handle:   handle,
		args:     args,
		groups:   groups,
		attempts: groups.Attempts(),
		places:   newQueuePlaces(),
		binds:    newBindSlots(args.MaxConcurrentBinds),
		clock:    clk,
	}
}

// Name returns the plugin's name.
func (g *Gang) Name() string { return Name }

// PreEnqueue keeps a member out of the queue until its PodGroup exists and
// the group has at least minMember active pods, while another member
// holds its role and index, and while its PodGroup's topology is invalid,
// so that such a group is never scheduled half right.
func (g *Gang) PreEnqueue(_ context.Context, pod *corev1.Pod) *fwk.Status {
	key, ok := topology.GroupOf(pod)
	if !ok {
		return nil
	}
	pg := g.podGroup(key)
	if pg == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, topology.WaitingForPodGroupMessage(key, topology.GroupFieldOf(pod)))
	}
	if why := g.groups.NotAMember(pod, pg); why != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	if topology.IsUpstream(pg) {
		if upstream := g.groups.UpstreamPodGroup(key); upstream != nil {
			if refused := topology.RefusedMember(pod, upstream); refused != nil {
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, refused.Detail)
			}
		}
	}
	topo, err := g.groups.TopologyOf(key, pg)
	if err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	if status := g.heldElsewhere(key, topo, pod); status != nil {
		return status
	}
	// Members their owner creates only later count: room is held for them.
	// So do those that succeeded (topology.Census.TowardQuorum).
	if members, late := g.groups.Census(key).TowardQuorum(), g.groups.LateMembersOf(key, topo).Total(); !topology.QuorumOf(pg).EnoughMembers(members, late) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, topology.WaitingForMembersMessage(key, members+late, pg.Spec.MinMember))
	}
	g.attempts.Seen(key, g.clock.Now())
	return nil
}

// Less orders the queue by priority; then a gang left partly bound (after a
// scheduler restart, say) ahead of every gang with no member bound, so that
// nothing takes the room its missing members need; then a gang whose
// attempt holds reservations ahead of every gang whose attempt does not,
// so that attempts do not overlap; then an elastic group's
// members above its min behind every other pod, least fulfilled group
// first; then by the group's creation time or, after a failed attempt, the
// time it failed, so that one stuck gang cannot hold back the rest (an
// attempt that ended to wait for its victims, or whose domain another pod
// took, keeps the place: groupstate.Ending); then, as
// creation times have a second's grain, by the time the gang first had
// its quorum of members; then by group and pod, so that a gang's members
// are popped back to back. While a pod stays queued its place only moves
// forward (queuePlaces): the active queue is a heap, which a place that
// moves back under it leaves out of order.
//
// Since 1.37 the queue holds entities, not pods. Every rule after priority
// is about the pod and its group, so Less reaches the pod behind a pod
// entity (queuedPod). An entity that is not one pod, an upstream
// scheduling.k8s.io PodGroup scheduled as a unit, is ordered as
// PrioritySort orders it: by priority, then by the time it was queued.
func (g *Gang) Less(a, b fwk.QueuedEntityInfo) bool {
	podA, okA := queuedPod(a)
	podB, okB := queuedPod(b)
	if !okA || !okB {
		if a.GetPriority() != b.GetPriority() {
			return a.GetPriority() > b.GetPriority()
		}
		return a.GetTimestamp().Before(b.GetTimestamp())
	}
	if prioA, prioB := corev1helpers.PodPriority(podA), corev1helpers.PodPriority(podB); prioA != prioB {
		return prioA > prioB
	}
	currentA, currentB := g.currentPlaces(a, podA, b, podB)
	placeA, placeB := g.places.of(podA.UID, a.GetTimestamp(), currentA), g.places.of(podB.UID, b.GetTimestamp(), currentB)
	if placeA.before(placeB) {
		return true
	}
	if placeB.before(placeA) {
		return false
	}
	return cmp.Or(cmp.Compare(podA.Namespace, podB.Namespace), cmp.Compare(podA.Name, podB.Name)) < 0
}

// before reports whether a pod placed at p is popped before one placed at
// o, by Less's rules after priority.
func (p queuePlace) before(o queuePlace) bool {
	if p.PartlyBound != o.PartlyBound {
		return p.PartlyBound
	}
	// A gang whose members wait at Permit is finished before another
	// starts, which would take the room of the domain chosen for it.
	if p.Reserving != o.Reserving {
		return p.Reserving
	}
	// An elastic group's members above its min take only room no gang
	// needs for its own min, and idle room goes to the least fulfilled
	// group first (Paddle EDL).
	if p.ElasticExtra != o.ElasticExtra {
		return o.ElasticExtra
	}
	if p.ElasticExtra && p.Fulfillment != o.Fulfillment {
		return p.Fulfillment < o.Fulfillment
	}
	if !p.at.Equal(o.at) {
		return p.at.Before(o.at)
	}
	if !p.SeenAt.Equal(o.SeenAt) {
		return p.SeenAt.Before(o.SeenAt)
	}
	return p.key < o.key
}

// podEntity is a queued entity that is one pod: kube-scheduler's
// QueuedPodInfo, whose pod the fwk interface does not expose.
type podEntity interface {
	GetPodInfo() fwk.PodInfo
}

// queuedPod returns the pod of an entity that is one pod.
func queuedPod(entity fwk.QueuedEntityInfo) (*corev1.Pod, bool) {
	if entity.Type() != fwk.PodKeyType {
		return nil, false
	}
	info, ok := entity.(podEntity)
	if !ok || info.GetPodInfo() == nil {
		return nil, false
	}
	return info.GetPodInfo().GetPod(), true
}

// queuePlace is where Less places a pod: its group's place, the time it is
// queued by (its group's creation or, after a failed attempt, the
// failure's), and the key it is sorted by; a pod of no group, or whose
// PodGroup is missing, is placed by its own time and key.
type queuePlace struct {
	group.QueuePlace
	at  time.Time
	key string
}

// currentPlaces returns the two pods' places as they are now, before Less
// keeps the better of each and the pod's kept place (queuePlaces). Members
// of one group, the most compared in a gang's stay in the queue, share its
// place, read once.
func (g *Gang) currentPlaces(a fwk.QueuedEntityInfo, podA *corev1.Pod, b fwk.QueuedEntityInfo, podB *corev1.Pod) (queuePlace, queuePlace) {
	keyA, groupedA := topology.GroupOf(podA)
	keyB, groupedB := topology.GroupOf(podB)
	placeA, ok := g.groupPlace(keyA, groupedA)
	if !ok {
		placeA = podPlace(a, podA)
	} else if groupedB && keyB == keyA {
		return placeA, placeA
	}
	placeB, ok := g.groupPlace(keyB, groupedB)
	if !ok {
		placeB = podPlace(b, podB)
	}
	return placeA, placeB
}

// groupPlace is the place of the members of a group whose PodGroup exists.
func (g *Gang) groupPlace(key types.NamespacedName, grouped bool) (queuePlace, bool) {
	if !grouped {
		return queuePlace{}, false
	}
	pg := g.podGroup(key)
	if pg == nil {
		return queuePlace{}, false
	}
	p := queuePlace{QueuePlace: g.groups.QueuePlaceOf(key, pg), at: pg.CreationTimestamp.Time, key: key.String()}
	if p.QueuedAt.After(p.at) {
		p.at = p.QueuedAt
	}
	return p, true
}

// podPlace is the place of a pod of no group, or whose PodGroup is
// missing.
func podPlace(info fwk.QueuedEntityInfo, pod *corev1.Pod) queuePlace {
	p := queuePlace{at: info.GetTimestamp(), key: pod.Namespace + "/" + pod.Name}
	if initial := info.GetInitialAttemptTimestamp(); initial != nil {
		p.at = *initial
	}
	return p
}

// PreFilter records the pod's group for the rest of the cycle
// (groupstate.Cycle), for every pod, before anything can turn it away: it
// runs first, and PostFilter runs after a rejection. It turns a member
// away while its group backs off, and rejects a group whose minResources
// exceed what the cluster has free before any member is placed.
func (g *Gang) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, ok := topology.GroupOf(pod)
	if !ok {
		groupstate.Record(state, &groupstate.Cycle{})
		return nil, nil
	}
	pg, named := g.groups.PodGroupsOf(key, pod)
	cycle := &groupstate.Cycle{Grouped: true, Key: key, PodGroup: pg, NamedPodGroup: named}
	if pg == nil {
		groupstate.Record(state, cycle)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, topology.WaitingForPodGroupMessage(key, topology.GroupFieldOf(pod)))
	}
	cycle.Topology, cycle.TopologyErr = g.groups.TopologyOf(key, pg)
	groupstate.Record(state, cycle)
	// Checked again here: a pod that passed PreEnqueue before its twin was
	// seen must not be placed beside it.
	if status := g.heldElsewhere(key, cycle.Topology, pod); status != nil {
		return nil, status
	}
	if status := g.backoffStatus(key); status != nil {
		g.attempts.TurnAway(key, pod.UID)
		return nil, status
	}
	g.attempts.Begin(key)
	entered := *cycle
	entered.Entered = true
	groupstate.Record(state, &entered)
	if placed, _ := g.quorum(key, pg); len(pg.Spec.MinResources) > 0 && placed == 0 {
		if short := shortfall(pg.Spec.MinResources, nodes); short != "" {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("group %s needs minResources the cluster does not have free: %s", key, short))
		}
	}
	return nil, nil
}

// PreFilterExtensions returns nil: the plugin keeps no per-cycle state.
func (g *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// PostFilter ends the attempt of a gang short of its quorum whose member
// fits nowhere: every waiting sibling is rejected, so that none keeps a
// reservation for a gang that cannot start yet. It runs after
// GangPreemption: when that made room for the gang's missing members
// (groupstate.RoomMade), the gang retries with no backoff as the victims go,
// and the status stays Unschedulable, keeping the preemption's nomination;
// a member that finds its room not free yet fails alone.
func (g *Gang) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if !cycle.Grouped {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	key, pg := cycle.Key, cycle.PodGroup
	if pg == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, topology.WaitingForPodGroupMessage(key, topology.GroupFieldOf(pod)))
	}
	if _, reached := g.quorum(key, pg); reached {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	// A member whose place another holds fails alone; its gang goes on.
	if status := g.heldElsewhere(key, cycle.Topology, pod); status != nil {
		return nil, status
	}
	// Turned away at PreFilter: the attempt already failed, and the
	// scheduler writes PreFilter's message, which says why; the same here
	// would be written twice.
	if status := g.backoffStatus(key); status != nil {
		return nil, fwk.NewStatus(status.Code())
	}
	if made, ok := groupstate.RoomMadeIn(state); ok {
		if made.Pending {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("group %s waits for the room made for it", key))
		}
		if !made.At.IsZero() {
			g.attempts.Preempted(key, made.At)
		}
		g.rejectGroup(ctx, key, pg, fmt.Sprintf("member %s fits once the victims preempted for the gang are gone", pod.Name), 0, groupstate.WaitsForVictims)
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("group %s waits for the room made for it", key))
	}
	fitsNowhere := fmt.Sprintf("member %s fits on no node", pod.Name)
	if why := nodeReasons(statuses, g.handle.SnapshotSharedLister().NodeInfos()); why != "" {
		fitsNowhere += " (" + why + ")"
	}
	if short := g.devicesShort(ctx, key); short != "" {
		group.ReportDeviceShortfall(group.ShortOnNodes)
		fitsNowhere += ": " + short
	}
	reason := fitsNowhere + ", and no lower-priority victims would make room for all the members the gang lacks"
	backoff, ending := g.args.backoff(), groupstate.FoundNoRoom
	if failed, ok := groupstate.SearchFailedIn(state); ok {
		// An error is not an answer: the gang is told it, whatever its domain.
		reason = fmt.Sprintf("%s, and the search for lower-priority victims failed: %v", fitsNowhere, failed.Err)
	} else if d, chosen := g.attempts.Domain(key); chosen {
		switch {
		case d.WaitsForClaims:
			// No failure: the gang tries again soon, and its members'
			// status says what it waits for.
			reason = d.Unplaceable
			backoff, ending = anotherDomainBackoff, groupstate.WaitsForClaims
		case d.Unplaceable != "":
			// Placement found no topology domain for the gang: that says more.
			reason = d.Unplaceable
		case d.IsSet() && g.groups.BoundCount(key) > 0:
			// A gang with members bound has no other domain than theirs.
			reason = fmt.Sprintf("member %s fits in no node of the gang's domain %s, where its bound members are", pod.Name, d)
		case d.IsSet():
			// The domain Placement chose turned out not to hold the gang
			// (another pod came first): the next attempt tries another
			// soon, from the gang's place in the queue, and backs off in
			// full once none is left.
			reason = fmt.Sprintf("member %s fits in no node of the gang's domain %s; trying another", pod.Name, d)
			backoff, ending = anotherDomainBackoff, groupstate.LostItsDomain
		}
	}
	g.rejectGroup(ctx, key, pg, reason, backoff, ending)
	// Unresolvable: the group backs off; its members are woken when it ends.
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("group %s rejected: %s", key, reason))
}

// anotherDomainBackoff is how long a gang backs off when the topology
// domain chosen for it turned out not to hold it, before its next attempt
// tries another domain: kube-scheduler's initial pod backoff.
const anotherDomainBackoff = time.Second

// Reserve records the member's reservation. The first one begins the
// attempt's hold on its room: the members the group's backoff turned away
// are moved to the active queue then, so that none sits out the queue's
// own backoff, grown by those turns, while the reserved ones wait for it
// at Permit. A member that failed for want of room is left to the events
// that can help it, so that a gang that cannot fit does not wake itself.
func (g *Gang) Reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	key, grouped, err := groupstate.KeyIn(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if grouped {
		g.groups.ActivateMembers(klog.FromContext(ctx), g.handle, key, g.attempts.Reserve(key, pod.UID))
	}
	return nil
}

// Unreserve runs when a reserved member is rejected, times out at Permit or
// fails to bind. A group that loses its quorum that way before it was
// admitted is rolled back like one that failed at PostFilter.
func (g *Gang) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) {
	g.binds.giveBack(state)
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Unreserving a member", "pod", klog.KObj(pod))
		return
	}
	if !cycle.Grouped {
		return
	}
	key, pg := cycle.Key, cycle.PodGroup
	// A member the group's failed attempt rejected gave its reservation
	// up then: the attempt is over already.
	if held := g.attempts.Unreserve(key, pod.UID); !held {
		return
	}
	// An admitted gang is not torn down by one member's failure, such as a
	// bind error or a launch-order hold that timed out: the member retries.
	if pg == nil || g.attempts.IsAdmitted(key) {
		return
	}
	if _, reached := g.quorum(key, pg); reached {
		return
	}
	reason := fmt.Sprintf("member %s lost its reservation before the group was complete", pod.Name)
	if failed, ok := groupstate.AttemptFailedIn(state); ok {
		reason = failed.Reason
	}
	g.rejectGroup(ctx, key, pg, reason, g.args.backoff(), groupstate.FoundNoRoom)
}

// Permit holds a member until bound and reserved members reach minMember,
// then allows every waiting member in the same step.
func (g *Gang) Permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	if !cycle.Grouped {
		return nil, 0
	}
	key, pg := cycle.Key, cycle.PodGroup
	if pg == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, topology.WaitingForPodGroupMessage(key, topology.GroupFieldOf(pod))), 0
	}
	if admitted, placed := g.admitIfComplete(klog.FromContext(ctx), key, pg, pod); !admitted {
		heldAtPermit(state)
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting at Permit for %d more members of group %s (%d/%d placed)",
			cycle.Quorum().Short(placed), key, placed, pg.Spec.MinMember)), g.permitTimeout(pg)
	}
	return nil, 0
}

// PreBindPreFlight takes part in the binding of a member held at Permit
// only.
func (g *Gang) PreBindPreFlight(_ context.Context, state fwk.CycleState, _ *corev1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if _, ok := releasedTogetherIn(state); !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreBind waits until fewer than maxConcurrentBinds of the members released
// together are binding.
func (g *Gang) PreBind(ctx context.Context, state fwk.CycleState, _ *corev1.Pod, _ string) *fwk.Status {
	return g.binds.take(ctx, state)
}

// PostBind frees the bound member's slot; Unreserve frees it when the Bind
// call failed.
func (g *Gang) PostBind(_ context.Context, state fwk.CycleState, _ *corev1.Pod, _ string) {
	g.binds.giveBack(state)
}

// admitIfComplete admits the group when its bound and reserved members,
// with the room HeldRooms holds for members their owner creates later,
// reach minMember: every member waiting at Permit, but the one asking
// (self; nil for none), is allowed to bind. It reports whether the group
// is admitted, and how many members it counted.
func (g *Gang) admitIfComplete(logger klog.Logger, key types.NamespacedName, pg *v1alpha1.PodGroup, self *corev1.Pod) (admitted bool, placed int32) {
	placed, reached := g.groups.Quorum(key, pg.Spec.MinMember, groupstate.Counting{HeldRooms: true})
	if !reached {
		return false, placed
	}
	var selfUID types.UID
	if self != nil {
		selfUID = self.UID
	}
	waiting, latency, first := g.attempts.Admit(key, g.clock.Now())
	for _, uid := range waiting {
		if wp := g.handle.GetWaitingPod(uid); wp != nil && uid != selfUID {
			wp.Allow(Name)
		}
	}
	// A gang whose bound members alone make its quorum was admitted
	// before, perhaps by a scheduler that has since restarted.
	if first && !topology.QuorumOf(pg).ReachedBy(g.groups.BoundCount(key)) {
		reportAdmitted(latency, g.clock.Since(pg.CreationTimestamp.Time))
		if at := g.attempts.TakePreempted(key); !at.IsZero() {
			reportAdmittedAfterPreemption(g.clock.Since(at))
		}
		logger.V(2).Info("Gang admitted", "podGroup", klog.KObj(pg), "placed", placed, "minMember", pg.Spec.MinMember)
		note := fmt.Sprintf("%d/%d members placed; all are allowed to bind", placed, pg.Spec.MinMember)
		g.recordEvent(pg, corev1.EventTypeNormal, gangview.ReasonGangAdmitted, "Admitted", note)
		g.attempts.Record(key, g.clock.Now(), true, note)
		g.groups.RecordInitiallyScheduled(logger, pg, true, note)
	}
	return true, placed
}

// rejectGroup ends a failed attempt: every sibling waiting at Permit is
// rejected, which releases its reservation, and the group backs off.
// ending says what the group keeps of its place and domain (Attempts.Fail).
func (g *Gang) rejectGroup(ctx context.Context, key types.NamespacedName, pg *v1alpha1.PodGroup, reason string, backoff time.Duration, ending groupstate.Ending) {
	reserved, first := g.attempts.Fail(key, g.clock.Now(), backoff, ending, reason)
	message := fmt.Sprintf("group %s rejected: %s", key, reason)
	for _, uid := range reserved {
		if wp := g.handle.GetWaitingPod(uid); wp != nil {
			wp.Reject(Name, message)
		}
	}
	if !first {
		return
	}
	note := fmt.Sprintf("%s; released %d reservations", reason, len(reserved))
	if backoff > 0 {
		note += fmt.Sprintf("; retrying in %s", backoff)
		// Events that came during the backoff found the members turned
		// away at PreFilter; wake them when it ends.
		g.clock.AfterFunc(backoff, func() { g.activate(klog.FromContext(ctx), key) })
	}
	if ending == groupstate.WaitsForClaims {
		// Not a failure: an event, which the API keeps by its reason and
		// not its note, would outlive the wait and hide the next attempt's.
		klog.FromContext(ctx).V(4).Info("Gang waits for its members' ResourceClaims", "podGroup", klog.KObj(pg), "reason", reason)
		return
	}
	reportRejected()
	klog.FromContext(ctx).V(2).Info("Gang rejected", "podGroup", klog.KObj(pg), "reason", reason, "released", len(reserved))
	g.recordEvent(pg, corev1.EventTypeWarning, gangview.ReasonGangRejected, "Rejected", note)
	g.attempts.Record(key, g.clock.Now(), false, note)
	g.groups.RecordInitiallyScheduled(klog.FromContext(ctx), pg, false, note)
}

// heldElsewhere turns a member away while another member holds its role
// and index (group.HolderOf), telling it once with an event.
func (g *Gang) heldElsewhere(key types.NamespacedName, topo *topology.Topology, pod *corev1.Pod) *fwk.Status {
	holder, held := g.groups.HolderOf(key, topo, pod)
	if !held {
		return nil
	}
	g.groups.TellHeld(g.handle, pod, holder)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, group.HeldByMessage(pod, holder))
}

// backoffStatus rejects a member while its group backs off, or returns nil.
func (g *Gang) backoffStatus(key types.NamespacedName) *fwk.Status {
	now := g.clock.Now()
	if until, failure := g.attempts.Backoff(key); now.Before(until) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("group %s backs off for %s more after a failed attempt: %s", key, until.Sub(now).Round(time.Second), failure))
	}
	return nil
}

// activate moves the group's pending members back to the active queue.
func (g *Gang) activate(logger klog.Logger, key types.NamespacedName) {
	g.groups.ActivatePending(logger, g.handle, key)
}

// quorum counts the gang's members bound or holding a reservation: a gang
// that has them all is not torn down for one member's failure.
func (g *Gang) quorum(key types.NamespacedName, pg *v1alpha1.PodGroup) (placed int32, reached bool) {
	return g.groups.Quorum(key, pg.Spec.MinMember, groupstate.Counting{})
}

func (g *Gang) permitTimeout(pg *v1alpha1.PodGroup) time.Duration {
	return g.groups.ScheduleTimeout(pg)
}

// podGroup returns the group's PodGroup, or nil when it does not exist.
func (g *Gang) podGroup(key types.NamespacedName) *v1alpha1.PodGroup {
	return g.groups.PodGroup(key)
}

// recordEvent records an event on the PodGroup.
func (g *Gang) recordEvent(pg *v1alpha1.PodGroup, eventType, reason, action, note string) {
	group.RecordEvent(g.handle, pg, eventType, reason, action, note)
}

// shortfall describes the resources of want that the nodes lack free, or
// returns "" when they have enough.
func shortfall(want corev1.ResourceList, nodes []fwk.NodeInfo) string {
	var free corev1.ResourceList
	for _, node := range nodes {
		free = resources.Add(free, resources.Free(node), 1)
	}
	var short []string
	for name := range resources.Deficit(want, free) {
		needs, available := want[name], free[name]
		short = append(short, fmt.Sprintf("%s (needs %s, %s free)", name, needs.String(), available.String()))
	}
	slices.Sort(short)
	return strings.Join(short, ", ")
}
