package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	schedulingv1beta1listers "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	schedulinginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/workloadapi"
)

// MaxPermitWait is the framework's cap on a Permit wait: a longer timeout
// a plugin returns is cut to it.
const MaxPermitWait = topology.MaxScheduleTimeoutSeconds * time.Second

// DefaultScheduleTimeout is a gang's schedule timeout when neither its
// PodGroup nor Gang's args set one.
const DefaultScheduleTimeout = time.Minute

// Model is one scheduler profile's view of its groups, shared by Gang and
// LaunchOrder so that the two never see different versions of a group: one
// PodGroup informer per source, the member index on the scheduler's pod
// informer, and each PodGroup's topology, parsed once per change of its
// annotations.
//
// scheduler-plugins' PodGroup is the model's one shape of group; a
// scheduling.k8s.io PodGroup, the second source when the API server serves
// it, is read in that shape (topology.FromUpstream). Where both APIs hold a
// PodGroup of one name in a namespace, scheduler-plugins' is the group.
type Model struct {
	// podGroups holds scheduler-plugins' PodGroups by namespace/name: a
	// read of a name it lacks, as for every upstream group the queue sorts,
	// allocates no error, as a lister's would.
	podGroups        cache.Indexer
	podGroupInformer cache.SharedIndexInformer
	// podGroupClient writes what the model records on a scheduler-plugins
	// PodGroup (recordQuorumReached); nil in unit tests that build the
	// model without a scheduler.
	podGroupClient schedulingclient.Interface
	// clientSet writes an upstream PodGroup's condition
	// (RecordInitiallyScheduled); nil in unit tests that build the model
	// without a scheduler.
	clientSet kubernetes.Interface
	// upstream and upstreamInformer are nil when the API server does not
	// serve scheduling.k8s.io's PodGroups.
	upstream         schedulingv1beta1listers.PodGroupLister
	upstreamInformer cache.SharedIndexInformer
	podInformer      cache.SharedIndexInformer
	pods             cache.Indexer
	// succeeded holds the pods that succeeded (succeededPods), which pods
	// lacks; nil in unit tests that build the model without a scheduler,
	// whose pods indexer holds every phase.
	succeeded cache.Indexer

	mu     sync.Mutex
	parsed map[types.NamespacedName]parsedTopology
	// shaped holds each upstream PodGroup in the model's one shape, by
	// the version it was read at: the queue's Less reads it on every
	// comparison.
	shaped map[types.NamespacedName]*v1alpha1.PodGroup
	// observed reports whether the pod handler has seen the informer's
	// initial list; nil when it always has (NewModel's callers fill the
	// indexer first).
	observed func() bool
	// listeners are the plugins' pod handlers, told of each pod event
	// after the states have taken it in; podGroupListeners theirs of
	// PodGroup events.
	listeners         []func(PodChange)
	podGroupListeners []cache.ResourceEventHandler
	// schedulers are the names of the scheduler's profiles: a group's
	// members are the pods that name one (topology.NotAMember). Each
	// profile adds its name as it is built; the set is replaced, never
	// changed, so that it is read without a lock.
	schedulers atomic.Pointer[sets.Set[string]]

	// Store is the scheduler's own state of its groups, which no API
	// object holds; the model is its only owner. Its reads are the
	// model's.
	*groupstate.Store
	heldTold told
	// scheduleTimeout is a gang's schedule timeout when its PodGroup sets
	// none, from Gang's args (SetDefaultScheduleTimeout).
	scheduleTimeout atomic.Int64
	// publisher writes what the scheduler alone knows of each gang on
	// its PodGroup; nil in unit tests that build the model without a
	// scheduler.
	publisher *publisher
	// held reads the members held at Permit for their predecessors, for
	// the published record; nil until LaunchOrder is built.
	held func(types.NamespacedName) []string
	// activator is the scheduling queue: a group's pending members are
	// moved back to it when their PodGroup appears or changes. nil in
	// unit tests that build the model without a scheduler.
	activator fwk.PodActivator
}

