//go:build bench

package perf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	schedulinginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/workloadapi"
)

// gateLabel marks the one pod that ends a workload whose finished pods are
// deleted, and is the node label that pod selects. The harness waits for a
// number of scheduled pods, which deleted pods would never reach; the gate
// pod is created last and can bind only once the simulator has labelled a
// node, which it does when every group member it saw has been bound.
const gateLabel = "muster.dev/bench-gate"

// simulator plays the parts scheduler_perf has no op for, for every
// profile alike:
//   - the kubelet: a bound pod annotated muster.dev/sim-ready-after is
//     Running at once and Ready that long after; with muster.dev/sim-run-for
//     it finishes that long after Ready and is deleted, freeing its room;
//   - the operator of jobs whose launcher comes late (operator_test.go);
//   - the gate that ends such a workload (gateLabel), or ends it once no
//     group member has been bound for stallTimeout, which counts the
//     gangs left incomplete as never completed;
//   - the observer: it records when each pod was created, bound, Running,
//     Ready and finished, and reports summarize's figures beside the
//     harness's own when the workload ends.
type simulator struct {
	client   kubernetes.Interface
	queue    workqueue.TypedDelayingInterface[action]
	operator *operator

	mu      sync.Mutex
	pods    map[types.UID]*podTimes
	pending sets.Set[types.UID] // group members seen but not yet bound
	jobs    map[types.NamespacedName]*lateJob
	gate    time.Time // when the gate pod was seen
	opened  bool
	// progress is when a group member was last bound or a late launcher
	// created.
	progress time.Time
	// failed counts actions that failed: the workload was not what it
	// says.
	failed int
	// preempted counts the pods deleted by a scheduler's preemption.
	preempted int
}

// stallTimeout is how long a workload goes on, once its gate pod exists,
// with no group member bound: longer than any pod here runs.
const stallTimeout = 20 * time.Second

type actionKind string

const (
	markRunning actionKind = "running"
	markReady   actionKind = "ready"
	finish      actionKind = "finish"
	openGate    actionKind = "open-gate"
	// The operator's actions, on the job's group.
	createPodGroup actionKind = "create-podgroup"
	createLauncher actionKind = "create-launcher"
	deleteWorkers  actionKind = "delete-workers"
)

type action struct {
	kind actionKind
	pod  types.NamespacedName
	uid  types.UID
}

// simulatorWorkers bounds the simulator's concurrent API calls.
const simulatorWorkers = 8

// startSimulator runs a simulator until the workload's cleanup, which
// reports its figures on the benchmark.
func startSimulator(tCtx ktesting.TContext) error {
	config := rest.CopyConfig(tCtx.RESTConfig())
	config.QPS, config.Burst = -1, 0 // no client-side throttling: the simulator must not lag the scheduler
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the simulator's client: %w", err)
	}
	// The harness speaks protobuf, which PodGroups do not.
	groupConfig := rest.CopyConfig(config)
	groupConfig.ContentType = runtime.ContentTypeJSON
	groupClient, err := schedulingclient.NewForConfig(groupConfig)
	if err != nil {
		return fmt.Errorf("creating the simulator's PodGroup client: %w", err)
	}
	operator, err := newOperator(profileOf(tCtx.TB().Name()), groupClient)
	if err != nil {
		return err
	}
	s := &simulator{
		client:   client,
		queue:    workqueue.NewTypedDelayingQueue[action](),
		operator: operator,
		pods:     map[types.UID]*podTimes{},
		pending:  sets.New[types.UID](),
		jobs:     map[types.NamespacedName]*lateJob{},
		progress: time.Now(),
	}
	ctx, cancel := context.WithCancel(tCtx)
	podInformers := informers.NewSharedInformerFactory(client, 0)
	groupInformers := schedulinginformers.NewSharedInformerFactory(groupClient, 0)
	if _, err := podInformers.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj) },
		UpdateFunc: func(_, obj any) { s.observe(obj) },
		DeleteFunc: s.forget,
	}); err != nil {
		cancel()
		return fmt.Errorf("watching pods: %w", err)
	}
	groups := groupInformers.Scheduling().V1alpha1().PodGroups().Lister()
	podInformers.Start(ctx.Done())
	groupInformers.Start(ctx.Done())
	for informer, synced := range podInformers.WaitForCacheSync(ctx.Done()) {
		if !synced {
			cancel()
			return fmt.Errorf("the simulator's %v informer did not sync", informer)
		}
	}
	for informer, synced := range groupInformers.WaitForCacheSync(ctx.Done()) {
		if !synced {
			cancel()
			return fmt.Errorf("the simulator's %v informer did not sync", informer)
		}
	}

	var workers sync.WaitGroup
	for range simulatorWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for s.work(ctx) {
			}
		}()
	}
	workers.Add(1)
	go func() {
		defer workers.Done()
		wait.UntilWithContext(ctx, s.openGateIfStalled, time.Second)
	}()
	tCtx.Cleanup(func() {
		if err := s.catchUp(ctx); err != nil {
			tCtx.Errorf("the simulator's figures would miss binds: %v", err)
		}
		shapes := map[types.NamespacedName]groupShape{}
		pgs, err := groups.List(labels.Everything())
		if err != nil {
			tCtx.Errorf("listing PodGroups: %v", err)
		}
		upstream, err := upstreamPodGroups(ctx, client)
		if err != nil {
			tCtx.Errorf("listing %s PodGroups: %v", topology.UpstreamPodGroupVersion, err)
		}
		domains := map[string]map[string]string{}
		for _, pg := range append(pgs, upstream...) {
			shape := groupShape{minMember: pg.Spec.MinMember}
			t, errs := topology.Parse(pg.Annotations)
			if len(errs) == 0 && len(t.Roles) > 0 {
				shape.topology = t
			}
			if len(errs) == 0 && t.DomainKey != "" {
				if domains[t.DomainKey] == nil {
					if domains[t.DomainKey], err = nodeDomains(ctx, client, t.DomainKey); err != nil {
						tCtx.Errorf("reading the nodes' %s: %v", t.DomainKey, err)
					}
				}
				shape.domainOf = domains[t.DomainKey]
			}
			key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
			_, shape.lateLauncher = s.jobs[key]
			shapes[key] = shape
		}
		end := time.Now()
		s.queue.ShutDown()
		cancel()
		workers.Wait()
		if s.failed > 0 {
			tCtx.Errorf("%d of the simulator's actions failed; its log lines say which", s.failed)
		}
		podInformers.Shutdown()
		groupInformers.Shutdown()
		if b, ok := tCtx.TB().(*testing.B); ok {
			s.report(b, shapes, end)
		}
	})
	return nil
}

