//go:build bench

// Package kueue benchmarks Kueue in front of muster-scheduler against Kueue
// in front of kube-scheduler's default plugins, on the real control plane
// with the real Kueue: the same batch Jobs of 8 to 64 pods, each in a
// PodGroup of its size, submitted at once to two ClusterQueues of one
// cohort that borrow from each other. Kueue admits a Job when its quota
// holds it; the scheduler then places its pods, muster all or nothing.
//
// The nodes are static, as in upstream's scheduler_perf: no kubelet plays
// them, so a pod bound is where a pod Running would be, and a Job's time
// is from its submission to its last pod bound. Once bound whole, a Job
// runs for runFor and is deleted, which gives its quota back.
//
// Per side it reports the p50 and p99 of that time, the partial gangs
// (Jobs left partly bound for more than partialAfter) and the deadlocks
// (Jobs never bound whole before the deadline). The build tag keeps it out
// of `make test`, since a benchmark never fails on a timing.
package kueue

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
	"github.com/muster-dev/muster/test/perf/figures"
)

const (
	nodeCPU      = 8
	runFor       = 20 * time.Second
	partialAfter = 5 * time.Second
	deadline     = 15 * time.Minute
	seed         = 40
)

var teams = []string{"team-a", "team-b"}

// job is one Job of the workload.
type job struct {
	name, team string
	size       int
}

// workload is the Jobs, alternating between the teams, of 8 to 64 pods.
func workload(count int) []job {
	r := rand.New(rand.NewPCG(seed, seed))
	jobs := make([]job, count)
	for i := range jobs {
		jobs[i] = job{name: fmt.Sprintf("job-%d", i), team: teams[i%len(teams)], size: 8 + r.IntN(57)}
	}
	return jobs
}

// setup is one side: a scheduler configuration and the scheduler name its
// pods name.
type setup struct {
	name, schedulerName string
	config              map[string]any
}

// clientConnection lets each scheduler write as fast as the workload asks.
var clientConnection = map[string]any{"qps": 500, "burst": 1000}

func setups(b *testing.B) []setup {
	muster := map[string]any{}
	if err := yaml.Unmarshal(manifests.SchedulerConfig, &muster); err != nil {
		b.Fatal(err)
	}
	muster["clientConnection"] = clientConnection
	return []setup{
		{name: "muster", schedulerName: localcluster.SchedulerName, config: muster},
		{name: "default", schedulerName: "default-scheduler", config: map[string]any{
			"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
			"leaderElection": map[string]any{"leaderElect": false}, "clientConnection": clientConnection,
			"profiles": []any{map[string]any{"schedulerName": "default-scheduler"}},
		}},
	}
}

// result is one side's figures.
type result struct {
	p50, p99          time.Duration
	partial, deadlock int
}

// BenchmarkKueueAdmissionAndScheduling runs the workload on each side,
// interleaved, BENCH_KUEUE_ROUNDS times (3), on BENCH_KUEUE_NODES nodes
// (1,000) with BENCH_KUEUE_JOBS Jobs (200).
// TestMain has controller-runtime's client, with which each round's
// cluster installs muster, log through klog as muster's programs do,
// rather than warn with a stack trace that no logger was set.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.NewKlogr())
	os.Exit(m.Run())
}