type parsedTopology struct {
	// from is the PodGroup object parsed. An informer's objects are never
	// changed in place, so the same object needs no second look: every
	// member's event reads its group's topology, and building source
	// for each was a visible share of muster's CPU on gangs of 1,000.
	from *v1alpha1.PodGroup
	// source is what the topology was parsed from: the PodGroup's UID,
	// name and muster annotations.
	source   string
	topology *topology.Topology
	err      error
}

// NewModel returns a model over a PodGroup lister and a pod indexer that
// has the group index, for the pods of the named schedulers; the plugins'
// unit tests build theirs this way, and tell it of later changes to the
// indexer through PodEvents.
func NewModel(podGroups cache.Indexer, pods cache.Indexer, schedulers ...string) *Model {
	m := &Model{
		podGroups: podGroups, pods: pods,
		parsed:   map[types.NamespacedName]parsedTopology{},
		shaped:   map[types.NamespacedName]*v1alpha1.PodGroup{},
		heldTold: told{pods: sets.New[types.UID]()},
	}
	m.Store = groupstate.NewStore(reportWaitingGangs, m.countIfUnobserved)
	m.TellChanges(m.publish)
	m.Rooms().Observe(reportRoomHeld, reportRoomEnded)
	m.scheduleTimeout.Store(int64(DefaultScheduleTimeout))
	names := sets.New(schedulers...)
	m.schedulers.Store(&names)
	for _, obj := range pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok {
			m.Take(Added(pod))
		}
	}
	return m
}

// Models holds the model of each scheduler, by its informer factory, which
// all its profiles share: so do their plugins, and the pod informer is
// indexed once. One Models serves one plugin registry.
type Models struct {
	mu     sync.Mutex
	models map[informers.SharedInformerFactory]*Model
}

// NewModels returns a registry's models, none built yet.
func NewModels() *Models {
	return &Models{models: map[informers.SharedInformerFactory]*Model{}}
}

// Plugin returns the framework's factory of a plugin built over its
// scheduler's model.
func (ms *Models) Plugin(build func(context.Context, runtime.Object, fwk.Handle, *Model) (fwk.Plugin, error)) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
		m, err := ms.For(ctx, handle)
		if err != nil {
			return nil, err
		}
		return build(ctx, args, handle, m)
	}
}

// For returns the model of the scheduler whose handle this is, creating
// it, with its informers started and synced, for the first plugin that
// asks.
func (ms *Models) For(ctx context.Context, handle fwk.Handle) (*Model, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m, ok := ms.models[handle.SharedInformerFactory()]; ok {
		names := m.schedulers.Load().Clone().Insert(handle.ProfileName())
		m.schedulers.Store(&names)
		return m, nil
	}
	registerMetrics()
	podInformer, err := podIndexer(handle)
	if err != nil {
		return nil, err
	}
	client, err := schedulingclient.NewForConfig(handle.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("creating the PodGroup client: %w", err)
	}
	factory := schedulinginformers.NewSharedInformerFactory(client, 0)
	podGroups := factory.Scheduling().V1alpha1().PodGroups()
	m := NewModel(podGroups.Informer().GetIndexer(), podInformer.GetIndexer(), handle.ProfileName())
	m.podGroupInformer, m.podInformer, m.activator, m.podGroupClient, m.clientSet = podGroups.Informer(), podInformer, handle, client, handle.ClientSet()
	if _, err := m.podGroupInformer.AddEventHandler(m.podGroupEvents()); err != nil {
		return nil, fmt.Errorf("watching PodGroups: %w", err)
	}
	observing, err := podInformer.AddEventHandler(m.PodEvents())
	if err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	m.observed = observing.HasSynced
	succeededFactory, succeeded, err := succeededPods(handle.ClientSet())
	if err != nil {
		return nil, err
	}
	m.succeeded = succeeded.GetIndexer()
	if _, err := succeeded.AddEventHandler(m.SucceededPodEvents()); err != nil {
		return nil, fmt.Errorf("watching the pods that succeeded: %w", err)
	}
	if err := m.readUpstreamIfServed(ctx, handle); err != nil {
		return nil, err
	}
	if err := startAndSync(ctx, factory, succeededFactory); err != nil {
		return nil, err
	}
	m.publisher = newPublisher(m, handle.ClientSet(), client)
	go m.publisher.run(ctx)
	ms.models[handle.SharedInformerFactory()] = m
	return m, nil
}

