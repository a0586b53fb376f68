package podgroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// Reasons of the events about an elastic group's size.
const (
	ReasonElasticGrown  = "ElasticGrown"
	ReasonElasticShrunk = "ElasticShrunk"
)

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
}

// ElasticScaler takes room back from elastic groups for a gang that waits
// for its min, by Paddle EDL's fulfillment score, and tells when an
// elastic group grows. Members above an elastic group's min bind only into
// free room, the least fulfilled group's first (muster-scheduler's queue
// order), so growing needs no action here; shrinking evicts members, the
// highest index first, through the Eviction API, which a
// PodDisruptionBudget may refuse.
type ElasticScaler struct {
	// Client reads PodGroups and grouped pods from the cache; Reader reads
	// nodes and every bound pod from the API server, only while a gang
	// waits for room.
	Client   client.Client
	Reader   client.Reader
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	Window   time.Duration

	mu sync.Mutex
	// madeRoom is when room was last taken back for a waiting gang.
	madeRoom map[types.NamespacedName]time.Time
	// workers is each elastic group's bound workers, as last seen.
	workers map[types.NamespacedName]int
}

// SetupWithManager registers the scaler: it runs for a PodGroup when the
// PodGroup or one of its pods changes.
func (r *ElasticScaler) SetupWithManager(mgr ctrl.Manager) error {
	r.madeRoom = map[types.NamespacedName]time.Time{}
	r.workers = map[types.NamespacedName]int{}
	return ctrl.NewControllerManagedBy(mgr).
		Named("podgroup-elastic").
		For(&v1alpha1.PodGroup{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod)).
		Complete(r)
}

// Reconcile notes an elastic group's growth, and makes room for a gang
// that waits for its min.
func (r *ElasticScaler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pg := &v1alpha1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	topo, errs := topology.FromPodGroup(pg)
	if _, awaits := topology.AwaitsDerivation(pg); awaits || len(errs) > 0 {
		return reconcile.Result{}, nil
	}
	var members corev1.PodList
	if err := r.Client.List(ctx, &members, client.InNamespace(req.Namespace), client.MatchingFields{groupField: req.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing members of %s: %w", req.NamespacedName, err)
	}
	if topo.Elastic != nil {
		r.noteGrowth(pg, topo, members.Items)
	}
	need, pending, waits := waitingForRoom(pg, members.Items)
	if !waits {
		return reconcile.Result{}, nil
	}
	if err := r.makeRoom(ctx, pg, need, pending); err != nil {
		return reconcile.Result{}, err
	}
	// It is looked at again while it waits: room taken back that another
	// pod got first is taken again after the window.
	return reconcile.Result{RequeueAfter: r.Window}, nil
}

func (r *ElasticScaler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.madeRoom, key)
	delete(r.workers, key)
}

// noteGrowth tells, once per member, that an elastic group grew.
func (r *ElasticScaler) noteGrowth(pg *v1alpha1.PodGroup, topo *topology.Topology, members []corev1.Pod) {
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	cur := len(boundWorkers(topo, members))
	r.mu.Lock()
	before, seen := r.workers[key]
	r.workers[key] = cur
	r.mu.Unlock()
	// Growth is counted from the min, which admission gave the group.
	before = max(before, int(topo.Elastic.Min))
	if !seen || cur <= before {
		return
	}
	elasticDecisions.WithLabelValues("grown").Add(float64(cur - before))
	r.Recorder.Eventf(pg, corev1.EventTypeNormal, ReasonElasticGrown,
		"%s %d → %d of %d:%d in idle room; fulfillment %.2f → %.2f", topology.ElasticRole, before, cur, topo.Elastic.Min, topo.Elastic.Max,
		topo.Elastic.Fulfillment(int32(before)), topo.Elastic.Fulfillment(int32(cur)))
}

// waitingForRoom reports whether every member a gang needs for its min
// exists, fewer than its min are bound, and the scheduler found no room
// for a member; need is what its unbound members up to its min request,
// and pending the first of them.
func waitingForRoom(pg *v1alpha1.PodGroup, members []corev1.Pod) (need corev1.ResourceList, pending *corev1.Pod, waits bool) {
	var bound int32
	var unbound []*corev1.Pod
	unschedulable := false
	for i := range members {
		pod := &members[i]
		if !topology.IsActiveMember(pod) {
			continue
		}
		if pod.Spec.NodeName != "" {
			bound++
			continue
		}
		unbound = append(unbound, pod)
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable = true
			}
		}
	}
	missing := pg.Spec.MinMember - bound
	if missing <= 0 || int32(len(unbound)) < missing || !unschedulable {
		return nil, nil, false
	}
	slices.SortFunc(unbound, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	need = corev1.ResourceList{}
	for _, pod := range unbound[:missing] {
		need = topology.AddRequests(need, resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), 1)
	}
	return need, unbound[0], true
}

