//go:build bench

// Package elastic benchmarks elastic groups sharing a cluster with rigid
// gangs against the same gangs made rigid at their min and at their max,
// side by side in one run, on the real control plane with muster-scheduler
// and muster-controller (kwok as the kubelet): cluster utilization, how
// long the rigid gangs wait, and when the work is done. `make
// bench-elastic` runs it and writes docs/elastic-benchmark.md; the build
// tag keeps it out of `make test`, since a benchmark never fails on a
// timing.
package elastic

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

const (
	poolNodes = 4
	nodeCPU   = 4
	// elasticWindow is muster-controller's --elastic-window here: shorter
	// than its default of 15 s, so that the workload's jobs can be short.
	elasticWindow = 5 * time.Second
	tick          = 200 * time.Millisecond
	// giveUp bounds a shape's run: every shape finishes well before.
	giveUp = 6 * time.Minute
)

func TestMain(m *testing.M) {
	framework.RunMain(m, func(opts *localcluster.Options) { opts.ElasticWindow = elasticWindow })
}

// job is one training job of the workload. Every worker asks for one CPU
// and does one unit of work per second while its job has its min bound.
type job struct {
	name string
	// rigid jobs are gangs of min workers in every shape; the others are
	// elastic, or rigid at min or at max, by shape.
	rigid    bool
	min, max int32
	work     float64 // worker-seconds
	arrive   time.Duration
}

// workload: two long elastic jobs of 2 to 8 workers from the start, and six
// rigid gangs of 4 arriving one every 6 s from 10 s, each 12 s long at 4.
var workload = func() []job {
	jobs := []job{
		{name: "e1", min: 2, max: 8, work: 240},
		{name: "e2", min: 2, max: 8, work: 240},
	}
	for i := range 6 {
		jobs = append(jobs, job{name: fmt.Sprintf("r%d", i+1), rigid: true, min: 4, max: 4, work: 48, arrive: 10*time.Second + time.Duration(i)*6*time.Second})
	}
	return jobs
}()

// shape is how the non-rigid jobs run.
type shape string

const (
	elastic    shape = "elastic"
	rigidAtMin shape = "rigid-at-min"
	rigidAtMax shape = "rigid-at-max"
)

// result is what one shape's run measured.
type result struct {
	// utilization is the CPU requested by bound pods over the pool's, over
	// the whole run; belowMax the same over the time some non-rigid job
	// ran admitted below its max (NaN when none did).
	utilization, belowMax float64
	// rigidWait is each rigid gang's time from creation to its min bound.
	rigidWait map[string]time.Duration
	// makespan is from the start to the last job done; completion each
	// job's from its creation to its end.
	makespan   time.Duration
	completion map[string]time.Duration
}