// informerFactory is what startAndSync needs of the model's informer
// factories, which are of two generated packages.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool
}

// startAndSync starts the factories' informers and waits until each has
// listed what it watches.
func startAndSync(ctx context.Context, factories ...informerFactory) error {
	for _, factory := range factories {
		factory.Start(ctx.Done())
		for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
			if !synced {
				return fmt.Errorf("syncing the informer of %v", typ)
			}
		}
	}
	return nil
}

// readUpstreamIfServed makes scheduling.k8s.io's PodGroups the model's
// second source of groups when the API server serves them, as it does
// with the GenericWorkload gate on. It asks discovery once, at start: on a
// cluster without the API, the default, there is no informer to fail and
// no request beyond that one. The informer is the scheduler's own, which
// the scheduler starts and syncs before it schedules.
func (m *Model) readUpstreamIfServed(ctx context.Context, handle fwk.Handle) error {
	served, err := workloadapi.ServesPodGroups(ctx, discovery.ToDiscoveryInterfaceWithContext(handle.ClientSet().Discovery()))
	if err != nil {
		return err
	}
	if served {
		podGroups := handle.SharedInformerFactory().Scheduling().V1beta1().PodGroups()
		m.upstream, m.upstreamInformer = podGroups.Lister(), podGroups.Informer()
		if _, err := m.upstreamInformer.AddEventHandler(inOneShape(m.podGroupEvents())); err != nil {
			return fmt.Errorf("watching %s PodGroups: %w", topology.UpstreamPodGroupVersion, err)
		}
	}
	klog.FromContext(ctx).Info("Reading groups from PodGroups", "apis", workloadapi.GroupAPIs(served))
	return nil
}

// inOneShape hands handler scheduling.k8s.io PodGroups in the model's one
// shape (topology.FromUpstream), so that handlers read one kind of group.
func inOneShape(handler cache.ResourceEventHandler) cache.ResourceEventHandler {
	return oneShape{handler}
}

type oneShape struct{ handler cache.ResourceEventHandler }

func (o oneShape) OnAdd(obj any, isInInitialList bool) { o.handler.OnAdd(shape(obj), isInInitialList) }
func (o oneShape) OnUpdate(oldObj, newObj any)         { o.handler.OnUpdate(shape(oldObj), shape(newObj)) }
func (o oneShape) OnDelete(obj any)                    { o.handler.OnDelete(shape(obj)) }

func shape(obj any) any {
	switch obj := obj.(type) {
	case *schedulingv1beta1.PodGroup:
		return topology.FromUpstream(obj)
	case cache.DeletedFinalStateUnknown:
		if pg, ok := obj.Obj.(*schedulingv1beta1.PodGroup); ok {
			return cache.DeletedFinalStateUnknown{Key: obj.Key, Obj: topology.FromUpstream(pg)}
		}
	}
	return obj
}

// podIndexer returns the scheduler's pod informer with the group index.
func podIndexer(handle fwk.Handle) (cache.SharedIndexInformer, error) {
	informer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{IndexName: IndexFunc}); err != nil {
		return nil, fmt.Errorf("indexing pods by group: %w", err)
	}
	return informer, nil
}

// Attempts is the state of each group's scheduling attempt: reservations,
// admission, failure and backoff.

// Rooms is the room held for gangs' late members.

// SetDefaultScheduleTimeout sets the schedule timeout of a gang whose
// PodGroup sets none; Gang sets it from its args as it is built.
func (m *Model) SetDefaultScheduleTimeout(timeout time.Duration) {
	m.scheduleTimeout.Store(int64(timeout))
}

// ScheduleTimeout is how long a gang's reserved members wait at Permit for
// the rest, how long a partly bound gang may take to complete, and how long
// room is held for members its owner creates late: the PodGroup's
// spec.scheduleTimeoutSeconds, within the framework's cap on a Permit
// wait, or the default.
func (m *Model) ScheduleTimeout(pg *v1alpha1.PodGroup) time.Duration {
	if s := pg.Spec.ScheduleTimeoutSeconds; s != nil && *s > 0 && time.Duration(*s)*time.Second <= MaxPermitWait {
		return time.Duration(*s) * time.Second
	}
	return time.Duration(m.scheduleTimeout.Load())
}

