// Command benchtable turns test/perf's benchstat-compatible results into
// docs/benchmarks.md: for each workload, each profile's median figure and
// its ratio to the default scheduler's from the same run, whether the
// issue's targets are met, and where muster spends its CPU time.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// metric is one table: the benchstat unit it reads, scaled.
type metric struct {
	unit, title string
	// scale multiplies the reported value; the harness reports a
	// histogram's values times 1000 as "ms", even for attempt counts.
	scale float64
	// harnessOnly is set for a figure of the harness's own process, which
	// says nothing of a scheduler run as another process (coscheduling).
	harnessOnly bool
}

var metrics = []metric{
	{"SchedulingThroughput/Average", "Throughput, average (pods/s; higher is better)", 1, false},
	{"SchedulingThroughput/Perc50", "Throughput, median of the one-second samples (pods/s)", 1, false},
	{"scheduler_scheduling_attempt_duration_ms/Perc50", "Duration of attempts that scheduled a pod, p50 (ms)", 1, false},
	{"scheduler_scheduling_attempt_duration_ms/Perc99", "Duration of attempts that scheduled a pod, p99 (ms)", 1, false},
	{"scheduler_pod_scheduling_attempts/Average", "Scheduling attempts per pod (lower is better)", 0.001, false},
	{"gang_admission_ms/Perc50", "Gang admission latency from bind times, p50 (ms): from the gang's minMember-th pod created to its minMember-th pod bound", 1, false},
	{"gang_admission_ms/Perc99", "Gang admission latency from bind times, p99 (ms)", 1, false},
	{"muster_gang_admission_duration_ms/Perc50", "muster's own gang admission histogram, p50 (ms; bucket resolution 2×)", 1, false},
	{"muster_gang_admission_duration_ms/Perc99", "muster's own gang admission histogram, p99 (ms)", 1, false},
	{"preempted_pods", "Pods preempted: deleted by a scheduler's preemption, marked DisruptionTarget, or, where the simulator's watch was dropped, bound and deleted by no one else (count; fewer is better)", 1, false},
	{"gangs", "Gangs in the workload (count)", 1, false},
	{"partial_gangs", "Partially bound gangs: a member finished before the gang's quorum was bound, or the quorum was never bound", 1, false},
	{"spanning_gangs", "Gangs whose bound members span more than one domain of their PodGroup's topology constraint (count)", 1, false},
	{"completion_s", "Completion time (s): first gang pod created to last quorum bound", 1, false},
	{"launch_early", "Launchers bound before all of their workers were Ready (count)", 1, false},
	{"launch_release_ms/Perc50", "Launcher release delay, p50 (ms): last worker Ready to launcher bound, both seen by the workload's informer", 1, false},
	{"launch_release_ms/Perc99", "Launcher release delay, p99 (ms)", 1, false},
	{"launch_release_ms/Max", "Launcher release delay, max (ms)", 1, false},
	{"launcher_wait_ms/Perc50", "Late launcher's wait for room, p50 (ms): its last worker Ready to the launcher, created only then, bound", 1, false},
	{"launcher_wait_ms/Perc99", "Late launcher's wait for room, p99 (ms)", 1, false},
	{"idle_worker_gpu_s", "Worker GPU-seconds idle waiting for a late launcher: each worker's GPUs times its Ready to its launcher bound, or to the workload's end", 1, false},
	{"never_launched", "Jobs whose late launcher was never bound: deadlocked or never completed (count)", 1, false},
	{"job_start_s/Perc50", "Job start with a late launcher, p50 (s): its last worker created to its launcher bound", 1, false},
	{"job_start_s/Perc99", "Job start with a late launcher, p99 (s)", 1, false},
	{"muster_launch_release_delay_ms/Perc99", "muster's own release delay histogram, p99 (ms): the scheduler seeing the last worker Ready to the launcher allowed at Permit", 1, false},
	{"scheduler_framework_extension_point_duration_ms/Perc50", "Bind, the API call that binds a pod, p50 (ms)", 1, false},
	{"scheduler_framework_extension_point_duration_ms/Perc99", "Bind, the API call that binds a pod, p99 (ms)", 1, false},
	{"apiserver_request_duration_ms/Perc50", "Bind at the API server, p50 (ms): its own duration of the pods/binding requests, every profile's, by its histogram, which, unlike the scheduler's Bind histogram (top bucket 204.8 ms), resolves a burst's tail", 1, false},
	{apiBindP99, "Bind at the API server, p99 (ms)", 1, false},
	{"batch_hint_used", "Pods placed on the node an opportunistic batch hinted at (count; coscheduling is a 1.34 scheduler, which has no batching)", 1, false},
	{"batch_attempts", "Pods that reached filtering with opportunistic batching on: with a batch's hint or without (count)", 1, false},
	{"heap_memory_usage/Max", "Heap of the harness's process, max (MB; the schedulers run as processes of their own, coscheduling and upstream's intree and muster, have no figure here)", 1, true},
	{cpuPerBoundPod, "CPU per bound pod (ms; lower is better): the scheduler process's CPU time, user and system, from its /proc, from healthy to the workload's end, over the pods bound meanwhile; processes of their own only", 1, false},
	{"scheduler_cpu_s", "CPU time of the scheduler process over the workload (s)", 1, false},
	{"bound_pods", "Pods bound over the workload, victims included (count)", 1, false},
}