// nodeDomains maps each node that has the label to its value.
func nodeDomains(ctx context.Context, client kubernetes.Interface, label string) (map[string]string, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		return nil, err
	}
	domains := make(map[string]string, len(nodes.Items))
	for _, n := range nodes.Items {
		domains[n.Name] = n.Labels[label]
	}
	return domains, nil
}

// upstreamPodGroups lists scheduling.k8s.io's PodGroups, in the group
// model's shape, where the workload's API server serves them.
func upstreamPodGroups(ctx context.Context, client kubernetes.Interface) ([]*v1alpha1.PodGroup, error) {
	served, err := workloadapi.ServesPodGroups(ctx, discovery.ToDiscoveryInterfaceWithContext(client.Discovery()))
	if err != nil || !served {
		return nil, err
	}
	list, err := client.SchedulingV1beta1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pgs := make([]*v1alpha1.PodGroup, 0, len(list.Items))
	for i := range list.Items {
		pgs = append(pgs, topology.FromUpstream(&list.Items[i]))
	}
	return pgs, nil
}

// catchUp waits until the simulator has seen every bind the API server
// has: the harness ends a workload when its own informer has seen them,
// and this one may lag behind it.
func (s *simulator) catchUp(ctx context.Context) error {
	pods, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, pod := range pods.Items {
			if _, isGate := pod.Labels[gateLabel]; isGate || pod.Spec.NodeName == "" {
				continue
			}
			if p, seen := s.pods[pod.UID]; !seen || p.bound.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
}

func (s *simulator) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if _, isGate := pod.Labels[gateLabel]; isGate {
		if s.gate.IsZero() {
			s.gate = now
		}
		s.openGateIfDone()
		return
	}
	p, seen := s.pods[pod.UID]
	if !seen {
		p = &podTimes{created: now}
		p.group, _ = topology.GroupOf(pod)
		p.role, _ = topology.RoleOf(pod)
		gpus := resources.OfPod(pod)[gpuResource]
		p.gpus = gpus.Value()
		s.pods[pod.UID] = p
		if p.group.Name != "" && pod.Spec.NodeName == "" {
			s.pending.Insert(pod.UID)
		}
		if workers, ok := launcherAfter(pod); ok {
			s.trackWorker(p.group, workers, pod.UID, key)
		}
	}
	job := s.jobs[p.group]
	if pod.Spec.NodeName != "" && p.bound.IsZero() {
		p.bound, p.node = now, pod.Spec.NodeName
		s.progress = now
		s.pending.Delete(pod.UID)
		if job != nil && p.role == "launcher" {
			job.launcherBound = true
		}
		s.openGateIfDone()
		if readyAfter, ok := annotatedDuration(pod, localcluster.SimReadyAfterAnnotation); ok {
			if readyAfter == 0 {
				s.queue.Add(action{kind: markReady, pod: key, uid: pod.UID})
			} else {
				s.queue.Add(action{kind: markRunning, pod: key, uid: pod.UID})
				s.queue.AddAfter(action{kind: markReady, pod: key, uid: pod.UID}, readyAfter)
			}
		}
	}
	if pod.Status.Phase == corev1.PodRunning && p.running.IsZero() {
		p.running = now
	}
	if podutil.IsPodReady(pod) && p.ready.IsZero() {
		p.ready = now
		if job != nil && job.members[pod.UID] == key {
			job.ready.Insert(pod.UID)
			if int32(job.ready.Len()) == job.workers && !job.launcherCreated {
				job.launcherCreated = true
				s.progress = now
				s.queue.Add(action{kind: createLauncher, pod: p.group})
			}
		}
		if runFor, ok := annotatedDuration(pod, localcluster.SimRunForAnnotation); ok {
			s.queue.AddAfter(action{kind: finish, pod: key, uid: pod.UID}, runFor)
		}
	}
}