// IsAdmitted reports whether the group's gang reached its quorum in its
// attempt.
func (m *Model) IsAdmitted(key types.NamespacedName) bool { return m.Attempts().IsAdmitted(key) }

// IsReserved reports whether the member holds a reservation in its gang's
// attempt.
func (m *Model) IsReserved(key types.NamespacedName, uid types.UID) bool {
	return m.Attempts().IsReserved(key, uid)
}

// OnPodGroupChange tells handler of every PodGroup event, of either
// source, in the model's one shape, after the model has taken it in.
// Plugins add theirs as they are built, before the informers start.
func (m *Model) OnPodGroupChange(handler cache.ResourceEventHandler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.podGroupListeners = append(m.podGroupListeners, handler)
}

func (m *Model) podGroupHandlers() []cache.ResourceEventHandler {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.podGroupListeners
}

// PodChange is a pod event as the model's handler saw it, with the pod's
// group, derived once for every plugin.
type PodChange struct {
	// Old is the pod before an update; nil for an add or a deletion.
	Old *corev1.Pod
	// Pod is the pod after an add or an update, or as it was deleted.
	Pod     *corev1.Pod
	Deleted bool
	// Key is the pod's group; Grouped is false for a pod of none.
	Key     types.NamespacedName
	Grouped bool
}

// Added, Updated and Deleted are the changes an informer tells of.
func Added(pod *corev1.Pod) PodChange        { return changeOf(nil, pod, false) }
func Updated(old, pod *corev1.Pod) PodChange { return changeOf(old, pod, false) }
func Deleted(pod *corev1.Pod) PodChange      { return changeOf(nil, pod, true) }
func changeOf(old, pod *corev1.Pod, deleted bool) PodChange {
	key, grouped := topology.GroupOf(pod)
	return PodChange{Old: old, Pod: pod, Deleted: deleted, Key: key, Grouped: grouped}
}

// OnPodChange tells handler of every pod event the scheduler sees, after
// the group's state has taken it in: what the handler reads of the group
// includes the pod's change. Plugins add theirs as they are built, before
// the informer starts.
func (m *Model) OnPodChange(handler func(PodChange)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, handler)
}

func (m *Model) podListeners() []func(PodChange) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.listeners
}

// PodGroup returns the group's PodGroup, in the model's one shape, or nil
// when neither source has it.
func (m *Model) PodGroup(key types.NamespacedName) *v1alpha1.PodGroup {
	pg, _ := m.podGroupShapes(key)
	return pg
}

// PodGroupsOf returns, for a scheduling cycle's record, the group's
// PodGroup in muster's shape, as PodGroup does, and the scheduling.k8s.io
// PodGroup the pod names in spec.schedulingGroup as the API serves it, as
// UpstreamPodGroupOf does: one lookup gives both where the group is the
// PodGroup the pod names.
func (m *Model) PodGroupsOf(key types.NamespacedName, pod *corev1.Pod) (*v1alpha1.PodGroup, *schedulingv1beta1.PodGroup) {
	pg, upstream := m.podGroupShapes(key)
	switch named := topology.UpstreamGroupName(pod); {
	case named == "":
		return pg, nil
	case upstream == nil || upstream.Name != named:
		return pg, m.UpstreamPodGroupOf(pod)
	}
	return pg, upstream
}

// podGroupShapes returns the group's PodGroup in muster's shape and, when
// the group is scheduling.k8s.io's, that PodGroup as the API serves it.
func (m *Model) podGroupShapes(key types.NamespacedName) (*v1alpha1.PodGroup, *schedulingv1beta1.PodGroup) {
	if pg := m.ownPodGroup(key); pg != nil {
		return pg, nil
	}
	if m.upstream == nil {
		return nil, nil
	}
	upstream, err := m.upstream.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.Background().Error(err, "Reading PodGroup", "podGroup", key, "api", topology.UpstreamPodGroupVersion)
		}
		return nil, nil
	}
	return m.inOneShape(key, upstream), upstream
}