// cpuPerBoundPod is derived, for each run of a scheduler process, from the
// two figures its line reports: scheduler_cpu_s and bound_pods.
const cpuPerBoundPod = "cpu_ms_per_bound_pod"

// processProfiles run as processes of their own, so their CPU is theirs;
// the harness's process also holds the API server.
var processProfiles = map[string]bool{"coscheduling": true, "intree": true, "muster": true}

// profiles are every profile a page may hold, in its columns' order:
// test/perf's workloads run default, coscheduling and muster; upstream's
// run default (in the harness's process), intree (kube-scheduler's own
// process) and muster.
var profiles = []string{"default", "coscheduling", "intree", "muster"}

// line is "Benchmark<Suite>/<Case>-<profile>/<workload>-<procs> 1 v unit v unit ...";
// the suite is test/perf's own workloads (PerfScheduling) or upstream's
// (Upstream...).
var line = regexp.MustCompile(`^Benchmark(PerfScheduling|Upstream[A-Za-z]+)/([A-Za-z0-9]+)-(default|coscheduling|intree|muster)/(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

type key struct{ workload, profile, unit string }

type results struct {
	samples   map[key][]float64
	workloads []string
	// upstream holds the workloads of upstream's own gang benchmarks.
	upstream map[string]bool
}

// fewestVictims is, for each of upstream's preemption workloads, the
// fewest pods any scheduler must preempt, from the workload's own
// comments in workload_preemption/performance-config.yaml: every
// preemptor pod needs a node's worth of CPU, so every lower-priority pod
// on the nodes it needs goes.
var fewestVictims = map[string]float64{
	"GangPreemptionBasic/100Nodes_1PreemptorGang_100Pods_Evicting_1000InitPods":            1000,
	"GangPreemptionBasic/100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods":           1000,
	"GangPreemptionPodGroups/100Nodes_1PreemptorGang_100Pods_Evicting_5LowPriorityGangs":   500,
	"GangPreemptionPodGroups/100Nodes_10PreemptorGangs_10Pods_Evicting_50LowPriorityGangs": 500,
	"GangPreemptionAffinity/100Nodes_1PreemptorGang_100Pods_Evicting_1000InitPods":         1000,
	"GangPreemptionAffinity/100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods":        1000,
}

func main() {
	in := flag.String("in", "_output/bench/results.txt", "benchmark output")
	out := flag.String("out", "docs/benchmarks.md", "Markdown to write")
	command := flag.String("command", "make bench", "the command that produced the results")
	cpuProfile := flag.String("profile", "", "a CPU profile of muster in one workload, to summarise")
	profileWorkload := flag.String("profile-workload", "GangFit10", "the workload the CPU profile is of")
	findings := flag.String("findings", "hack/benchtable/findings.md", "hand-written findings about the run, included as they are")
	title := flag.String("title", "Benchmarks", "the page's title")
	flag.Parse()
	if err := run(*in, *out, *title, *command, *cpuProfile, *profileWorkload, *findings); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(in, out, title, command, cpuProfile, profileWorkload, findings string) error {
	r, err := read(in)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nGenerated by `%s` on %s, with `hack/benchtable`; do not edit by hand.\n\n", title, command, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "Machine: %s.\n\n", machine())
	b.WriteString(intro)
	b.WriteString(upstreamProfilesNote(r))
	writeTargets(&b, r)
	if err := writeFigures(&b, r, out); err != nil {
		return err
	}
	if findings != "" {
		text, err := os.ReadFile(findings)
		if err != nil {
			return fmt.Errorf("reading the findings: %w", err)
		}
		b.Write(text)
		b.WriteString("\n")
	}
	if cpuProfile != "" {
		if err := writeProfile(&b, cpuProfile, profileWorkload); err != nil {
			return err
		}
	}
	b.WriteString("## All figures\n\nEach cell is the median over the rounds; `n` is the number of rounds with a figure for muster. A ratio reads as the figure does: for throughput higher is better, for everything else lower is. `-` means the profile has no such figure (muster's own histograms) or the workload nothing to measure it on.\n\n")
	present := r.presentProfiles()
	others := slices.DeleteFunc(slices.Clone(present), func(p string) bool { return p == "muster" })
	header, rule := "| workload |", "|---|"
	for _, p := range present {
		header, rule = header+" "+p+" |", rule+"---|"
	}
	for _, p := range others {
		header, rule = header+" muster / "+p+" |", rule+"---|"
	}
	header, rule = header+" n |", rule+"---|"
	for _, m := range metrics {
		rows := r.rows(m, present)
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "### %s\n\n%s\n%s\n", m.title, header, rule)
		for _, row := range rows {
			cells := []string{row.workload}
			for _, p := range present {
				cells = append(cells, number(row.values[p]))
			}
			for _, p := range others {
				cells = append(cells, ratio(row.values["muster"], row.values[p]))
			}
			fmt.Fprintf(&b, "| %s | %d |\n", strings.Join(cells, " | "), row.n)
		}
		b.WriteString("\n")
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// upstreamProfilesNote says so when upstream's cases ran without the
// in-tree process (BENCH_UPSTREAM_PROFILES), for the intro names it and
// the targets then hold muster to the in-harness profile instead.
func upstreamProfilesNote(r results) string {
	anyUpstream := false
	for k := range r.samples {
		if k.profile == "intree" {
			return ""
		}
		anyUpstream = anyUpstream || r.upstream[k.workload]
	}
	if !anyUpstream {
		return ""
	}
	return "This run left the `intree` profile out (`BENCH_UPSTREAM_PROFILES`): upstream's cases ran under `default` and `muster` only, and the targets hold muster to `default`.\n\n"
}

// presentProfiles are the profiles with any figure in the results, in
// profiles' order.
func (r results) presentProfiles() []string {
	var present []string
	for _, p := range profiles {
		for k := range r.samples {
			if k.profile == p {
				present = append(present, p)
				break
			}
		}
	}
	return present
}

const intro = "Each workload ran under three schedulers in the upstream harness `k8s.io/kubernetes/test/integration/scheduler_perf` of Kubernetes 1.37.2 (test/perf), against its API server: `default` (kube-scheduler 1.37.2's default plugins, no gang semantics: the ceiling) and `muster` (Gang, HeldRooms, GangPreemption, LaunchOrder and Placement, manifests/scheduler-config.yaml's profile) in the harness's process, and `coscheduling`, scheduler-plugins v0.34.7's kube-scheduler with Coscheduling, as a process of its own (`make bench-tools`). scheduler-plugins has no release for 1.37: v0.34.7 is built on Kubernetes 1.34 (1.34.4 here: the module proxy does not serve 1.34.7's staging modules) and cannot be linked into a 1.37 scheduler. Its histograms are read from its own /metrics when the workload ends; the harness's are of its process, and cover the whole workload too. Every profile runs with the two scoring args muster's profile sets for batching (no default topology spreading; existing pods' preferred affinity terms not weighed), so that the three schedule the same way but for their gang plugins. For each workload the three ran one after another, then the next workload, then the next round, each in its own process.\n\n" +
	"Workloads (test/perf/config/performance-config.yaml):\n\n" +
	"- `SchedulingBasic`: calibration, plain pods on 500 nodes.\n" +
	"- `GangFit<N>`: gangs of N pods that all fit, on 500 nodes.\n" +
	"- `GangFitDevices10`: GangFit10's gangs with each member claiming one of 8 devices per node through Dynamic Resource Allocation (a ResourceClaimTemplate), 96% of the devices; default and muster only.\n" +
	"- `GangSize<N>`: one gang of N pods (10, 100, 1,000, 5,000) on 5,000 nodes: what a gang's size costs each member.\n" +
	"- `GangContention10`: room for half of 200 gangs of 10 at once; their pods arrive interleaved; each pod runs 8s once bound and is then deleted. Throughput here includes the time pods run, so completion time, attempts per pod and partial gangs are its figures.\n" +
	"- `Mixed10`: gangs of 10 while plain pods churn in another namespace.\n" +
	"- `LaunchOrder9`: MPI gangs of 8 workers and a launcher; the workload marks each worker Ready as soon as it is bound.\n" +
	"- `LaunchOrder9Ready2s`: the same, each worker Ready 2s after it is bound, as an sshd that takes a while to start.\n" +
	"- `LaunchOrder9Paced`: LaunchOrder9's gangs arriving 5 a second for 10 s, a rate that leaves this machine headroom.\n" +
	"- `PreemptionBasic`: upstream's default_preemption workload: 1,000 nodes of 4 CPUs, each filled by four low-priority pods of 900m, then 1,000 high-priority pods of 3970m, each needing a node emptied by preemption.\n" +
	"- `GangPreemption50`: the same full nodes, then 20 high-priority gangs of 50 members of 3 CPUs; a member fits once three of its node's four pods are gone, so the fewest victims are 3,000.\n" +
	"- `LateLauncher9`: MPI jobs of 8 GPU workers whose launcher is created only once every worker is Ready (mpi-operator's `WaitForWorkersReady`, played by the simulator with each profile's PodGroup: minMember = workers for Coscheduling, mpi-operator's workers + launcher with the launcher as a late member for muster), 4 jobs every 2 s into 16 nodes of 8 GPUs kept busy by churning CPU-only pods.\n\n" +
	"Upstream's own gang benchmarks (the `upstream` rows): the test cases of k8s.io/kubernetes v1.37.2's `test/integration/scheduler_perf/podgroup/gangscheduling`, `podgroup/tas` (gangs whose PodGroups keep them in one rack, with `TopologyAwareWorkloadScheduling` on too) and `workload_preemption`, read with their templates from the module cache and run unmodified (test/perf/upstream_test.go). Their pods name `scheduling.k8s.io` PodGroups through `spec.schedulingGroup`. Three profiles: `default` is the in-tree one, the harness's scheduler with the case's feature gates (`GenericWorkload` among them), so `GangScheduling`, the PodGroup scheduling cycle and `DefaultPreemption`, in the harness's process; `intree` is the same profile and gates in kube-scheduler 1.37.2's own binary (bin/kube-scheduler, `make tools`), as a process of its own; `muster` is bin/muster-scheduler as it ships, `GenericWorkload` off and muster's profile, as a process of its own against the harness's API server, as Coscheduling runs (the harness has one set of feature gates for its API server and its scheduler, and its API server needs the gate on). `intree` and `muster` each pay for a second process and its informers, and each one's CPU per bound pod is its own: the targets hold muster to `intree`, with `default` as a second reference. The gang workloads run on 5,000 nodes; upstream's preemption workloads top out at 100.\n\n" +
	"Gang admission, partial gangs, completion time, pods preempted and the launcher's release delay come from test/perf/simulator_test.go, which watches the pods and computes them the same way for every profile.\n\n"

type row struct {
	workload string
	values   map[string]float64 // by profile
	n        int
}

func (r results) rows(m metric, present []string) []row {
	var rows []row
	for _, w := range r.workloads {
		values := map[string]float64{}
		found := false
		for _, p := range present {
			values[p] = r.median(w, p, m)
			if m.harnessOnly && processProfiles[p] {
				values[p] = -1
			}
			found = found || values[p] >= 0
		}
		if found {
			rows = append(rows, row{workload: w, values: values, n: len(r.samples[key{w, "muster", m.unit}])})
		}
	}
	return rows
}

func (r results) median(workload, profile string, m metric) float64 {
	v := median(r.samples[key{workload, profile, m.unit}])
	if v < 0 {
		return v
	}
	return v * m.scale
}

func read(in string) (results, error) {
	f, err := os.Open(in)
	if err != nil {
		return results{}, err
	}
	defer f.Close()
	r := results{samples: map[key][]float64{}, upstream: map[string]bool{}}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		m := line.FindStringSubmatch(scanner.Text())
		if m == nil {
			continue
		}
		workload := m[2] + "/" + m[4]
		if !slices.Contains(r.workloads, workload) {
			r.workloads = append(r.workloads, workload)
		}
		r.upstream[workload] = m[1] != "PerfScheduling"
		fields := strings.Fields(m[6])
		byUnit := map[string]float64{}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			byUnit[fields[i+1]] = v
			k := key{workload, m[3], fields[i+1]}
			r.samples[k] = append(r.samples[k], v)
		}
		cpu, measured := byUnit["scheduler_cpu_s"]
		if bound := byUnit["bound_pods"]; measured && bound > 0 {
			k := key{workload, m[3], cpuPerBoundPod}
			r.samples[k] = append(r.samples[k], cpu/bound*1000)
		}
	}
	if err := scanner.Err(); err != nil {
		return results{}, err
	}
	if len(r.workloads) == 0 {
		return results{}, fmt.Errorf("no results in %s", in)
	}
	sort.Strings(r.workloads)
	return r, nil
}

// writeTargets checks the targets against the medians.
func writeTargets(b *strings.Builder, r results) {
	b.WriteString("## Targets\n\n| target | figure | met |\n|---|---|---|\n")
	throughput := metricByUnit("SchedulingThroughput/Average")
	for _, w := range r.workloads {
		if r.upstream[w] || !strings.HasPrefix(w, "GangFitDevices") {
			continue
		}
		// No Coscheduling (a 1.34 kube-scheduler), and no batching for a
		// pod that claims devices, in any profile.
		def, mus := r.median(w, "default", throughput), r.median(w, "muster", throughput)
		target(b, fmt.Sprintf("%s throughput: muster ≥ 0.9 × default", w), ratio(mus, def), def > 0 && mus >= 0.9*def)
		partial := r.median(w, "muster", metricByUnit("partial_gangs"))
		target(b, fmt.Sprintf("%s: no partially bound gang for muster", w), number(partial), partial == 0)
	}
	for _, w := range r.workloads {
		if r.upstream[w] || !strings.HasPrefix(w, "GangFit") || strings.HasPrefix(w, "GangFitDevices") {
			continue
		}
		def, cos, mus := r.median(w, "default", throughput), r.median(w, "coscheduling", throughput), r.median(w, "muster", throughput)
		target(b, fmt.Sprintf("%s throughput: muster ≥ 0.9 × default", w), ratio(mus, def), def > 0 && mus >= 0.9*def)
		target(b, fmt.Sprintf("%s throughput: muster ≥ 1.5 × coscheduling", w), ratio(mus, cos), cos > 0 && mus >= 1.5*cos)
		hints, attempts := metricByUnit("batch_hint_used"), metricByUnit("batch_attempts")
		musH, musA := r.median(w, "muster", hints), r.median(w, "muster", attempts)
		target(b, fmt.Sprintf("%s: opportunistic batching on for muster: pods placed on a batch's hint, of those filtered (default: %s of %s)", w,
			number(r.median(w, "default", hints)), number(r.median(w, "default", attempts))), number(musH)+" of "+number(musA), musH > 0)
	}
	for _, w := range r.workloads {
		if r.upstream[w] || !strings.HasPrefix(w, "GangContention") {
			continue
		}
		partial := metricByUnit("partial_gangs")
		mus, cos := r.median(w, "muster", partial), r.median(w, "coscheduling", partial)
		target(b, fmt.Sprintf("%s: no partially bound gang for muster (coscheduling: %s, default: %s)", w, number(cos), number(r.median(w, "default", partial))), number(mus), mus == 0)
		attempts := metricByUnit("scheduler_pod_scheduling_attempts/Average")
		musA, cosA := r.median(w, "muster", attempts), r.median(w, "coscheduling", attempts)
		target(b, fmt.Sprintf("%s: muster's attempts per pod ≤ coscheduling's (%s)", w, number(cosA)), number(musA), musA >= 0 && cosA >= 0 && musA <= cosA)
	}
	for _, w := range r.workloads {
		if r.upstream[w] || !strings.HasPrefix(w, "PreemptionBasic") {
			continue
		}
		def, mus := r.median(w, "default", throughput), r.median(w, "muster", throughput)
		target(b, fmt.Sprintf("%s throughput: muster ≥ 0.9 × default", w), ratio(mus, def), def > 0 && mus >= 0.9*def)
	}
	for _, w := range r.workloads {
		if r.upstream[w] || !strings.HasPrefix(w, "GangPreemption") {
			continue
		}
		partial, gangs := metricByUnit("partial_gangs"), metricByUnit("gangs")
		p, g := r.median(w, "muster", partial), r.median(w, "muster", gangs)
		target(b, fmt.Sprintf("%s: every gang admitted whole with muster (coscheduling: %s partial)", w, number(r.median(w, "coscheduling", partial))), number(p)+" partial of "+number(g), p == 0 && g > 0)
		// A member fits once 3 of its node's 4 pods are gone.
		fewest := 3 * 50 * g
		v := r.median(w, "muster", metricByUnit("preempted_pods"))
		target(b, fmt.Sprintf("%s: victims ≤ the fewest possible, %s (coscheduling: %s, default: %s)", w, number(fewest),
			number(r.median(w, "coscheduling", metricByUnit("preempted_pods"))), number(r.median(w, "default", metricByUnit("preempted_pods")))), number(v), v >= 0 && g > 0 && v <= fewest)
		admission := metricByUnit("gang_admission_ms/Perc99")
		mus, cos := r.median(w, "muster", admission), r.median(w, "coscheduling", admission)
		target(b, fmt.Sprintf("%s: gang admission p99 ≤ 0.5 × coscheduling's (%s ms)", w, number(cos)), number(mus)+" ms, "+ratio(mus, cos), mus >= 0 && cos > 0 && mus <= 0.5*cos)
		attempts := metricByUnit("scheduler_pod_scheduling_attempts/Average")
		a := r.median(w, "muster", attempts)
		target(b, fmt.Sprintf("%s: attempts per pod ≤ 1.5 (coscheduling: %s)", w, number(r.median(w, "coscheduling", attempts))), number(a), a >= 0 && a <= 1.5)
		duration := metricByUnit("scheduler_scheduling_attempt_duration_ms/Perc99")
		d := r.median(w, "muster", duration)
		target(b, fmt.Sprintf("%s: scheduling-attempt p99 reported (default: %s ms, coscheduling: %s ms)", w, number(r.median(w, "default", duration)), number(r.median(w, "coscheduling", duration))), number(d)+" ms", d >= 0)
	}
	for _, w := range r.workloads {
		if r.upstream[w] || !strings.HasPrefix(w, "LaunchOrder") {
			continue
		}
		writeLaunchOrderTargets(b, r, w)
		early := metricByUnit("launch_early")
		e := r.median(w, "muster", early)
		target(b, fmt.Sprintf("%s: no launcher bound before its workers were Ready (coscheduling: %s, default: %s)", w, number(r.median(w, "coscheduling", early)), number(r.median(w, "default", early))), number(e), e == 0)
	}
	for _, w := range r.workloads {
		if r.upstream[w] || !strings.HasPrefix(w, "LateLauncher") {
			continue
		}
		never := metricByUnit("never_launched")
		n := r.median(w, "muster", never)
		target(b, fmt.Sprintf("%s: no job deadlocked or never completed with muster (coscheduling: %s, default: %s)", w, number(r.median(w, "coscheduling", never)), number(r.median(w, "default", never))), number(n), n == 0)
		wait := metricByUnit("launcher_wait_ms/Perc99")
		v := r.median(w, "muster", wait)
		target(b, fmt.Sprintf("%s: late launcher's wait for room p99 ≤ 100 ms (coscheduling: %s ms, default: %s ms)", w, number(r.median(w, "coscheduling", wait)), number(r.median(w, "default", wait))), number(v)+" ms", v >= 0 && v <= 100)
		idle := metricByUnit("idle_worker_gpu_s")
		mus, best := r.median(w, "muster", idle), min(r.median(w, "coscheduling", idle), r.median(w, "default", idle))
		target(b, fmt.Sprintf("%s: idle worker GPU-seconds ≤ 10%% of the best other profile's (%s)", w, number(best)), ratio(mus, best), mus >= 0 && best > 0 && mus <= 0.1*best)
	}
	writeGangSizeTarget(b, r)
	writeUpstreamTargets(b, r)
	b.WriteString("\n")
}

// releaseOverBindLimit is how far, in ms, the launcher's release delay
// may exceed the same run's Bind p99 at the API server where the workload
// saturates it: a launcher's bind waits behind a burst of binds as any
// pod's does.
const releaseOverBindLimit = 100

// writeLaunchOrderTargets holds launch order to what measures muster and
// not the API server: muster's own release delay (the scheduler seeing
// the last worker Ready to the launcher allowed at Permit) p99 ≤ 1 ms;
// the launcher's release delay (both seen by the workload's informer)
// p99 ≤ 100 ms in the paced workload, and within releaseOverBindLimit of
// the same round's Bind p99 at the API server in the saturated ones.
func writeLaunchOrderTargets(b *strings.Builder, r results, w string) {
	own := r.median(w, "muster", metricByUnit("muster_launch_release_delay_ms/Perc99"))
	target(b, fmt.Sprintf("%s: muster's own release delay p99 ≤ 1 ms, the scheduler seeing the last worker Ready to the launcher allowed", w), number(own)+" ms", own >= 0 && own <= 1)
	release := metricByUnit("launch_release_ms/Perc99")
	v := r.median(w, "muster", release)
	if strings.Contains(w, "Paced") {
		target(b, fmt.Sprintf("%s: launcher release delay p99 ≤ 100 ms after the last worker is Ready", w), number(v)+" ms", v >= 0 && v <= 100)
		return
	}
	releases, binds := r.samples[key{w, "muster", release.unit}], r.samples[key{w, "muster", metricByUnit(apiBindP99).unit}]
	if len(binds) == 0 || len(releases) != len(binds) {
		target(b, fmt.Sprintf("%s: launcher release delay p99 ≤ the same round's Bind p99 at the API server + %d ms", w, releaseOverBindLimit),
			number(v)+" ms; no Bind p99 at the API server in every round", false)
		return
	}
	var margins []float64
	var each []string
	for i := range releases {
		margins = append(margins, releases[i]-binds[i])
		each = append(each, fmt.Sprintf("%s − %s", number(releases[i]), number(binds[i])))
	}
	margin := median(margins)
	target(b, fmt.Sprintf("%s: launcher release delay p99 ≤ the same round's Bind p99 at the API server + %d ms", w, releaseOverBindLimit),
		fmt.Sprintf("%+.1f ms (median; rounds %s ms)", margin, strings.Join(each, ", ")), margin <= releaseOverBindLimit)
}

// apiBindP99 is the API server's own duration of the requests that bind
// pods, p99: the Bind a launcher's release waits behind.
const apiBindP99 = "apiserver_request_duration_ms/Perc99"

// msPerMember is what a gang's completion time, in seconds, costs each of
// its members, in milliseconds.
func msPerMember(completionSeconds, members float64) float64 {
	return completionSeconds / members * 1000
}

// writeGangSizeTarget checks that a gang's size costs each of its members
// no more: the time per member from the first pod created to the last of
// the quorum bound, for one gang of 5,000 against one of 10.
func writeGangSizeTarget(b *strings.Builder, r results) {
	completion := metricByUnit("completion_s")
	perMember := func(profile string, size float64) float64 {
		v := r.median(fmt.Sprintf("GangSize%.0f/5000Nodes", size), profile, completion)
		if v < 0 {
			return v
		}
		return msPerMember(v, size)
	}
	small, large := perMember("muster", 10), perMember("muster", 5000)
	if small < 0 || large < 0 {
		return
	}
	target(b, fmt.Sprintf("GangSize: muster's time per member in a gang of 5,000 ≤ 1.2 × in a gang of 10 (%s ms; default, no gang: %s and %s ms)",
		number(small), number(perMember("default", 10)), number(perMember("default", 5000))),
		number(large)+" ms, "+ratio(large, small), large <= 1.2*small)
}

// upstreamThroughputFloor is, where it is not 1.0, the least ratio of
// muster's throughput to the in-tree profile's that issue 37 sets.
var upstreamThroughputFloor = map[string]float64{
	"GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup": 1.4,
}

// writeUpstreamTargets checks the targets on upstream's own gang
// benchmarks, where muster runs against the in-tree profile: as
// kube-scheduler's own process (intree), where the results have it, a
// second process as muster is; otherwise in the harness's process
// (default). Each ratio is given with every round's, round i of each
// profile having run next to the other's.
func writeUpstreamTargets(b *strings.Builder, r results) {
	throughput, admission := metricByUnit("SchedulingThroughput/Average"), metricByUnit("gang_admission_ms/Perc99")
	partial, gangs, victims := metricByUnit("partial_gangs"), metricByUnit("gangs"), metricByUnit("preempted_pods")
	spanning, cpu := metricByUnit("spanning_gangs"), metricByUnit(cpuPerBoundPod)
	for _, w := range r.workloads {
		if !r.upstream[w] {
			continue
		}
		base, baseName := "default", "in-tree"
		if r.median(w, "intree", gangs) >= 0 {
			base, baseName = "intree", "the in-tree process"
		}
		p, g := r.median(w, "muster", partial), r.median(w, "muster", gangs)
		target(b, fmt.Sprintf("upstream %s: no partially bound gang with muster (%s: %s)", w, baseName, number(r.median(w, base, partial))), number(p)+" of "+number(g), p == 0 && g > 0)
		if span := r.median(w, "muster", spanning); span >= 0 {
			target(b, fmt.Sprintf("upstream %s: no gang spans domains with muster (%s: %s)", w, baseName, number(r.median(w, base, spanning))), number(span)+" of "+number(g), span == 0)
		}
		if fewest, ok := fewestVictims[w]; ok {
			mus, other := r.median(w, "muster", victims), r.median(w, base, victims)
			target(b, fmt.Sprintf("upstream %s: victims ≤ %s's (%s; the fewest possible %s)", w, baseName, number(other), number(fewest)), number(mus), mus >= 0 && other >= 0 && mus <= other)
		}
		// The single-gang preemption workloads bind within the harness's
		// one-second samples: they have no throughput.
		if other, mus := r.median(w, base, throughput), r.median(w, "muster", throughput); other > 0 || mus > 0 {
			floor := upstreamThroughputFloor[w]
			if floor == 0 {
				floor = 1
			}
			target(b, fmt.Sprintf("upstream %s throughput: muster ≥ %.1f × %s%s", w, floor, baseName, inProcessReference(r, w, base, throughput)),
				ratio(mus, other)+roundsOf(r, w, base, throughput), other > 0 && mus >= floor*other)
		}
		otherA, musA := r.median(w, base, admission), r.median(w, "muster", admission)
		target(b, fmt.Sprintf("upstream %s: gang admission p99 ≤ 1.0 × %s's (%s ms)%s", w, baseName, number(otherA), inProcessReference(r, w, base, admission)),
			number(musA)+" ms, "+ratio(musA, otherA)+roundsOf(r, w, base, admission), musA >= 0 && otherA > 0 && musA <= otherA)
		if otherC, musC := r.median(w, "intree", cpu), r.median(w, "muster", cpu); otherC > 0 && musC >= 0 {
			target(b, fmt.Sprintf("upstream %s: CPU per bound pod ≤ 1.0 × the in-tree process's (%s ms)", w, number(otherC)),
				number(musC)+" ms, "+ratio(musC, otherC)+roundsOf(r, w, "intree", cpu), musC <= otherC)
		}
	}
}

// inProcessReference gives, where muster is held to the in-tree process,
// its ratio to the in-tree profile in the harness's process too: today's
// second reference.
func inProcessReference(r results, workload, base string, m metric) string {
	if base == "default" {
		return ""
	}
	return fmt.Sprintf(" (in the harness's process: %s)", ratio(r.median(workload, "muster", m), r.median(workload, "default", m)))
}

// roundsOf lists muster's ratio to base in each round: round i of each
// profile ran next to the other's. It is empty with a single round, or
// when a profile lacks a round and the rounds cannot be paired.
func roundsOf(r results, workload, base string, m metric) string {
	values, bases := r.samples[key{workload, "muster", m.unit}], r.samples[key{workload, base, m.unit}]
	if len(values) < 2 || len(values) != len(bases) {
		return ""
	}
	var ratios []string
	for i := range values {
		ratios = append(ratios, ratio(values[i], bases[i]))
	}
	return "; rounds " + strings.Join(ratios, ", ")
}

func target(b *strings.Builder, what, figure string, met bool) {
	verdict := "**missed**"
	if met {
		verdict = "yes"
	}
	fmt.Fprintf(b, "| %s | %s | %s |\n", what, figure, verdict)
}

func metricByUnit(unit string) metric {
	for _, m := range metrics {
		if m.unit == unit {
			return m
		}
	}
	panic("benchtable: no metric " + unit)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func number(v float64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func ratio(v, base float64) string {
	if v < 0 || base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v/base)
}

// machine describes where the benchmarks ran.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if name, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	memory := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		fields := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
		if len(fields) >= 2 {
			if kb, err := strconv.ParseFloat(fields[1], 64); err == nil {
				memory = fmt.Sprintf(", %.0f GiB", kb/1024/1024)
			}
		}
	}
	goVersion, _ := exec.Command("go", "env", "GOVERSION").Output()
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s", runtime.NumCPU(), model, memory, runtime.GOOS, runtime.GOARCH, strings.TrimSpace(string(goVersion)))
}
