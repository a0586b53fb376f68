package podgroup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/ownerscale"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// Reasons of the events about an elastic group's size.
const (
	ReasonElasticGrown  = gangview.ReasonElasticGrown
	ReasonElasticShrunk = gangview.ReasonElasticShrunk
)

// idleRoomInterval is how often at most idle room is shared out. Growth
// is not held back longer, as HPA scales up at once: a group that gave
// room back is kept from growing for the window instead.
const idleRoomInterval = time.Second

// idleRoomSettle is how long after room was freed idle room is looked
// for: the rest of a group that ends goes meanwhile, and one look sees the
// room of all of it.
const idleRoomSettle = 250 * time.Millisecond

// lookForIdleRoom is the request, named as no PodGroup can be, that shares
// out idle room: room was freed, by a bound pod gone or finished, a node
// added or grown, or a gang that no longer waits for room kept for it.
var lookForIdleRoom = reconcile.Request{NamespacedName: types.NamespacedName{Name: "<idle room>"}}

// DefaultElasticWindow is how long after room was taken back for a gang
// none is taken for it again, as HPA's stabilization window: the members
// given back need time to go, and the gang to be placed.
const DefaultElasticWindow = 15 * time.Second

var elasticDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "muster_elastic_decisions_total",
	Help: "Members an elastic group gained in idle room (grown) or gave back for a waiting gang (shrunk).",
}, []string{"decision"})

func init() {
	metrics.Registry.MustRegister(elasticDecisions)
	for _, decision := range []string{"grown", "shrunk"} {
		elasticDecisions.WithLabelValues(decision)
	}
}

// ElasticScaler shares room among elastic groups by Paddle EDL's
// fulfillment score. It takes room back for a gang that waits for its
// min, from the most fulfilled groups, and gives idle room to the least
// fulfilled. Both act through the owner of a group's workers where it can
// be scaled (pkg/ownerscale), the highest index leaving first; otherwise room
// is taken back by evicting members, the highest index first, through the
// Eviction API, which a PodDisruptionBudget may refuse, and growth is left
// to pods that already exist: muster-scheduler binds members above a min
// only into free room, the least fulfilled group's first.
type ElasticScaler struct {
	// Client reads PodGroups and grouped pods from the cache, and scales
	// owners; Rooms reads nodes and every bound pod that has not finished
	// from NewRoomCache's cache, whose events tell when room is freed;
	// Reader reads an operator's job from the API server when its owner's
	// workers are scaled; Groups reads groups of either API.
	Client   client.Client
	Rooms    cache.Cache
	Reader   client.Reader
	Groups   *Groups
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	Window   time.Duration

	mu sync.Mutex
	// madeRoom is when room was last taken back for a waiting gang.
	madeRoom map[types.NamespacedName]time.Time
	// lookedForRoom is when idle room was last shared out.
	lookedForRoom time.Time
	// waiting are the gangs that waited for room when last reconciled:
	// room the scaler kept from growth for one is idle once it stops.
	waiting sets.Set[types.NamespacedName]
	// workers is each elastic group's bound workers, as last seen.
	workers map[types.NamespacedName]int
	// announced is the bound workers an owner was scaled up to, whose
	// ElasticGrown event was given when it was scaled.
	announced map[types.NamespacedName]int
}