// ownPodGroup returns scheduler-plugins' PodGroup of the name, or nil.
func (m *Model) ownPodGroup(key types.NamespacedName) *v1alpha1.PodGroup {
	obj, exists, err := m.podGroups.GetByKey(key.String())
	if err != nil {
		klog.Background().Error(err, "Reading PodGroup", "podGroup", key)
		return nil
	}
	if !exists {
		return nil
	}
	pg, _ := obj.(*v1alpha1.PodGroup)
	return pg
}

// inOneShape is topology.FromUpstream, converted once per version of the
// PodGroup.
func (m *Model) inOneShape(key types.NamespacedName, upstream *schedulingv1beta1.PodGroup) *v1alpha1.PodGroup {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pg := m.shaped[key]; pg != nil && pg.UID == upstream.UID && pg.ResourceVersion == upstream.ResourceVersion {
		return pg
	}
	pg := topology.FromUpstream(upstream)
	m.shaped[key] = pg
	return pg
}

// UpstreamPodGroup returns the group's PodGroup as scheduling.k8s.io
// serves it, for what the one shape does not hold (its priority and
// disruption mode); nil when the group is scheduler-plugins' or missing.
func (m *Model) UpstreamPodGroup(key types.NamespacedName) *schedulingv1beta1.PodGroup {
	_, upstream := m.podGroupShapes(key)
	return upstream
}

// UpstreamPodGroups reads scheduling.k8s.io's PodGroups by the name a
// pod gives in spec.schedulingGroup, as kube-scheduler's DynamicResources
// reads them to reserve a PodGroup's claims for the PodGroup; nil when the
// API server does not serve them. Unlike UpstreamPodGroup, it does not
// defer to scheduler-plugins' PodGroup of the same name: the pod names
// this one.
func (m *Model) UpstreamPodGroups() schedulingv1beta1listers.PodGroupLister {
	return m.upstream
}