// BenchmarkElasticSharing runs the workload in each shape, interleaved,
// BENCH_ELASTIC_ROUNDS times (3), and reports the medians.
func BenchmarkElasticSharing(b *testing.B) {
	rounds := framework.Rounds(b, "BENCH_ELASTIC_ROUNDS")
	results := map[shape][]result{}
	for round := 1; round <= rounds; round++ {
		for _, s := range []shape{elastic, rigidAtMin, rigidAtMax} {
			b.Run(fmt.Sprintf("%s/round-%d", s, round), func(b *testing.B) {
				r := run(b, s)
				results[s] = append(results[s], r)
				b.ReportMetric(r.utilization*100, "util-%")
				b.ReportMetric(mean(r.rigidWait).Seconds(), "rigid-wait-s")
				b.ReportMetric(r.makespan.Seconds(), "makespan-s")
			})
		}
	}
	if b.Failed() {
		return
	}
	summary := summarize(rounds, medians(results))
	b.Log("\n" + summary)
	if doc := os.Getenv("BENCH_ELASTIC_DOC"); doc != "" {
		if err := os.WriteFile(doc, []byte(summary), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// medians is each shape's result made of the median of each figure over
// the rounds.
func medians(results map[shape][]result) map[shape]result {
	median := func(values []float64) float64 {
		slices.Sort(values)
		return values[len(values)/2]
	}
	medianOf := func(runs []result, figure func(result) float64) float64 {
		var values []float64
		for _, r := range runs {
			values = append(values, figure(r))
		}
		return median(values)
	}
	durations := func(runs []result, pick func(result) map[string]time.Duration) map[string]time.Duration {
		out := map[string]time.Duration{}
		for name := range pick(runs[0]) {
			out[name] = time.Duration(medianOf(runs, func(r result) float64 { return float64(pick(r)[name]) }))
		}
		return out
	}
	out := map[shape]result{}
	for s, runs := range results {
		out[s] = result{
			utilization: medianOf(runs, func(r result) float64 { return r.utilization }),
			belowMax:    medianOf(runs, func(r result) float64 { return r.belowMax }),
			makespan:    time.Duration(medianOf(runs, func(r result) float64 { return float64(r.makespan) })),
			rigidWait:   durations(runs, func(r result) map[string]time.Duration { return r.rigidWait }),
			completion:  durations(runs, func(r result) map[string]time.Duration { return r.completion }),
		}
	}
	return out
}

// live is a job of a run: its progress, and when it was admitted and done.
type live struct {
	job
	size              int32 // its gang's min in this shape
	elasticThisRun    bool
	created, admitted time.Time
	progress          float64
	done              bool
	ended             time.Time
}

func run(b *testing.B, s shape) result {
	ns := framework.NewNamespace(b)
	framework.NodePool(b, ns, poolNodes, fmt.Sprint(nodeCPU))
	ctx := context.Background()
	capacity := float64(poolNodes * nodeCPU)
	var jobs []*live
	for _, j := range workload {
		l := &live{job: j, size: j.min}
		if !j.rigid && s == rigidAtMax {
			l.size = j.max
		}
		l.elasticThisRun = !j.rigid && s == elastic
		jobs = append(jobs, l)
	}

	binds := watchBinds(b, ns)
	start := time.Now()
	last := start
	var busy, busyBelowMax, belowMaxTime float64
	for {
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		if now.Sub(start) > giveUp {
			b.Fatalf("%s: the workload did not finish in %s", s, giveUp)
		}
		for _, l := range jobs {
			if l.created.IsZero() && now.Sub(start) >= l.arrive {
				l.created = time.Now()
				create(b, ns, l)
			}
		}
		pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		bound := map[string]int32{}
		var requested float64
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !framework.IsBound(pod) || !topology.IsActiveMember(pod) {
				continue
			}
			bound[pod.Labels[topology.GroupLabel]]++
			requests := resources.OfPod(pod)
			requested += requests.Cpu().AsApproximateFloat64()
		}
		busy += requested * dt
		belowMax := false
		allDone := true
		for _, l := range jobs {
			if l.done || l.created.IsZero() {
				allDone = allDone && l.done
				continue
			}
			allDone = false
			n := bound[l.name]
			if n < l.size {
				continue
			}
			if l.admitted.IsZero() {
				l.admitted = binds.admitted(l.name, l.size)
			}
			if !l.rigid && n < l.max {
				belowMax = true
			}
			l.progress += float64(n) * dt
			if l.progress >= l.work {
				l.done, l.ended = true, now
				remove(b, ns, l)
			}
		}
		if belowMax {
			busyBelowMax += requested * dt
			belowMaxTime += capacity * dt
		}
		if allDone {
			break
		}
		time.Sleep(tick)
	}
	r := result{rigidWait: map[string]time.Duration{}, completion: map[string]time.Duration{}}
	for _, l := range jobs {
		r.makespan = max(r.makespan, l.ended.Sub(start))
		r.completion[l.name] = l.ended.Sub(l.created)
		if l.rigid {
			r.rigidWait[l.name] = l.admitted.Sub(l.created)
		}
	}
	r.utilization = busy / (capacity * r.makespan.Seconds())
	r.belowMax = busyBelowMax / belowMaxTime
	return r
}

// bindTimes is when each pod of a namespace was first seen bound, by
// group, from a watch: a rigid gang's wait is measured to its binds, not to
// the sample that sees them.
type bindTimes struct {
	mu      sync.Mutex
	byGroup map[string]map[types.UID]time.Time
}

func watchBinds(b *testing.B, ns string) *bindTimes {
	binds := &bindTimes{byGroup: map[string]map[types.UID]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(framework.Client, 0, informers.WithNamespace(ns))
	record := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !framework.IsBound(pod) {
			return
		}
		at := time.Now()
		binds.mu.Lock()
		defer binds.mu.Unlock()
		group := pod.Labels[topology.GroupLabel]
		if binds.byGroup[group] == nil {
			binds.byGroup[group] = map[types.UID]time.Time{}
		}
		if _, seen := binds.byGroup[group][pod.UID]; !seen {
			binds.byGroup[group][pod.UID] = at
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return binds
}

// admitted is when the group's size-th pod was bound; zero until the
// watch has seen it.
func (t *bindTimes) admitted(group string, size int32) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	times := slices.SortedFunc(maps.Values(t.byGroup[group]), time.Time.Compare)
	if int32(len(times)) < size {
		return time.Time{}
	}
	return times[size-1]
}

// create makes a job's PodGroup and workers: a rigid gang's as pods, the
// others' as a StatefulSet named <job>-worker, at min workers when
// elastic or rigid at min, at max when rigid at max.
func create(b *testing.B, ns string, l *live) {
	annotations := map[string]string{}
	if !l.rigid {
		// An elastic group lists its workers at max.
		annotations[topology.RolesAnnotation] = fmt.Sprintf("worker=%d", l.size)
		if l.elasticThisRun {
			annotations[topology.RolesAnnotation] = fmt.Sprintf("worker=%d", l.max)
			annotations[topology.ElasticAnnotation] = fmt.Sprintf("%d:%d", l.min, l.max)
		}
	}
	framework.CreatePodGroup(b, ns, l.name, l.size, annotations)
	if l.rigid {
		for i := range l.size {
			framework.CreatePods(b, framework.InPool(framework.MemberPod(ns, l.name, int(i), "1").Obj(), ns))
		}
		return
	}
	template := framework.InPool(framework.MemberPod(ns, l.name, 0, "1").Label(topology.RoleLabel, "worker").Obj(), ns)
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: l.name + "-worker"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(l.size),
			ServiceName:         l.name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{topology.GroupLabel: l.name}},
			Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
		},
	}
	if _, err := framework.Client.AppsV1().StatefulSets(ns).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating StatefulSet %s: %v", set.Name, err)
	}
}