// SetupWithManager registers the scaler: it runs for a PodGroup when the
// PodGroup or one of its pods changes, and looks for idle room when room is
// freed anywhere in the cluster, as Rooms' events tell. It never looks on
// a timer: a cluster at rest costs it nothing, whatever its size.
func (r *ElasticScaler) SetupWithManager(mgr ctrl.Manager) error {
	r.madeRoom = map[types.NamespacedName]time.Time{}
	r.workers = map[types.NamespacedName]int{}
	r.announced = map[types.NamespacedName]int{}
	r.waiting = sets.New[types.NamespacedName]()
	look := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(lookForIdleRoom, idleRoomSettle)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("podgroup-elastic").
		For(&v1alpha1.PodGroup{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod)).
		// A bound pod leaves Rooms when it is deleted or finishes.
		WatchesRawSource(source.Kind(r.Rooms, &corev1.Pod{}, handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
			DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				look(q)
			},
		})).
		WatchesRawSource(source.Kind(r.Rooms, &corev1.Node{}, handler.TypedFuncs[*corev1.Node, reconcile.Request]{
			CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[*corev1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				look(q)
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*corev1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if roomChanged(e.ObjectOld, e.ObjectNew) {
					look(q)
				}
			},
		})).
		// Devices are freed when a claim is deallocated or deleted, and
		// added when a node publishes more.
		WatchesRawSource(source.Kind(r.Rooms, &resourcev1.ResourceClaim{}, handler.TypedFuncs[*resourcev1.ResourceClaim, reconcile.Request]{
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*resourcev1.ResourceClaim], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if e.ObjectOld.Status.Allocation != nil && e.ObjectNew.Status.Allocation == nil {
					look(q)
				}
			},
			DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*resourcev1.ResourceClaim], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				look(q)
			},
		})).
		WatchesRawSource(source.Kind(r.Rooms, &resourcev1.ResourceSlice{}, handler.TypedFuncs[*resourcev1.ResourceSlice, reconcile.Request]{
			CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[*resourcev1.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				look(q)
			},
			UpdateFunc: func(_ context.Context, _ event.TypedUpdateEvent[*resourcev1.ResourceSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				look(q)
			},
		}))
	return r.Groups.watchUpstream(b).Complete(r)
}

// roomChanged reports whether a node's update may have freed room: what
// roomOfNode keeps of it changed. A heartbeat changes none of it.
func roomChanged(old, updated *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Spec, updated.Spec) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, updated.Status.Allocatable) ||
		!maps.Equal(old.Labels, updated.Labels)
}

// Reconcile notes an elastic group's growth, makes room for a gang that
// waits for its min, and shares out idle room while an elastic group is
// below its max.
func (r *ElasticScaler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req == lookForIdleRoom {
		return r.shareIdleRoom(ctx)
	}
	pg, err := r.Groups.PodGroup(ctx, req.NamespacedName)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.forget(req.NamespacedName)
		return r.stoppedWaiting(ctx, req.NamespacedName)
	}
	topo, errs := topology.FromPodGroup(pg)
	if _, awaits := topology.AwaitsDerivation(pg); awaits || len(errs) > 0 {
		return reconcile.Result{}, nil
	}
	members, err := r.Groups.Members(ctx, pg)
	if err != nil {
		return reconcile.Result{}, err
	}
	if topo.Elastic != nil {
		r.noteGrowth(pg, topo, members)
	}
	if gang, waits := waitingForRoom(pg, members); waits {
		r.mu.Lock()
		r.waiting.Insert(req.NamespacedName)
		r.mu.Unlock()
		if err := r.makeRoom(ctx, pg, gang); errors.Is(err, errClaimsToCome) {
			return reconcile.Result{RequeueAfter: claimsRetry}, nil
		} else if err != nil {
			return reconcile.Result{}, err
		}
		// It is looked at again while it waits: room taken back that
		// another pod got first is taken again after the window.
		return reconcile.Result{RequeueAfter: r.Window}, nil
	}
	if topo.Elastic != nil && int32(len(boundWorkers(topo, members))) < topo.Elastic.Max {
		// Too soon after the last look, the group is looked at again
		// when the next may be; after a look, when room is freed.
		return r.shareIdleRoom(ctx)
	}
	return r.stoppedWaiting(ctx, req.NamespacedName)
}

// stoppedWaiting forgets a group that is gone or no longer waits for room,
// and shares out the room kept for it when it waited.
func (r *ElasticScaler) stoppedWaiting(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	r.mu.Lock()
	waited := r.waiting.Has(key)
	r.waiting.Delete(key)
	r.mu.Unlock()
	if !waited {
		return reconcile.Result{}, nil
	}
	return r.shareIdleRoom(ctx)
}

func (r *ElasticScaler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.madeRoom, key)
	delete(r.workers, key)
	delete(r.announced, key)
}