// UpstreamPodGroupOf returns the scheduling.k8s.io PodGroup the pod
// names in spec.schedulingGroup, whose claims DynamicResources reserves
// for it (podgroupdra), or nil.
func (m *Model) UpstreamPodGroupOf(pod *corev1.Pod) *schedulingv1beta1.PodGroup {
	name := topology.UpstreamGroupName(pod)
	if m.upstream == nil || name == "" {
		return nil
	}
	pg, err := m.upstream.PodGroups(pod.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return pg
}

// Members returns the group's members that the scheduler sees: the pods
// that name it, but those NotAMember leaves out.
func (m *Model) Members(key types.NamespacedName) ([]*corev1.Pod, error) {
	pods, err := Members(m.pods, key)
	if err != nil {
		return nil, err
	}
	pg := m.PodGroup(key)
	return slices.DeleteFunc(pods, func(pod *corev1.Pod) bool { return m.NotAMember(pod, pg) != "" }), nil
}

// NotAMember says why a pod that names the group of pg (nil when it has
// no PodGroup) is not one of its members, or returns "" when it is.
func (m *Model) NotAMember(pod *corev1.Pod, pg *v1alpha1.PodGroup) string {
	return topology.NotAMember(pod, pg, m.isOurs)
}

func (m *Model) isOurs(schedulerName string) bool {
	return m.schedulers.Load().Has(schedulerName)
}

// HadQuorum reports whether the group's gang once had its quorum: minMember
// members bound at once, seen by this scheduler or recorded on a
// scheduler-plugins PodGroup by any (topology.QuorumReachedAnnotation,
// recordQuorumReached), or, for an upstream PodGroup, its
// PodGroupInitiallyScheduled condition True. Such a gang is
// admitted for good, as upstream's terminal condition says: a later change
// (a raised minMember) never makes it partly bound, and never evicts what
// runs.
func (m *Model) HadQuorum(key types.NamespacedName, pg *v1alpha1.PodGroup) bool {
	if m.QuorumHeld(key, pg) {
		return true
	}
	if !topology.IsUpstream(pg) {
		return topology.ReachedQuorum(pg)
	}
	upstream := m.UpstreamPodGroup(key)
	return upstream != nil && upstream.UID == pg.UID && apimeta.IsStatusConditionTrue(upstream.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
}

// Topology returns the group's topology: nil when its PodGroup does not
// exist, or an error naming every problem of an invalid one.
func (m *Model) Topology(key types.NamespacedName) (*topology.Topology, error) {
	pg := m.PodGroup(key)
	if pg == nil {
		return nil, nil
	}
	return m.TopologyOf(key, pg)
}

// TopologyOf is Topology for the group's PodGroup pg, already read.
func (m *Model) TopologyOf(key types.NamespacedName, pg *v1alpha1.PodGroup) (*topology.Topology, error) {
	m.mu.Lock()
	cached, ok := m.parsed[key]
	m.mu.Unlock()
	if ok && cached.from == pg {
		return cached.topology, cached.err
	}
	source := topologySource(pg)
	if ok && cached.source == source {
		cached.from = pg
		m.mu.Lock()
		m.parsed[key] = cached
		m.mu.Unlock()
		return cached.topology, cached.err
	}
	parsed := parsedTopology{from: pg, source: source}
	parsed.topology, parsed.err = parse(pg)
	m.mu.Lock()
	m.parsed[key] = parsed
	m.mu.Unlock()
	return parsed.topology, parsed.err
}

func parse(pg *v1alpha1.PodGroup) (*topology.Topology, error) {
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	// Its members wait for the order muster-controller is about to read
	// from their owner, so that none binds before its predecessors.
	if owner, awaits := topology.AwaitsDerivation(pg); awaits {
		return nil, errors.New(topology.AwaitingDerivationMessage(key, owner))
	}
	topo, errs := topology.FromPodGroup(pg)
	if len(errs) > 0 {
		return nil, errors.New(topology.InvalidMessage(key, errs))
	}
	return topo, nil
}

// podGroupEvents keeps the states in step with PodGroups, and wakes the
// members a PodGroup's change may help. Which pods are members depends on
// the PodGroup (topology.NotAMember), so a group's members are counted
// again when its PodGroup is created or deleted; a deleted one's parsed
// topology, attempt, quorum and rooms are dropped. Its pending members are
// moved back to the queue when it is created, or its spec or muster
// annotations change (Changed): kept out for want of it, of a lower
// minMember, or of a valid topology, they may go now. This is the one
// watch of PodGroups: the plugins register no queueing hint on them, so
// kube-scheduler starts no informer of its own for them.
func (m *Model) podGroupEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if key, ok := KeyOf(obj); ok {
				m.recount(key)
				m.wake(key)
			}
			for _, handler := range m.podGroupHandlers() {
				handler.OnAdd(obj, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, okOld := oldObj.(*v1alpha1.PodGroup)
			pg, okNew := newObj.(*v1alpha1.PodGroup)
			if okOld && okNew && Changed(old, pg) {
				m.wake(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name})
			}
			for _, handler := range m.podGroupHandlers() {
				handler.OnUpdate(oldObj, newObj)
			}
		},
		DeleteFunc: func(obj any) {
			key, ok := KeyOf(obj)
			if !ok {
				return
			}
			m.mu.Lock()
			delete(m.parsed, key)
			delete(m.shaped, key)
			m.mu.Unlock()
			m.ForgetPodGroup(key)
			m.Rooms().End(key, groupstate.PodGroupDeleted)
			m.recount(key)
			for _, handler := range m.podGroupHandlers() {
				handler.OnDelete(obj)
			}
		},
	}
}

// recount counts the group's members again from the pod informer's store,
// against the PodGroup the model now has: as a PodGroup is created or
// deleted, or when the pod handler has not yet seen the initial list.
func (m *Model) recount(key types.NamespacedName) {
	members, err := m.CountedMembers(key)
	if err != nil {
		klog.Background().Error(err, "Counting members", "podGroup", key)
		return
	}
	pg := m.PodGroup(key)
	if noted := m.Recount(key, pg, members); noted {
		m.recordQuorumReached(pg, time.Now())
	}
}

// CountedMembers returns the group's members its quorum is counted from:
// those of the scheduler's pod informer (Members) and those that
// succeeded, which it leaves out (topology.Census.Placed).
func (m *Model) CountedMembers(key types.NamespacedName) ([]*corev1.Pod, error) {
	pods, err := Members(m.pods, key)
	if err != nil {
		return nil, err
	}
	if m.succeeded != nil {
		succeeded, err := Members(m.succeeded, key)
		if err != nil {
			return nil, fmt.Errorf("counting the members that succeeded: %w", err)
		}
		pods = append(pods, succeeded...)
	}
	pg := m.PodGroup(key)
	return slices.DeleteFunc(pods, func(pod *corev1.Pod) bool { return m.NotAMember(pod, pg) != "" }), nil
}