func BenchmarkKueueAdmissionAndScheduling(b *testing.B) {
	rounds := framework.Rounds(b, "BENCH_KUEUE_ROUNDS")
	nodes, jobs := envInt(b, "BENCH_KUEUE_NODES", 1000), workload(envInt(b, "BENCH_KUEUE_JOBS", 200))
	p50, p99 := map[string][]float64{}, map[string][]float64{}
	for round := 1; round <= rounds; round++ {
		for _, s := range setups(b) {
			b.Run(fmt.Sprintf("%s/round-%d", s.name, round), func(b *testing.B) {
				r := run(b, s, nodes, jobs)
				p50[s.name] = append(p50[s.name], r.p50.Seconds())
				p99[s.name] = append(p99[s.name], r.p99.Seconds())
				b.ReportMetric(r.p50.Seconds(), "bound-p50-s")
				b.ReportMetric(r.p99.Seconds(), "bound-p99-s")
				b.ReportMetric(float64(r.partial), "partial-gangs")
				b.ReportMetric(float64(r.deadlock), "deadlocks")
			})
		}
	}
	if len(p99["muster"]) == rounds && len(p99["default"]) == rounds {
		b.Logf("p99, muster over default, median of %d rounds: %.2f", rounds, median(p99["muster"])/median(p99["default"]))
	}
	if path := os.Getenv("BENCH_KUEUE_FIGURE"); path != "" {
		var series []figures.Series
		for _, side := range []string{"muster", "default"} {
			series = append(series, figures.Series{Name: side, Values: [][]float64{p50[side], p99[side]}})
		}
		figure, err := figures.Rounds("Submission to every pod bound, behind Kueue, each round", "seconds", []string{"p50", "p99"}, math.NaN(), series)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, figure, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func envInt(b *testing.B, variable string, fallback int) int {
	v := os.Getenv(variable)
	if v == "" {
		return fallback
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a whole number from 1", variable, v)
	}
	return n
}

func median(values []float64) float64 {
	sorted := slices.Sorted(slices.Values(values))
	return sorted[len(sorted)/2]
}

// run plays the workload on a cluster of its own, started for the side
// and stopped after.
func run(b *testing.B, s setup, nodes int, jobs []job) result {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	config, err := yaml.Marshal(s.config)
	if err != nil {
		b.Fatal(err)
	}
	opts := localcluster.DefaultOptions(b.TempDir(), framework.BinDir())
	opts.Nodes, opts.StaticNodes, opts.SchedulerConfig = 1, true, config
	cluster, err := localcluster.Up(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cluster.Down(); err != nil {
			b.Error(err)
		}
	}()
	if err := cluster.StartKueue(ctx, framework.BinDir(), localcluster.KueueOptions{Frameworks: []string{"batch/job"}}); err != nil {
		b.Fatal(err)
	}
	rest, err := cluster.RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	rest.QPS, rest.Burst = 2000, 4000
	client := kubernetes.NewForConfigOrDie(rest)
	createNodes(ctx, b, client, nodes)
	queues(ctx, b, client, dynamic.NewForConfigOrDie(rest), nodes*nodeCPU/2)

	l := newLedger(jobs)
	watch(ctx, b, client, l)
	groups := schedulingclient.NewForConfigOrDie(rest)
	for _, j := range jobs {
		l.submitted(j.name, time.Now())
		submit(ctx, b, client, groups, s.schedulerName, j)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, deadline, true, func(ctx context.Context) (bool, error) {
		for _, name := range l.boundWhole() {
			// Deleting the Job gives its quota back to Kueue.
			time.AfterFunc(runFor, func() {
				_ = client.BatchV1().Jobs(l.jobs[name].team).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
			})
		}
		return l.done(), nil
	})
	if err != nil {
		b.Logf("%s: not every Job bound whole within %s", s.name, deadline)
	}
	return l.result(time.Now())
}

// createNodes creates the static nodes, Ready, of nodeCPU CPUs.
func createNodes(ctx context.Context, b *testing.B, client kubernetes.Interface, count int) {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(nodeCPU, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	framework.Parallel(b, count, func(i int) error {
		name := fmt.Sprintf("node-%d", i)
		now := metav1.Now()
		_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Static", LastHeartbeatTime: now, LastTransitionTime: now}}},
		}, metav1.CreateOptions{})
		return err
	})
}

// queues gives each team a namespace and a LocalQueue lq of a ClusterQueue
// of its name holding cpu CPUs, both in one cohort, so that each borrows
// what the other leaves unused.
func queues(ctx context.Context, b *testing.B, client kubernetes.Interface, dyn dynamic.Interface, cpu int) {
	kueue := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
	}
	create := func(resource dynamic.ResourceInterface, manifest string) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
			b.Fatal(err)
		}
		// Kueue's webhooks serve a moment after it is ready.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := resource.Create(ctx, obj, metav1.CreateOptions{})
			return err == nil, nil
		})
		if err != nil {
			b.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	create(dyn.Resource(kueue("resourceflavors")), "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n")
	for _, team := range teams {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		create(dyn.Resource(kueue("clusterqueues")), fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  cohortName: all
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: "%[2]d"}]
`, team, cpu))
		create(dyn.Resource(kueue("localqueues")).Namespace(team), "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: "+team+"}\n")
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ServiceAccounts(team).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			b.Fatalf("namespace %s has no default ServiceAccount: %v", team, err)
		}
	}
}

// submit creates the Job's PodGroup and the Job, in its team's queue, its
// pods of one CPU each for the scheduler.
func submit(ctx context.Context, b *testing.B, client kubernetes.Interface, groups schedulingclient.Interface, scheduler string, j job) {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: j.team, Name: j.name}, Spec: v1alpha1.PodGroupSpec{MinMember: int32(j.size)}}
	if _, err := groups.SchedulingV1alpha1().PodGroups(j.team).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	size := int32(j.size)
	batch := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.team, Name: j.name, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "lq"}},
		Spec: batchv1.JobSpec{
			Parallelism: &size, Completions: &size,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{topology.GroupLabel: j.name}},
				Spec: corev1.PodSpec{
					SchedulerName: scheduler, RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
				},
			},
		},
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.BatchV1().Jobs(j.team).Create(ctx, batch, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		b.Fatalf("creating Job %s: %v", j.name, err)
	}
}

// watch feeds the ledger the pods' binds.
func watch(ctx context.Context, b *testing.B, client kubernetes.Interface, l *ledger) {
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	observe := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			l.bound(pod.Labels[topology.GroupLabel], pod.UID, time.Now())
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
}

// ledger records each Job's submission, its pods' binds, and when it was
// first partly and then wholly bound.
type ledger struct {
	mu   sync.Mutex
	jobs map[string]job
	// submittedAt, partlyAt, wholeAt by Job; boundPods by Job.
	submittedAt, partlyAt, wholeAt map[string]time.Time
	boundPods                      map[string]map[any]bool
	// reported are the Jobs boundWhole has returned.
	reported map[string]bool
}

func newLedger(jobs []job) *ledger {
	l := &ledger{jobs: map[string]job{}, submittedAt: map[string]time.Time{}, partlyAt: map[string]time.Time{}, wholeAt: map[string]time.Time{},
		boundPods: map[string]map[any]bool{}, reported: map[string]bool{}}
	for _, j := range jobs {
		l.jobs[j.name] = j
		l.boundPods[j.name] = map[any]bool{}
	}
	return l
}

func (l *ledger) submitted(name string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.submittedAt[name] = at
}

func (l *ledger) bound(name string, uid any, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pods, ok := l.boundPods[name]
	if !ok || pods[uid] {
		return
	}
	pods[uid] = true
	if _, ok := l.partlyAt[name]; !ok {
		l.partlyAt[name] = at
	}
	if len(pods) == l.jobs[name].size {
		l.wholeAt[name] = at
	}
}

// boundWhole returns the Jobs bound whole since it was last called.
func (l *ledger) boundWhole() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for name := range l.wholeAt {
		if !l.reported[name] {
			l.reported[name] = true
			names = append(names, name)
		}
	}
	return names
}

func (l *ledger) done() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.wholeAt) == len(l.jobs)
}

// result: the times of the Jobs bound whole; a partial gang is a Job that
// was partly bound for more than partialAfter, or still is at the end; a
// deadlock, one never bound whole.
func (l *ledger) result(end time.Time) result {
	l.mu.Lock()
	defer l.mu.Unlock()
	var r result
	var times []time.Duration
	for name := range l.jobs {
		partly, started := l.partlyAt[name]
		whole, ok := l.wholeAt[name]
		if !ok {
			r.deadlock++
			whole = end
		} else {
			times = append(times, whole.Sub(l.submittedAt[name]))
		}
		if started && whole.Sub(partly) > partialAfter {
			r.partial++
		}
	}
	if len(times) > 0 {
		slices.Sort(times)
		r.p50 = times[len(times)/2]
		r.p99 = times[min(len(times)-1, int(0.99*float64(len(times))))]
	}
	return r
}