// noteGrowth tells, once per member, that an elastic group grew.
func (r *ElasticScaler) noteGrowth(pg *v1alpha1.PodGroup, topo *topology.Topology, members []corev1.Pod) {
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	cur := len(boundWorkers(topo, members))
	r.mu.Lock()
	before, seen := r.workers[key]
	r.workers[key] = cur
	announced := r.announced[key]
	if cur >= announced {
		delete(r.announced, key)
	}
	r.mu.Unlock()
	// Growth is counted from the min, which admission gave the group, and
	// from what scaling its owner already announced.
	before = max(before, int(topo.Elastic.Min), min(cur, announced))
	if !seen || cur <= before {
		return
	}
	elasticDecisions.WithLabelValues("grown").Add(float64(cur - before))
	r.Recorder.Eventf(pg, corev1.EventTypeNormal, ReasonElasticGrown,
		"%s %d → %d of %d:%d in idle room; fulfillment %.2f → %.2f", topology.ElasticRole, before, cur, topo.Elastic.Min, topo.Elastic.Max,
		topo.Elastic.Fulfillment(int32(before)), topo.Elastic.Fulfillment(int32(cur)))
}

// waitingForRoom reports whether the gang waits for room
// (topology.WaitingForRoom), with what it lacks.
func waitingForRoom(pg *v1alpha1.PodGroup, members []corev1.Pod) (topology.WaitingGang, bool) {
	lacking, waits := topology.WaitingForRoom(pg.Spec.MinMember, pointersTo(members))
	return topology.WaitingGang{Lacking: lacking}, waits
}

// errClaimsToCome says a waiting gang's member has a claim not made, or
// not seen, yet: the scaler takes back all the gang needs once it is, a
// claimsRetry later, rather than part now and the rest a window later.
var errClaimsToCome = errors.New("a claim of a member the gang lacks is still to come")

const claimsRetry = time.Second

// makeRoom takes room back from elastic groups for a gang that needs it,
// once per window. The room counted is on the nodes the gang's first
// lacking member may use.
func (r *ElasticScaler) makeRoom(ctx context.Context, pg *v1alpha1.PodGroup, gang topology.WaitingGang) error {
	need, pending, priority := gang.Need(), gang.Lacking[0], gang.Priority()
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	now := r.Clock.Now()
	r.mu.Lock()
	last, made := r.madeRoom[key]
	r.mu.Unlock()
	if made && now.Sub(last) < r.Window {
		return nil
	}
	nodes, devices, err := r.nodeRooms(ctx)
	if err != nil {
		return err
	}
	for _, pod := range gang.Lacking {
		asked, known := devices.of(pod)
		if !known {
			return errClaimsToCome
		}
		resources.Add(need, asked, 1)
	}
	free := corev1.ResourceList{}
	for _, n := range nodes {
		if topology.MayRunOn(pending, n.Node) {
			free = resources.Add(free, n.Free, 1)
		}
	}
	deficit := resources.Deficit(need, free)
	if resources.Covered(deficit) {
		return nil
	}
	groups, _, _, err := r.survey(ctx)
	if err != nil {
		return err
	}
	withDevices(groups, devices)
	plan := planShrink(deficit, gang, groups)
	if len(plan) == 0 {
		klog.FromContext(ctx).V(4).Info("No elastic group can give a waiting gang its room", "podGroup", key, "deficit", deficit)
		return nil
	}
	r.mu.Lock()
	r.madeRoom[key] = now
	r.mu.Unlock()
	for _, cut := range byGroup(plan) {
		if err := r.shrink(ctx, cut, key, priority); err != nil {
			return err
		}
	}
	return nil
}

// byGroup splits a plan into each group's share, in the plan's order.
func byGroup(plan []shrink) [][]shrink {
	var cuts [][]shrink
	at := map[*elasticGroup]int{}
	for _, s := range plan {
		i, ok := at[s.group]
		if !ok {
			i = len(cuts)
			at[s.group] = i
			cuts = append(cuts, nil)
		}
		cuts[i] = append(cuts[i], s)
	}
	return cuts
}