// topologySource is what a PodGroup's topology depends on.
func topologySource(pg *v1alpha1.PodGroup) string {
	var b strings.Builder
	b.WriteString(string(pg.UID) + "\x00" + pg.Name)
	if owner := metav1.GetControllerOfNoCopy(pg); owner != nil {
		b.WriteString("\x00" + owner.Kind + "/" + owner.Name)
	}
	ours := musterAnnotations(pg.Annotations)
	for _, name := range slices.Sorted(maps.Keys(ours)) {
		b.WriteString("\x00" + name + "=" + ours[name])
	}
	return b.String()
}

// musterAnnotations returns the muster.dev/ annotations.
func musterAnnotations(annotations map[string]string) map[string]string {
	ours := map[string]string{}
	for name, value := range annotations {
		if strings.HasPrefix(name, topology.AnnotationPrefix) {
			ours[name] = value
		}
	}
	return ours
}

// Changed reports whether an update of a PodGroup matters to scheduling:
// its spec or its muster annotations changed. A status-only write, such as
// muster-controller's counts, does not.
func Changed(old, updated *v1alpha1.PodGroup) bool {
	return !equality.Semantic.DeepEqual(old.Spec, updated.Spec) ||
		!maps.Equal(musterAnnotations(old.Annotations), musterAnnotations(updated.Annotations))
}

// countIfUnobserved runs view on the group's state. Until the pod handler has seen
// the informer's initial list, as just after a start, the queue's handler
// may have seen more of it, and sorted a partly bound gang's members as
// unbound: the group is counted again from the informer's store, which
// holds the whole list before either handler hears of it.
func (m *Model) countIfUnobserved(key types.NamespacedName) {
	if m.observed != nil && !m.observed() {
		m.recount(key)
	}
}

// LateMembers is where a group's late members stand: the members of the
// roles its owner creates only after others are Ready (topology.Late),
// for which room is held at admission.
type LateMembers struct {
	// Missing is how many members of each late role do not exist yet.
	Missing topology.LateToCome
	// Came reports whether a pod of a late role exists, in any phase: a
	// launcher that has finished needs no room.
	Came bool
}

// Total is how many late members do not exist yet.
func (l LateMembers) Total() int32 {
	return l.Missing.Total()
}

// LateMembers reads where the group's late members stand; the zero value
// for a group with none.
func (m *Model) LateMembers(key types.NamespacedName) LateMembers {
	topo, err := m.Topology(key)
	if err != nil {
		return LateMembers{}
	}
	return m.LateMembersOf(key, topo)
}

// LateMembersOf is LateMembers for the group's topology, already read.
func (m *Model) LateMembersOf(key types.NamespacedName, topo *topology.Topology) LateMembers {
	if topo == nil || len(topo.Late) == 0 {
		return LateMembers{}
	}
	active, came := m.ActiveOf(key, slices.Collect(maps.Keys(topo.Late)))
	return LateMembers{Missing: topo.MissingLate(active), Came: came}
}

// PodEvents is the model's one pod handler: it keeps every group's
// members, then tells the plugins' handlers (OnPodChange).
func (m *Model) PodEvents() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				m.Take(Added(pod))
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, okOld := oldObj.(*corev1.Pod)
			pod, okNew := newObj.(*corev1.Pod)
			if okOld && okNew {
				m.Take(Updated(old, pod))
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				m.Take(Deleted(pod))
			}
		},
	}
}

// Take takes a pod's change into its group's state, then tells the
// plugins' handlers.
func (m *Model) Take(change PodChange) {
	if change.Grouped {
		if change.Deleted {
			m.forgetPod(change.Key, change.Pod)
		} else {
			m.observePod(change.Key, change.Pod)
		}
	}
	for _, l := range m.podListeners() {
		l(change)
	}
}