// remove ends a job whose work is done: its workers go, and its
// PodGroup stays, as an operator's stays until its job is deleted.
func remove(b *testing.B, ns string, l *live) {
	ctx := context.Background()
	var err error
	if l.rigid {
		err = framework.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=" + l.name})
	} else {
		err = framework.Client.AppsV1().StatefulSets(ns).Delete(ctx, l.name+"-worker", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	}
	if err != nil {
		b.Fatalf("ending job %s: %v", l.name, err)
	}
}

func mean(d map[string]time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return sum / time.Duration(len(d))
}

// summarize writes the shapes' figures side by side, with the elastic
// shape's as ratios of the rigid ones, and the targets.
func summarize(rounds int, results map[shape]result) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Elastic groups: benchmark\n\n")
	fmt.Fprintf(&sb, "Generated by `make bench-elastic` (test/perf/elastic); do not edit by hand. Medians of %d rounds, the shapes interleaved; %d nodes of %d CPUs; muster-controller's --elastic-window %s; utilization and progress sampled every %s, a rigid gang's wait timed from its creation to its last member's bind as a watch sees it.\n", rounds, poolNodes, nodeCPU, elasticWindow, tick)
	fmt.Fprintf(&sb, "Workload: two jobs of 2 to 8 one-CPU workers and 240 worker-seconds each from the start; six rigid gangs of 4 workers and 48 worker-seconds, one every 6 s from 10 s. A job progresses by its bound workers each second while its min is bound.\n")
	fmt.Fprintf(&sb, "The two long jobs are elastic (2:8), rigid at their min (2) or rigid at their max (8): StatefulSets that muster-controller scales in the elastic shape.\n\n")
	fmt.Fprintf(&sb, "| shape | utilization | utilization while a job is below its max | mean rigid wait | longest rigid wait | makespan | mean completion |\n|---|---|---|---|---|---|---|\n")
	for _, s := range []shape{elastic, rigidAtMin, rigidAtMax} {
		r := results[s]
		below := "—"
		if r.belowMax == r.belowMax { // not NaN
			below = fmt.Sprintf("%.0f%%", r.belowMax*100)
		}
		fmt.Fprintf(&sb, "| %s | %.0f%% | %s | %.2f s | %.2f s | %.1f s | %.1f s |\n", s, r.utilization*100, below,
			mean(r.rigidWait).Seconds(), longest(r.rigidWait).Seconds(), r.makespan.Seconds(), mean(r.completion).Seconds())
	}
	e := results[elastic]
	fmt.Fprintf(&sb, "\nElastic against rigid at min and at max:\n\n| ratio | vs rigid-at-min | vs rigid-at-max |\n|---|---|---|\n")
	ratio := func(name string, f func(result) float64) {
		fmt.Fprintf(&sb, "| %s | %.2f | %.2f |\n", name, f(e)/f(results[rigidAtMin]), f(e)/f(results[rigidAtMax]))
	}
	ratio("utilization", func(r result) float64 { return r.utilization })
	ratio("mean rigid wait", func(r result) float64 { return mean(r.rigidWait).Seconds() })
	ratio("makespan", func(r result) float64 { return r.makespan.Seconds() })
	ratio("mean completion", func(r result) float64 { return mean(r.completion).Seconds() })

	noneLonger := true
	var differences []string
	for _, name := range slices.Sorted(maps.Keys(e.rigidWait)) {
		d := e.rigidWait[name] - results[rigidAtMin].rigidWait[name]
		noneLonger = noneLonger && d <= 0
		differences = append(differences, fmt.Sprintf("%s %+.3f s", name, d.Seconds()))
	}
	fmt.Fprintf(&sb, "\nTargets: utilization while a job is below its max ≥ 90%%: %s (%.1f%%). No rigid gang waits longer than with the jobs rigid at min: %s (elastic against rigid at min: %s).\n",
		met(e.belowMax >= 0.9), e.belowMax*100, met(noneLonger), strings.Join(differences, ", "))
	return sb.String()
}

func longest(d map[string]time.Duration) time.Duration {
	var m time.Duration
	for _, v := range d {
		m = max(m, v)
	}
	return m
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