// shrink has one group give back the members planned, for gang: through
// its workers' owner when it can be scaled, by eviction otherwise.
func (r *ElasticScaler) shrink(ctx context.Context, cut []shrink, gang types.NamespacedName, priority int32) error {
	group := cut[0].group
	r.mu.Lock()
	delete(r.announced, group.key)
	r.mu.Unlock()
	victim, err := r.Groups.PodGroup(ctx, group.key)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	owner, err := ownerscale.Of(ctx, r.Client, r.Reader, group.key.Namespace, group.owner)
	if err != nil {
		return err
	}
	// planShrink takes the highest indices, so the workers kept are the
	// first ones, and the owner keeps up to the highest of them.
	kept := group.workers[:len(group.workers)-len(cut)]
	var replicas int32
	if len(kept) > 0 {
		replicas = kept[len(kept)-1].index + 1
	}
	if owner != nil && replicas < owner.Replicas {
		if err := owner.Set(ctx, r.Client, replicas); err != nil {
			return fmt.Errorf("giving room back from elastic group %s for gang %s: %w", group.key, gang, err)
		}
		elasticDecisions.WithLabelValues("shrunk").Add(float64(len(cut)))
		klog.FromContext(ctx).V(2).Info("Scaled an elastic group's owner down", "podGroup", group.key, "owner", owner.String(), "replicas", replicas, "for", gang)
		r.Recorder.Eventf(victim, corev1.EventTypeNormal, ReasonElasticShrunk,
			"scaled %s %s replicas %d → %d for gang %s (priority %d), which waits for its min; fulfillment %.2f → %.2f",
			owner, topology.ElasticRole, owner.Replicas, replicas, gang, priority, cut[0].before, cut[len(cut)-1].after)
		return nil
	}
	for _, s := range cut {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.worker.pod.Namespace, Name: s.worker.pod.Name}}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
		if err := r.Client.SubResource("eviction").Create(ctx, pod, eviction); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("evicting %s of elastic group %s for gang %s: %w", s.worker.pod, group.key, gang, err)
		}
		elasticDecisions.WithLabelValues("shrunk").Inc()
		klog.FromContext(ctx).V(2).Info("Took a member back from an elastic group", "podGroup", group.key, "pod", s.worker.pod, "for", gang)
		r.Recorder.Eventf(victim, corev1.EventTypeNormal, ReasonElasticShrunk,
			"evicted %s %d (pod %s) for gang %s (priority %d), which waits for its min; fulfillment %.2f → %.2f",
			topology.ElasticRole, s.worker.index, s.worker.pod.Name, gang, priority, s.before, s.after)
	}
	return nil
}

// shareIdleRoom gives idle room to elastic groups whose owner can be
// scaled, the least fulfilled first, at most once per idleRoomInterval
// (it asks to run again when it is too soon), and never on a node that a
// gang waiting for room may use: that room is the gang's.
func (r *ElasticScaler) shareIdleRoom(ctx context.Context) (reconcile.Result, error) {
	now := r.Clock.Now()
	r.mu.Lock()
	if since := now.Sub(r.lookedForRoom); since < idleRoomInterval {
		r.mu.Unlock()
		return reconcile.Result{RequeueAfter: idleRoomInterval - since}, nil
	}
	r.lookedForRoom = now
	r.mu.Unlock()
	held, err := r.growIntoIdleRoom(ctx)
	if held {
		return reconcile.Result{RequeueAfter: idleRoomInterval}, err
	}
	return reconcile.Result{}, err
}

// growIntoIdleRoom grows the elastic groups into idle room; held reports
// that a gang about to be tried held growth back, to be looked at again.
func (r *ElasticScaler) growIntoIdleRoom(ctx context.Context) (held bool, err error) {
	groups, waiting, untried, err := r.survey(ctx)
	if err != nil {
		return false, err
	}
	if untried {
		// A gang the scheduler is about to try takes room that looks idle
		// now. Its binds may set off no look: the scaler looks again.
		return true, nil
	}
	var growable []*elasticGroup
	for _, g := range groups {
		// A group with workers still unbound grows into them first.
		if g.unbound == 0 && int32(len(g.workers)) < g.elastic.Max {
			growable = append(growable, g)
		}
	}
	if len(growable) == 0 {
		return false, nil
	}
	nodes, devices, err := r.nodeRooms(ctx)
	if err != nil {
		return false, err
	}
	withDevices(growable, devices)
	free := roomNoGangWaitsFor(nodes, waiting, lowestPriority(growable))
	// Owners are read only for the groups the plan gives room, so that a
	// cluster with none idle costs no request a second. A group whose
	// owner has replicas it has not made bound workers of yet is growing
	// already: it is left out, and the room shared again.
	owners := map[*elasticGroup]*ownerscale.Scale{}
	for {
		gains := planGrowth(growable, cloneRooms(free))
		under := 0
		for _, g := range growable {
			if _, read := owners[g]; read || gains[g] == 0 {
				continue
			}
			owner, err := ownerscale.Of(ctx, r.Client, r.Reader, g.key.Namespace, g.owner)
			if err != nil {
				return false, err
			}
			owners[g] = owner
			if owner == nil || owner.Replicas != int32(len(g.workers)) {
				under++
			}
		}
		if under > 0 {
			growable = slices.DeleteFunc(growable, func(g *elasticGroup) bool {
				owner, read := owners[g]
				return read && (owner == nil || owner.Replicas != int32(len(g.workers)))
			})
			continue
		}
		return false, r.grow(ctx, growable, gains, owners)
	}
}