func (m *Model) observePod(key types.NamespacedName, pod *corev1.Pod) {
	pg := m.PodGroup(key)
	notAMember := m.NotAMember(pod, pg) != ""
	now := time.Now()
	noted, partly := m.Observe(key, pod, !notAMember, pg, now)
	if partly > 0 {
		partlyBound.Observe(partly.Seconds())
	}
	// A restarted scheduler notes again a quorum its PodGroup records.
	if noted && !topology.ReachedQuorum(pg) {
		creationToBound.Observe(now.Sub(pg.CreationTimestamp.Time).Seconds())
	}
	if noted {
		m.recordQuorumReached(pg, now)
	}
}

func (m *Model) forgetPod(key types.NamespacedName, pod *corev1.Pod) {
	if partly := m.Forget(key, pod, m.PodGroup(key), time.Now()); partly > 0 {
		partlyBound.Observe(partly.Seconds())
	}
	m.heldTold.forget(pod.UID)
}

// wake moves the group's pending members back to the active queue, when
// the model serves a scheduler.
func (m *Model) wake(key types.NamespacedName) {
	if m.activator != nil {
		m.ActivatePending(klog.Background(), m.activator, key)
	}
}

// ActivatePending moves the group's unbound active members to the active
// queue, past any backoff.
func (m *Model) ActivatePending(logger klog.Logger, activator fwk.PodActivator, key types.NamespacedName) {
	activate(logger, activator, m.Pending(key))
}

// ActivateMembers moves those of the given members that are unbound and
// active to the active queue, past any backoff.
func (m *Model) ActivateMembers(logger klog.Logger, activator fwk.PodActivator, key types.NamespacedName, uids []types.UID) {
	if len(uids) == 0 {
		return
	}
	activate(logger, activator, m.PendingOf(key, uids))
}

func activate(logger klog.Logger, activator fwk.PodActivator, pods []*corev1.Pod) {
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, pod := range pods {
		byName[pod.Namespace+"/"+pod.Name] = pod
	}
	if len(byName) > 0 {
		activator.Activate(logger, byName)
	}
}

// ElasticFulfillment returns the fulfillment score of the group of
// PodGroup pg when a new member would be above the min of the admitted
// elastic group; extra is false for any other group.
func (m *Model) ElasticFulfillment(key types.NamespacedName, pg *v1alpha1.PodGroup) (score float64, extra bool) {
	if pg == nil {
		return 0, false
	}
	return m.elasticFulfillment(key, pg, m.BoundCount(key))
}

func (m *Model) elasticFulfillment(key types.NamespacedName, pg *v1alpha1.PodGroup, bound int32) (score float64, extra bool) {
	if !topology.QuorumOf(pg).ReachedBy(bound) {
		return 0, false
	}
	topo, err := m.TopologyOf(key, pg)
	if err != nil || topo == nil || topo.Elastic == nil {
		return 0, false
	}
	return topo.Elastic.Fulfillment(bound - (pg.Spec.MinMember - topo.Elastic.Min)), true
}

// QueuePlace is what the queue's order reads of a pod's group, in one
// read of its state.
type QueuePlace struct {
	// PartlyBound: members bound, fewer than minMember, and the gang never
	// had its quorum (HadQuorum).
	PartlyBound bool
	// Reserving: the group's attempt holds reservations, not yet admitted.
	Reserving bool
	// ElasticExtra: a member above the min of an admitted elastic group,
	// whose fulfillment is Fulfillment.
	ElasticExtra bool
	Fulfillment  float64
	// QueuedAt is the time the group is queued by after a failed attempt,
	// or zero; SeenAt is when a member first passed PreEnqueue.
	QueuedAt, SeenAt time.Time
}

// QueuePlaceOf returns where the queue places a member of the group of pg.
func (m *Model) QueuePlaceOf(key types.NamespacedName, pg *v1alpha1.PodGroup) QueuePlace {
	q := m.QueueStateOf(key, pg.UID)
	p := QueuePlace{Reserving: q.Reserving, QueuedAt: q.QueuedAt, SeenAt: q.SeenAt}
	if q.Bound > 0 && !topology.QuorumOf(pg).ReachedBy(q.Bound) && !q.QuorumHad {
		p.PartlyBound = !m.HadQuorum(key, pg)
	}
	p.Fulfillment, p.ElasticExtra = m.elasticFulfillment(key, pg, q.Bound)
	return p
}