func (s *simulator) forget(obj any) {
	tombstone, lastSeen := obj.(cache.DeletedFinalStateUnknown)
	if lastSeen {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A tombstone, after the API server dropped a watcher that fell behind,
	// holds the pod as last seen, maybe before a preemption marked it. Then
	// a bound pod the simulator did not end went by a scheduler's
	// preemption: nothing else deletes pods during a workload.
	if preemptedByScheduler(pod) || lastSeen && s.boundAndNotEnded(pod.UID) {
		s.preempted++
	}
	s.pending.Delete(pod.UID)
	s.openGateIfDone()
}

// boundAndNotEnded reports whether the pod was seen bound and was not
// ended by the simulator.
func (s *simulator) boundAndNotEnded(uid types.UID) bool {
	p, seen := s.pods[uid]
	return seen && !p.bound.IsZero() && p.finished.IsZero()
}

// preemptedByScheduler reports whether a scheduler's preemption deleted
// the pod: kube-scheduler's preemption executor, which every profile here
// uses, marks a victim with this condition before deleting it.
func preemptedByScheduler(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}

// trackWorker records a worker of a job whose launcher comes late, and
// has its PodGroup created when it is the job's first. It must be called
// with s.mu held.
func (s *simulator) trackWorker(group types.NamespacedName, workers int32, uid types.UID, key types.NamespacedName) {
	job, ok := s.jobs[group]
	if !ok {
		job = &lateJob{workers: workers, members: map[types.UID]types.NamespacedName{}, ready: sets.New[types.UID]()}
		s.jobs[group] = job
		s.queue.Add(action{kind: createPodGroup, pod: group})
	}
	job.members[uid] = key
}

// openGateIfDone opens the gate once every group member seen, and every
// late launcher, has been bound. It must be called with s.mu held.
func (s *simulator) openGateIfDone() {
	if s.gate.IsZero() || s.opened || s.pending.Len() > 0 {
		return
	}
	for _, job := range s.jobs {
		if !job.launcherBound {
			return
		}
	}
	s.opened = true
	s.queue.Add(action{kind: openGate})
}

// openGateIfStalled opens the gate when no group member has been bound for
// stallTimeout since the gate pod was created: gangs that are still
// incomplete then wait for each other or for room that nothing will free.
func (s *simulator) openGateIfStalled(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate.IsZero() || s.opened || time.Now().Before(latest(s.gate, s.progress).Add(stallTimeout)) {
		return
	}
	s.opened = true
	klog.FromContext(ctx).Info("Ending the workload: no group member was bound within the stall timeout", "timeout", stallTimeout, "pendingMembers", s.pending.Len())
	s.queue.Add(action{kind: openGate})
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func annotatedDuration(pod *corev1.Pod, annotation string) (time.Duration, bool) {
	v, ok := pod.Annotations[annotation]
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		klog.ErrorS(err, "Ignoring an annotation that is not a duration", "pod", klog.KRef(pod.Namespace, pod.Name), "annotation", annotation)
		return 0, false
	}
	return d, true
}

// work carries out one action; false once the queue is shut down.
func (s *simulator) work(ctx context.Context) bool {
	a, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(a)
	var err error
	switch a.kind {
	case markRunning:
		err = s.patchStatus(ctx, a, `{"status":{"phase":"Running"}}`)
	case markReady:
		now := metav1.Now().UTC().Format(time.RFC3339)
		err = s.patchStatus(ctx, a, fmt.Sprintf(`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":%q}]}}`, now))
	case finish:
		s.mu.Lock()
		if p, ok := s.pods[a.uid]; ok {
			p.finished = time.Now()
			if _, isJob := s.jobs[p.group]; isJob && p.role == "launcher" {
				s.queue.Add(action{kind: deleteWorkers, pod: p.group})
			}
		}
		s.mu.Unlock()
		err = s.deletePod(ctx, a.pod, a.uid)
	case openGate:
		err = s.openGate(ctx)
	case createPodGroup:
		s.mu.Lock()
		workers := s.jobs[a.pod].workers
		s.mu.Unlock()
		err = s.operator.createPodGroup(ctx, a.pod, workers)
	case createLauncher:
		_, err = s.client.CoreV1().Pods(a.pod.Namespace).Create(ctx, s.operator.launcherPod(a.pod), metav1.CreateOptions{})
	case deleteWorkers:
		err = s.deleteWorkers(ctx, a.pod)
	}
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		klog.ErrorS(err, "Simulator action failed", "action", a.kind, "pod", a.pod)
		s.mu.Lock()
		s.failed++
		s.mu.Unlock()
	}
	return true
}