// grow scales each group's owner up by its gain.
func (r *ElasticScaler) grow(ctx context.Context, groups []*elasticGroup, gains map[*elasticGroup]int, owners map[*elasticGroup]*ownerscale.Scale) error {
	for _, g := range groups {
		gain := gains[g]
		if gain == 0 {
			continue
		}
		owner, from := owners[g], len(g.workers)
		to := from + gain
		if err := owner.Set(ctx, r.Client, int32(to)); err != nil {
			return fmt.Errorf("growing elastic group %s into idle room: %w", g.key, err)
		}
		r.mu.Lock()
		r.announced[g.key] = to
		r.mu.Unlock()
		elasticDecisions.WithLabelValues("grown").Add(float64(gain))
		klog.FromContext(ctx).V(2).Info("Scaled an elastic group's owner up into idle room", "podGroup", g.key, "owner", owner.String(), "replicas", to)
		if pg, err := r.Groups.PodGroup(ctx, g.key); err == nil {
			r.Recorder.Eventf(pg, corev1.EventTypeNormal, ReasonElasticGrown,
				"scaled %s %s replicas %d → %d into idle room; fulfillment %.2f → %.2f",
				owner, topology.ElasticRole, from, to, g.fulfillment(from), g.fulfillment(to))
		}
	}
	return nil
}

// cloneRooms copies nodes' free room, which a plan uses up as it goes.
func cloneRooms(nodes []resources.Room) []resources.Room {
	out := make([]resources.Room, len(nodes))
	for i, n := range nodes {
		out[i] = n.Clone()
	}
	return out
}

// nodeRooms is each node with its allocatable less what its pods request:
// the bound pods of the room cache, and the bound members of the manager's
// cache that the room cache has not seen yet. The two caches watch apart,
// and a look that a gang's binding set off (it stopped waiting) must not
// count the gang's room as idle before the room cache sees it bound. Each
// node's free devices are in its room too, and the devices returned say
// what pods' claims ask for.
func (r *ElasticScaler) nodeRooms(ctx context.Context) ([]resources.Room, *clusterDevices, error) {
	// Read only: the cache's objects are not copied, which at 50,000 pods
	// is most of a look's cost.
	var nodes corev1.NodeList
	if err := r.Rooms.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	rooms := make([]resources.Room, len(nodes.Items))
	at := map[string]int{}
	for i := range nodes.Items {
		rooms[i] = resources.EmptyRoom(&nodes.Items[i])
		at[nodes.Items[i].Name] = i
	}
	var pods corev1.PodList
	if err := r.Rooms.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	counted := sets.New[types.UID]()
	count := func(pod *corev1.Pod) {
		n, ok := at[pod.Spec.NodeName]
		if !ok || !topology.IsActiveMember(pod) || counted.Has(pod.UID) {
			return
		}
		counted.Insert(pod.UID)
		rooms[n].Place(resources.OfPod(pod))
	}
	// By index: at 50,000 pods, copying each Pod is most of a look's cost.
	for i := range pods.Items {
		count(&pods.Items[i])
	}
	if err := r.Groups.EachMember(ctx, count); err != nil {
		return nil, nil, err
	}
	devices, err := r.readDevices(ctx)
	if err != nil {
		return nil, nil, err
	}
	devices.addFree(rooms)
	return rooms, devices, nil
}

// roomNoGangWaitsFor is the nodes that no waiting gang keeps from elastic
// groups of the given priority (topology.WaitingGang's rules): the room on
// the others is the gangs'.
func roomNoGangWaitsFor(nodes []resources.Room, waiting []topology.WaitingGang, priority int32) []resources.Room {
	cluster := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		cluster[i] = n.Node
	}
	var holding []topology.WaitingGang
	for _, gang := range waiting {
		if gang.CouldHold(cluster) {
			holding = append(holding, gang)
		}
	}
	var free []resources.Room
	for _, n := range nodes {
		if !slices.ContainsFunc(holding, func(gang topology.WaitingGang) bool { return gang.KeepsNode(n.Node, priority, true) }) {
			free = append(free, n)
		}
	}
	return free
}