// makeRoom evicts members of elastic groups that the gang needs the room
// of, once per window. The room counted is on the nodes the gang's
// pending member may use.
func (r *ElasticScaler) makeRoom(ctx context.Context, gang *v1alpha1.PodGroup, need corev1.ResourceList, pending *corev1.Pod) error {
	priority := ptr.Deref(pending.Spec.Priority, 0)
	key := types.NamespacedName{Namespace: gang.Namespace, Name: gang.Name}
	now := r.Clock.Now()
	r.mu.Lock()
	last, made := r.madeRoom[key]
	r.mu.Unlock()
	if made && now.Sub(last) < r.Window {
		return nil
	}
	free, err := r.freeRoom(ctx, pending)
	if err != nil {
		return err
	}
	deficit := deficitOf(need, free)
	if covered(deficit) {
		return nil
	}
	groups, err := r.elasticGroups(ctx, key)
	if err != nil {
		return err
	}
	plan := planShrink(deficit, priority, groups)
	if len(plan) == 0 {
		klog.FromContext(ctx).V(4).Info("No elastic group can give a waiting gang its room", "podGroup", key, "deficit", deficit)
		return nil
	}
	r.mu.Lock()
	r.madeRoom[key] = now
	r.mu.Unlock()
	for _, s := range plan {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.worker.pod.Namespace, Name: s.worker.pod.Name}}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
		if err := r.Client.SubResource("eviction").Create(ctx, pod, eviction); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("evicting %s of elastic group %s for gang %s: %w", s.worker.pod, s.group.key, key, err)
		}
		elasticDecisions.WithLabelValues("shrunk").Inc()
		klog.FromContext(ctx).V(2).Info("Took a member back from an elastic group", "podGroup", s.group.key, "pod", s.worker.pod, "for", key)
		victim := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: s.group.key.Namespace, Name: s.group.key.Name}}
		if err := r.Client.Get(ctx, s.group.key, victim); err == nil {
			r.Recorder.Eventf(victim, corev1.EventTypeNormal, ReasonElasticShrunk,
				"evicted %s %d (pod %s) for gang %s (priority %d), which waits for its min; fulfillment %.2f → %.2f",
				topology.ElasticRole, s.worker.index, s.worker.pod.Name, key, priority, s.before, s.after)
		}
	}
	return nil
}

// freeRoom is the allocatable of the nodes the pod may use less what
// their pods request.
func (r *ElasticScaler) freeRoom(ctx context.Context, pod *corev1.Pod) (corev1.ResourceList, error) {
	var nodes corev1.NodeList
	if err := r.Reader.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	free := corev1.ResourceList{}
	usable := map[string]bool{}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if topology.MayRunOn(pod, node) {
			usable[node.Name] = true
			free = topology.AddRequests(free, node.Status.Allocatable, 1)
		}
	}
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !usable[pod.Spec.NodeName] || !topology.IsActiveMember(pod) {
			continue
		}
		for name, quantity := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
			if have, ok := free[name]; ok {
				have.Sub(quantity)
				free[name] = have
			}
		}
	}
	return free, nil
}

// elasticGroups lists the admitted elastic groups but the waiting gang,
// each with its bound workers.
func (r *ElasticScaler) elasticGroups(ctx context.Context, gang types.NamespacedName) ([]*elasticGroup, error) {
	var pgs v1alpha1.PodGroupList
	if err := r.Client.List(ctx, &pgs); err != nil {
		return nil, fmt.Errorf("listing PodGroups: %w", err)
	}
	var groups []*elasticGroup
	for i := range pgs.Items {
		pg := &pgs.Items[i]
		key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
		topo, errs := topology.FromPodGroup(pg)
		if key == gang || len(errs) > 0 || topo.Elastic == nil {
			continue
		}
		var members corev1.PodList
		if err := r.Client.List(ctx, &members, client.InNamespace(pg.Namespace), client.MatchingFields{groupField: pg.Name}); err != nil {
			return nil, fmt.Errorf("listing members of %s: %w", key, err)
		}
		workers := boundWorkers(topo, members.Items)
		if bound := countBound(members.Items); bound < pg.Spec.MinMember || len(workers) == 0 {
			continue
		}
		g := &elasticGroup{key: key, elastic: *topo.Elastic, workers: workers}
		if p := members.Items[0].Spec.Priority; p != nil {
			g.priority = *p
		}
		groups = append(groups, g)
	}
	return groups, nil
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
			requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
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