func (s *simulator) deletePod(ctx context.Context, pod types.NamespacedName, uid types.UID) error {
	zero := int64(0)
	return s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
}

// deleteWorkers ends a job whose launcher has finished, as its operator
// cleans up.
func (s *simulator) deleteWorkers(ctx context.Context, group types.NamespacedName) error {
	s.mu.Lock()
	members := maps.Clone(s.jobs[group].members)
	now := time.Now()
	for uid := range members {
		if p, ok := s.pods[uid]; ok {
			p.finished = now
		}
	}
	s.mu.Unlock()
	var errs []error
	for uid, pod := range members {
		if err := s.deletePod(ctx, pod, uid); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *simulator) patchStatus(ctx context.Context, a action, patch string) error {
	_, err := s.client.CoreV1().Pods(a.pod.Namespace).Patch(ctx, a.pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

func (s *simulator) openGate(ctx context.Context) error {
	nodes, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("listing a node to open the gate on: %w", err)
	}
	if len(nodes.Items) == 0 {
		return fmt.Errorf("no node to open the gate on")
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"open"}}}`, gateLabel)
	_, err = s.client.CoreV1().Nodes().Patch(ctx, nodes.Items[0].Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// report adds the simulator's figures to the benchmark's result line, in
// benchstat units; a figure is left out where the workload has nothing to
// measure it on.
func (s *simulator) report(b *testing.B, shapes map[types.NamespacedName]groupShape, end time.Time) {
	s.mu.Lock()
	pods := make([]podTimes, 0, len(s.pods))
	for _, p := range s.pods {
		pods = append(pods, *p)
	}
	preempted := s.preempted
	s.mu.Unlock()
	bound := 0
	for _, p := range pods {
		if !p.bound.IsZero() {
			bound++
		}
	}
	b.ReportMetric(float64(bound), "bound_pods")
	if preempted > 0 {
		b.ReportMetric(float64(preempted), "preempted_pods")
	}
	sum := summarize(pods, shapes, end)
	if sum.gangs == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(sum.gangs), "gangs")
	b.ReportMetric(float64(sum.partial), "partial_gangs")
	if sum.constrained > 0 {
		b.ReportMetric(float64(sum.spanning), "spanning_gangs")
	}
	b.ReportMetric(sum.completion.Seconds(), "completion_s")
	if len(sum.admission) > 0 {
		b.ReportMetric(ms(percentile(sum.admission, 50)), "gang_admission_ms/Perc50")
		b.ReportMetric(ms(percentile(sum.admission, 99)), "gang_admission_ms/Perc99")
	}
	if sum.successors > 0 {
		b.ReportMetric(float64(sum.early), "launch_early")
	}
	if len(sum.release) > 0 {
		b.ReportMetric(ms(percentile(sum.release, 50)), "launch_release_ms/Perc50")
		b.ReportMetric(ms(percentile(sum.release, 99)), "launch_release_ms/Perc99")
		b.ReportMetric(ms(percentile(sum.release, 100)), "launch_release_ms/Max")
	}
	if sum.lateJobs > 0 {
		if len(sum.launcherWait) > 0 {
			b.ReportMetric(ms(percentile(sum.launcherWait, 50)), "launcher_wait_ms/Perc50")
			b.ReportMetric(ms(percentile(sum.launcherWait, 99)), "launcher_wait_ms/Perc99")
			b.ReportMetric(percentile(sum.jobStart, 50).Seconds(), "job_start_s/Perc50")
			b.ReportMetric(percentile(sum.jobStart, 99).Seconds(), "job_start_s/Perc99")
		}
		b.ReportMetric(sum.idleGPUSeconds, "idle_worker_gpu_s")
		b.ReportMetric(float64(sum.neverLaunched), "never_launched")
	}
}
