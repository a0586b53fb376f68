//go:build bench

package perf

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/dynamic-resource-allocation/structured"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
)

// Upstream's own gang benchmarks, run unmodified: the test cases of
// k8s.io/kubernetes's scheduler_perf/podgroup/gangscheduling,
// podgroup/tas, workload_preemption and dra/workloadresourceclaims are
// read from the module cache, with their templates,
// which the harness resolves against the working directory. Each runs
// three times:
//   - `default`, as upstream wrote it: the harness's scheduler with
//     kube-scheduler's default plugins and the case's feature gates
//     (GenericWorkload among them), so GangScheduling, the PodGroup
//     scheduling cycle and DefaultPreemption, in the harness's process;
//   - `intree`: the same profile and gates in kube-scheduler 1.37.2's own
//     binary (bin/kube-scheduler, `make tools`), as a process of its own,
//     exactly as muster-scheduler runs: both then pay for a second
//     process and its informers, and each one's CPU is its own;
//   - `muster`: muster-scheduler, bin/muster-scheduler as it ships, with
//     GenericWorkload off (docs/architecture.md says why) and muster's
//     profile (config/muster.yaml), as a process of its own, as Coscheduling
//     runs. The harness runs its API server and its scheduler in one
//     process with one set of feature gates, and its API server needs the
//     gate; its own scheduler runs config/elsewhere.yaml meanwhile.
//
// Only the case's name, which gets the profile, and the harness's scheduler
// configuration for the process profiles are added; the ops, parameters,
// labels and templates are upstream's.

// upstreamPerfDir is where the module cache holds upstream's harness.
var upstreamPerfDir = flag.String("upstream-perf-dir", "", "k8s.io/kubernetes's test/integration/scheduler_perf in the module cache (hack/bench.sh passes it)")

// musterConfig is muster's profile under the harness's scheduler name,
// intreeConfig kube-scheduler's defaults under it, and elsewhereConfig the
// harness's own scheduler's meanwhile, by absolute path: the upstream cases
// run in upstream's directory.
var (
	musterConfig    = inPerfDir("config/muster.yaml")
	intreeConfig    = inPerfDir("config/intree.yaml")
	elsewhereConfig = inPerfDir("config/elsewhere.yaml")
)

// musterScheduler is muster-scheduler's binary, which `make build` builds
// into bin/; intreeScheduler is kube-scheduler's, which `make tools` builds
// there from the module graph's k8s.io/kubernetes.
const (
	musterScheduler = "muster-scheduler"
	intreeScheduler = "kube-scheduler"
)

func BenchmarkUpstreamGangScheduling(b *testing.B) {
	runUpstream(b, "podgroup/gangscheduling")
}

func BenchmarkUpstreamWorkloadPreemption(b *testing.B) {
	runUpstream(b, "workload_preemption")
}

// BenchmarkUpstreamTopology runs upstream's topology-aware gang benchmarks:
// PodGroups whose schedulingConstraints keep each gang in one rack.
func BenchmarkUpstreamTopology(b *testing.B) {
	runUpstream(b, "podgroup/tas")
}

// BenchmarkUpstreamWorkloadResourceClaims runs upstream's benchmarks of
// claims a PodGroup shares (DRAWorkloadResourceClaims). As upstream's own
// benchmark does, the harness's scheduler allocates devices with the
// incubating allocator only; muster-scheduler, a process of its own, picks
// its allocator as it ships, and reserves a PodGroup's claims for the
// PodGroup, as the harness's scheduler does (podgroupdra, docs/dra.md).
func BenchmarkUpstreamWorkloadResourceClaims(b *testing.B) {
	structured.EnableAllocators("incubating")
	defer structured.EnableAllocators()
	runUpstream(b, "dra/workloadresourceclaims")
}

