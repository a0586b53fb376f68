//go:build bench

// Package preemption benchmarks muster's gang-aware preemption against
// kube-scheduler's default preemption, side by side in one run on the real
// control plane: one muster-scheduler with two profiles, muster's
// (GangPreemption) and one where DefaultPreemption preempts instead. High-
// priority gangs arrive into a cluster full of low-priority gangs. `make
// bench-preemption` runs it and writes docs/preemption-benchmark.md; the
// build tag keeps it out of `make test`.
package preemption

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

const (
	poolNodes = 4
	nodeCPU   = 4
	// lowGangs of gangSize one-CPU members fill the pool; highGangs of
	// the same size arrive one every arrival apart.
	lowGangs  = 4
	highGangs = 2
	gangSize  = 4
	arrival   = 2 * time.Second
	rounds    = 3
	tick      = 100 * time.Millisecond
	// settle is how long after the last high gang's admission the victims
	// are counted: a gang left partly running stays so.
	settle = 3 * time.Second
	// giveUp bounds a high gang's wait.
	giveUp = 90 * time.Second
	// defaultProfile is the profile in which DefaultPreemption preempts.
	defaultProfile = "muster-scheduler-default-preemption"
)

func TestMain(m *testing.M) {
	config, err := twoProfiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	framework.RunMain(m, func(opts *localcluster.Options) { opts.SchedulerConfig = config })
}

// twoProfiles is muster-scheduler's configuration with a second profile,
// the same but for its PostFilter: DefaultPreemption instead of
// GangPreemption and Gang.
func twoProfiles() ([]byte, error) {
	config := map[string]any{}
	if err := yaml.Unmarshal(manifests.SchedulerConfig, &config); err != nil {
		return nil, err
	}
	profiles, _ := config["profiles"].([]any)
	if len(profiles) != 1 {
		return nil, fmt.Errorf("the scheduler configuration has %d profiles; want 1", len(profiles))
	}
	data, err := yaml.Marshal(profiles[0])
	if err != nil {
		return nil, err
	}
	baseline := map[string]any{}
	if err := yaml.Unmarshal(data, &baseline); err != nil {
		return nil, err
	}
	baseline["schedulerName"] = defaultProfile
	plugins, _ := baseline["plugins"].(map[string]any)
	plugins["postFilter"] = map[string]any{
		"enabled":  []any{map[string]any{"name": "DefaultPreemption"}},
		"disabled": []any{map[string]any{"name": "GangPreemption"}, map[string]any{"name": "Gang"}},
	}
	config["profiles"] = append(profiles, baseline)
	return yaml.Marshal(config)
}

// result is what one run measured.
type result struct {
	// broken counts low gangs left with some but not all members running.
	broken int
	// evicted counts low-priority pods gone; needed is the fewest that
	// could have made room for the high gangs admitted.
	evicted, needed, admitted int
	// wait is each high gang's time from creation to all members bound.
	wait []time.Duration
}

