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
// twice:
//   - `default`, as upstream wrote it: the harness's scheduler with
//     kube-scheduler's default plugins and GenericWorkload on, so
//     GangScheduling, the PodGroup scheduling cycle and DefaultPreemption;
//   - `muster`: muster-scheduler, bin/muster-scheduler as it ships, with
//     GenericWorkload off (docs/architecture.md says why) and muster's
//     profile (config/muster.yaml), as a process of its own, as Coscheduling
//     runs. The harness runs its API server and its scheduler in one
//     process with one set of feature gates, and its API server needs the
//     gate; its own scheduler runs config/elsewhere.yaml meanwhile.
//
// Only the case's name, which gets the profile, and the harness's scheduler
// configuration for muster's case are added; the ops, parameters, labels
// and templates are upstream's.

// upstreamPerfDir is where the module cache holds upstream's harness.
var upstreamPerfDir = flag.String("upstream-perf-dir", "", "k8s.io/kubernetes's test/integration/scheduler_perf in the module cache (hack/bench.sh passes it)")

// musterConfig is muster's profile under the harness's scheduler name, and
// elsewhereConfig the harness's own scheduler's meanwhile, by absolute path:
// the upstream cases run in upstream's directory.
var (
	musterConfig    = inPerfDir("config/muster.yaml")
	elsewhereConfig = inPerfDir("config/elsewhere.yaml")
)

// musterScheduler is muster-scheduler's binary, which `make build` builds
// into bin/.
const musterScheduler = "muster-scheduler"

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
	cases, err := withMusterProfile(filepath.Join(upstream, "performance-config.yaml"), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Chdir(upstream)
	perf.RunBenchmarkPerfScheduling(b, cases, "muster", nil, perf.WithPrepareFn(prepareUpstream))
}

// prepareUpstream starts muster-scheduler for muster's cases, and the
// simulator, which measures gangs alike for both profiles and reads
// scheduler-plugins' PodGroups too.
func prepareUpstream(tCtx ktesting.TContext) error {
	if err := installPodGroupCRD(tCtx, tCtx.RESTConfig()); err != nil {
		return err
	}
	if profileOf(tCtx.TB().Name()) == "muster" {
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

// withMusterProfile writes, into dir, upstream's test cases each under two
// names, <Case>-default as it is and <Case>-muster with the harness's
// scheduler elsewhere, and returns the file's path.
func withMusterProfile(path, dir string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading upstream's test cases: %w", err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return "", fmt.Errorf("decoding %s: %w", path, err)
	}
	var both []map[string]any
	for _, c := range cases {
		if _, set := c["schedulerConfigPath"]; set {
			return "", fmt.Errorf("%s: test case %v has its own schedulerConfigPath, which one profile cannot replace", path, c["name"])
		}
		asIs, withMuster := maps.Clone(c), maps.Clone(c)
		asIs["name"] = fmt.Sprintf("%v-default", c["name"])
		withMuster["name"] = fmt.Sprintf("%v-muster", c["name"])
		withMuster["schedulerConfigPath"] = elsewhereConfig
		both = append(both, asIs, withMuster)
	}
	out, err := yaml.Marshal(both)
	if err != nil {
		return "", err
	}
	written := filepath.Join(dir, "performance-config.yaml")
	return written, os.WriteFile(written, out, 0o600)
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