func runUpstream(b *testing.B, dir string) {
	if *upstreamPerfDir == "" {
		b.Fatal("-upstream-perf-dir is not set: run the upstream benchmarks through hack/bench.sh")
	}
	upstream := filepath.Join(*upstreamPerfDir, dir)
	cases, gates, err := withProcessProfiles(filepath.Join(upstream, "performance-config.yaml"), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Chdir(upstream)
	perf.RunBenchmarkPerfScheduling(b, cases, "muster", nil, perf.WithPrepareFn(func(tCtx ktesting.TContext) error {
		return prepareUpstream(tCtx, gates)
	}))
}

// prepareUpstream starts muster-scheduler for muster's cases and
// kube-scheduler, with the case's feature gates (by case name), for the
// in-tree process's; then the simulator, which measures gangs alike for
// every profile and reads scheduler-plugins' PodGroups too.
func prepareUpstream(tCtx ktesting.TContext, caseGates map[string]string) error {
	if err := installPodGroupCRD(tCtx, tCtx.RESTConfig()); err != nil {
		return err
	}
	switch profileOf(tCtx.TB().Name()) {
	case "muster":
		gates, err := manifests.SchedulerFeatureGates()
		if err != nil {
			return err
		}
		endpoint, err := startScheduler(tCtx, musterScheduler, musterConfig, []string{"--feature-gates=" + gates}, nil)
		if err != nil {
			return err
		}
		if *musterCPUProfile != "" {
			profileScheduler(tCtx, endpoint, *musterCPUProfile)
		}
	case "intree":
		var args []string
		if gates := caseGates[caseOf(tCtx.TB().Name())]; gates != "" {
			args = append(args, "--feature-gates="+gates)
		}
		if _, err := startScheduler(tCtx, intreeScheduler, intreeConfig, args, nil); err != nil {
			return err
		}
	}
	return startSimulator(tCtx)
}

// musterCPUProfile is where to write muster-scheduler's CPU profile of a
// workload's first profileSeconds, which cover scheduling it.
var musterCPUProfile = flag.String("muster-cpu-profile", "", "write muster-scheduler's CPU profile of an upstream workload to this file")

const profileSeconds = 60

// profileScheduler writes a scheduler's CPU profile, from its
// /debug/pprof, of the next profileSeconds, to path.
func profileScheduler(tCtx ktesting.TContext, endpoint, path string) {
	done := make(chan struct{})
	tCtx.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		client := *loopbackClient
		client.Timeout = 2 * profileSeconds * time.Second
		resp, err := client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", endpoint, profileSeconds))
		if err != nil {
			tCtx.Errorf("profiling muster-scheduler: %v", err)
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET /debug/pprof/profile: %s", resp.Status)
		}
		if err == nil {
			err = os.WriteFile(path, data, 0o600)
		}
		if err != nil {
			tCtx.Errorf("profiling muster-scheduler: %v", err)
		}
	}()
}

// withProcessProfiles writes, into dir, upstream's test cases each under
// three names: <Case>-default as it is, and <Case>-intree and <Case>-muster
// with the harness's scheduler elsewhere. It returns the file's path and,
// by case, the case's feature gates as kube-scheduler's --feature-gates
// takes them, for the in-tree process.
func withProcessProfiles(path, dir string) (string, map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("reading upstream's test cases: %w", err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return "", nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	var all []map[string]any
	gates := map[string]string{}
	for _, c := range cases {
		if _, set := c["schedulerConfigPath"]; set {
			return "", nil, fmt.Errorf("%s: test case %v has its own schedulerConfigPath, which one profile cannot replace", path, c["name"])
		}
		name := fmt.Sprint(c["name"])
		if gates[name], err = featureGatesFlag(c["featureGates"]); err != nil {
			return "", nil, fmt.Errorf("%s: test case %s: %w", path, name, err)
		}
		asIs := maps.Clone(c)
		asIs["name"] = name + "-default"
		all = append(all, asIs)
		for _, profile := range []string{"intree", "muster"} {
			elsewhere := maps.Clone(c)
			elsewhere["name"] = name + "-" + profile
			elsewhere["schedulerConfigPath"] = elsewhereConfig
			all = append(all, elsewhere)
		}
	}
	out, err := yaml.Marshal(all)
	if err != nil {
		return "", nil, err
	}
	written := filepath.Join(dir, "performance-config.yaml")
	return written, gates, os.WriteFile(written, out, 0o600)
}

// inPerfDir makes a path of test/perf absolute, from the directory the
// benchmark starts in, which is test/perf.
func inPerfDir(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("finding test/perf: %v", err))
	}
	return filepath.Join(wd, path)
}