// lowestPriority is the lowest priority of the groups: the room no gang
// keeps from it is kept from none of them.
func lowestPriority(groups []*elasticGroup) int32 {
	lowest := groups[0].priority
	for _, g := range groups[1:] {
		lowest = min(lowest, g.priority)
	}
	return lowest
}

// untriedGrace is how long after its creation a gang short of its min,
// or its member the scheduler has not tried yet, holds growth back
// (aboutToBeTried): long enough for its owner to make its pods and a busy
// scheduler to try them, short enough that a gang kept waiting for good
// does not stop every group's growth.
const untriedGrace = 10 * time.Second

// aboutToBeTried reports whether the gang is about to take room that looks
// idle: made within untriedGrace with fewer than minMember bound (its
// owner may not have made its pods yet), or with a member made within it
// that muster-scheduler has not tried (topology.UntriedMembers).
func aboutToBeTried(pg *v1alpha1.PodGroup, members []corev1.Pod, now time.Time) bool {
	if now.Sub(pg.CreationTimestamp.Time) < untriedGrace && !topology.QuorumOf(pg).ReachedBy(countBound(members)) {
		return true
	}
	return slices.ContainsFunc(topology.UntriedMembers(pg.Spec.MinMember, pointersTo(members)), func(pod *corev1.Pod) bool {
		return now.Sub(pod.CreationTimestamp.Time) < untriedGrace
	})
}

// survey lists the admitted elastic groups, each with its bound workers,
// and the gangs that wait for room; untried reports a gang, created
// within untriedGrace, that the scheduler has not tried yet.
func (r *ElasticScaler) survey(ctx context.Context) (groups []*elasticGroup, waiting []topology.WaitingGang, untried bool, err error) {
	pgs, err := r.Groups.PodGroups(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	now := r.Clock.Now()
	for _, pg := range pgs {
		key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
		members, err := r.Groups.Members(ctx, pg)
		if err != nil {
			return nil, nil, false, err
		}
		if gang, waits := waitingForRoom(pg, members); waits {
			waiting = append(waiting, gang)
		}
		if !untried {
			untried = aboutToBeTried(pg, members, now)
		}
		topo, errs := topology.FromPodGroup(pg)
		if len(errs) > 0 || topo.Elastic == nil {
			continue
		}
		workers := boundWorkers(topo, members)
		if bound := countBound(members); !topology.QuorumOf(pg).ReachedBy(bound) || len(workers) == 0 {
			continue
		}
		g := &elasticGroup{key: key, elastic: *topo.Elastic, workers: workers}
		for j := range members {
			pod := &members[j]
			member, errs := topo.Identify(pod)
			if len(errs) > 0 || member.Role != topology.ElasticRole || !topology.IsActiveMember(pod) {
				continue
			}
			if pod.Spec.NodeName == "" {
				g.unbound++
			}
			if g.template == nil || pod.Spec.NodeName != "" {
				g.template, g.owner = pod, metav1.GetControllerOf(pod)
				g.priority = ptr.Deref(pod.Spec.Priority, 0)
			}
			if pod.Spec.NodeName != "" {
				g.domainKey, g.anchor = topo.DomainKey, pod.Spec.NodeName
			}
		}
		groups = append(groups, g)
	}
	return groups, waiting, untried, nil
}

// boundWorkers are the group's active, bound members of the elastic role.
func boundWorkers(topo *topology.Topology, members []corev1.Pod) []elasticWorker {
	var workers []elasticWorker
	for i := range members {
		pod := &members[i]
		member, errs := topo.Identify(pod)
		if len(errs) > 0 || member.Role != topology.ElasticRole || pod.Spec.NodeName == "" || !topology.IsActiveMember(pod) {
			continue
		}
		workers = append(workers, elasticWorker{
			pod:      types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
			index:    member.Index,
			requests: resources.OfPod(pod),
			member:   pod,
		})
	}
	return workers
}

func countBound(members []corev1.Pod) int32 {
	var n int32
	for i := range members {
		if members[i].Spec.NodeName != "" && topology.IsActiveMember(&members[i]) {
			n++
		}
	}
	return n
}