func BenchmarkPreemption(b *testing.B) {
	results := map[string][]result{}
	for round := 1; round <= rounds; round++ {
		for _, profile := range []string{localcluster.SchedulerName, defaultProfile} {
			b.Run(fmt.Sprintf("%s/round-%d", profile, round), func(b *testing.B) {
				r := run(b, profile)
				results[profile] = append(results[profile], r)
				b.ReportMetric(float64(r.broken), "broken-gangs")
				b.ReportMetric(float64(r.evicted), "evicted-pods")
				b.ReportMetric(meanSeconds(r.wait), "admission-s")
			})
		}
	}
	if b.Failed() {
		return
	}
	summary := summarize(results)
	b.Log("\n" + summary)
	if doc := os.Getenv("BENCH_PREEMPTION_DOC"); doc != "" {
		if err := os.WriteFile(doc, []byte(summary), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func run(b *testing.B, profile string) result {
	ns := framework.NewNamespace(b)
	framework.NodePool(b, ns, poolNodes, fmt.Sprint(nodeCPU))
	low, high := priorityClass(b, ns, 10), priorityClass(b, ns, 1000)
	for i := range lowGangs {
		createGang(b, ns, fmt.Sprintf("low-%d", i), profile, low)
	}
	waitFor(b, ns, "the low gangs bound", func(bound map[string]int) bool {
		for i := range lowGangs {
			if bound[fmt.Sprintf("low-%d", i)] != gangSize {
				return false
			}
		}
		return true
	})

	created := map[string]time.Time{}
	admitted := map[string]time.Time{}
	start := time.Now()
	for {
		now := time.Now()
		for i := range highGangs {
			name := fmt.Sprintf("high-%d", i)
			if _, ok := created[name]; !ok && now.Sub(start) >= time.Duration(i)*arrival {
				createGang(b, ns, name, profile, high)
				created[name] = now
			}
		}
		bound := boundByGroup(b, ns)
		for name := range created {
			if _, ok := admitted[name]; !ok && bound[name] == gangSize {
				admitted[name] = now
			}
		}
		if len(admitted) == highGangs || now.Sub(start) > giveUp {
			break
		}
		time.Sleep(tick)
	}
	time.Sleep(settle)
	bound := boundByGroup(b, ns)
	r := result{admitted: len(admitted)}
	for i := range lowGangs {
		n := bound[fmt.Sprintf("low-%d", i)]
		r.evicted += gangSize - n
		if n > 0 && n < gangSize {
			r.broken++
		}
	}
	// Each admitted high gang needs gangSize CPUs: as many one-CPU pods.
	r.needed = r.admitted * gangSize
	for name, at := range admitted {
		r.wait = append(r.wait, at.Sub(created[name]))
	}
	return r
}

func priorityClass(b *testing.B, namespace string, value int32) string {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", namespace, value)}, Value: value}
	if _, err := framework.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating PriorityClass %s: %v", pc.Name, err)
	}
	b.Cleanup(func() {
		_ = framework.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})
	return pc.Name
}

// createGang creates a gang of gangSize one-CPU pods for the profile.
func createGang(b *testing.B, namespace, group, profile, class string) {
	framework.CreatePodGroup(b, namespace, group, gangSize, nil)
	for i := range gangSize {
		pod := framework.InPool(framework.MemberPod(namespace, group, i, "1").SchedulerName(profile).Obj(), namespace)
		pod.Spec.PriorityClassName = class
		framework.CreatePods(b, pod)
	}
}

// boundByGroup counts each group's bound, active pods.
func boundByGroup(b *testing.B, namespace string) map[string]int {
	pods, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	bound := map[string]int{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if framework.IsBound(pod) && topology.IsActiveMember(pod) && pod.Status.Phase != corev1.PodFailed {
			bound[pod.Labels[topology.GroupLabel]]++
		}
	}
	return bound
}

func waitFor(b *testing.B, namespace, what string, done func(map[string]int) bool) {
	deadline := time.Now().Add(giveUp)
	for !done(boundByGroup(b, namespace)) {
		if time.Now().After(deadline) {
			b.Fatalf("waiting for %s: %v", what, boundByGroup(b, namespace))
		}
		time.Sleep(tick)
	}
}

func meanSeconds(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return (sum / time.Duration(len(d))).Seconds()
}

func median(values []float64) float64 {
	slices.Sort(values)
	return values[len(values)/2]
}

// summarize writes the medians of each profile's rounds side by side, and
// the partly running victim gangs of every round: one round that breaks a
// gang is a failure the median would hide.
func summarize(results map[string][]result) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Gang-aware preemption: benchmark\n\n")
	fmt.Fprintf(&sb, "Generated by `make bench-preemption` (test/perf/preemption); do not edit by hand. Medians of %d rounds (victim gangs left partly running: every round, in order), the profiles interleaved, in one muster-scheduler on the real control plane.\n", rounds)
	fmt.Fprintf(&sb, "Workload: %d nodes of %d CPUs full of %d low-priority gangs of %d one-CPU pods; %d high-priority gangs of %d one-CPU pods arrive %s apart. Counted %s after the last high gang is admitted (or %s after the first arrived).\n\n",
		poolNodes, nodeCPU, lowGangs, gangSize, highGangs, gangSize, arrival, settle, giveUp)
	fmt.Fprintf(&sb, "| preemption | high gangs admitted | victim gangs left partly running | low pods evicted | fewest that would do | time from arrival to admission |\n|---|---|---|---|---|---|\n")
	row := func(label, profile string) {
		runs := results[profile]
		pick := func(f func(result) float64) float64 {
			var values []float64
			for _, r := range runs {
				values = append(values, f(r))
			}
			return median(values)
		}
		var broken []string
		for _, r := range runs {
			broken = append(broken, strconv.Itoa(r.broken))
		}
		fmt.Fprintf(&sb, "| %s | %.0f of %d | %s | %.0f | %.0f | %.1f s |\n", label,
			pick(func(r result) float64 { return float64(r.admitted) }), highGangs,
			strings.Join(broken, ", "),
			pick(func(r result) float64 { return float64(r.evicted) }),
			pick(func(r result) float64 { return float64(r.needed) }),
			pick(func(r result) float64 { return meanSeconds(r.wait) }))
	}
	row("muster's (Gang)", localcluster.SchedulerName)
	row("kube-scheduler's DefaultPreemption", defaultProfile)
	fmt.Fprintf(&sb, "\nTarget: no victim gang left partly running with muster's preemption.\n")
	return sb.String()
}
