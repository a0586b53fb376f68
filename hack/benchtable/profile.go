package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// profileParts are where the benchmark process spends CPU. A sample counts
// toward a part when any frame of its stack is in it, so parts overlap:
// muster's plugins run inside the scheduler's cycles.
var profileParts = []struct{ name, prefix string }{
	{"muster, all (`github.com/muster-dev/muster/pkg/...`)", musterPrefix},
	{"muster Gang plugin", "github.com/muster-dev/muster/pkg/plugins/gang."},
	{"muster GangPreemption plugin", "github.com/muster-dev/muster/pkg/plugins/gangpreemption."},
	{"muster HeldRooms plugin", "github.com/muster-dev/muster/pkg/plugins/heldrooms."},
	{"muster LaunchOrder plugin", "github.com/muster-dev/muster/pkg/plugins/launchorder."},
	{"muster's PodGroup and member index (`plugins/internal/group`, `plugins/internal/groupstate`)", "github.com/muster-dev/muster/pkg/plugins/internal/group"},
	{"kube-scheduler, all (`k8s.io/kubernetes/pkg/scheduler`)", schedulerPrefix},
	{"kube-scheduler scheduling cycle", "k8s.io/kubernetes/pkg/scheduler.(*Scheduler).schedulingCycle"},
	{"kube-scheduler binding cycle", "k8s.io/kubernetes/pkg/scheduler.(*Scheduler).bindingCycle"},
	{"kube-apiserver, in the same process (`k8s.io/apiserver`)", "k8s.io/apiserver/"},
	{"client-go: the informers and clients of the scheduler, the harness and the simulator", "k8s.io/client-go/"},
	{"garbage collection", "runtime.gcBgMarkWorker"},
}

const (
	// musterPrefix is muster's own code, not the benchmark's.
	musterPrefix    = "github.com/muster-dev/muster/pkg/"
	schedulerPrefix = "k8s.io/kubernetes/pkg/scheduler"
)

// writeProfile summarises a CPU profile of the whole benchmark process:
// the harness runs kube-apiserver, the scheduler and the workload's clients
// in one process (etcd is its own).
func writeProfile(b *strings.Builder, path, workload string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening the CPU profile: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return fmt.Errorf("parsing the CPU profile %s: %w", path, err)
	}
	valueIndex := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			valueIndex = i
		}
	}
	if valueIndex < 0 {
		return fmt.Errorf("%s has no cpu samples", path)
	}

	var total int64
	parts := make([]int64, len(profileParts))
	musterFunctions := map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[valueIndex]
		total += v
		functions := stackFunctions(s)
		for i, part := range profileParts {
			for fn := range functions {
				if strings.HasPrefix(fn, part.prefix) {
					parts[i] += v
					break
				}
			}
		}
		for fn := range functions {
			if strings.HasPrefix(fn, musterPrefix) {
				musterFunctions[fn] += v
			}
		}
	}
	if total == 0 {
		return fmt.Errorf("%s has no cpu samples", path)
	}
	share := func(v int64) string { return fmt.Sprintf("%.1f%%", 100*float64(v)/float64(total)) }

	fmt.Fprintf(b, "## Where muster spends CPU in %s\n\n", workload)
	fmt.Fprintf(b, "`go test -cpuprofile` of one run of `%s-muster` (the whole benchmark process, %s of CPU; kube-apiserver and the workload's clients run in it too, etcd does not). A sample counts toward a part when any frame of its stack is in it, so the parts overlap. Reproduce with `go tool pprof -top -focus=muster-dev/muster/pkg _output/bench/cpu-muster.pprof`.\n\n", workload, time.Duration(total).Round(time.Millisecond))
	b.WriteString("| part | share of CPU |\n|---|---|\n")
	for i, part := range profileParts {
		fmt.Fprintf(b, "| %s | %s |\n", part.name, share(parts[i]))
	}
	var musterCPU, schedulerCPU int64
	for i, part := range profileParts {
		switch part.prefix {
		case musterPrefix:
			musterCPU = parts[i]
		case schedulerPrefix:
			schedulerCPU = parts[i]
		}
	}
	if schedulerCPU > 0 {
		fmt.Fprintf(b, "\nmuster's code, its plugins and their informer handlers, takes %.1f%% as much CPU as kube-scheduler's own packages.\n", 100*float64(musterCPU)/float64(schedulerCPU))
	}
	b.WriteString("\nmuster's functions by inclusive CPU, the top 8:\n\n| function | share of CPU |\n|---|---|\n")
	names := make([]string, 0, len(musterFunctions))
	for fn := range musterFunctions {
		names = append(names, fn)
	}
	sort.Slice(names, func(i, j int) bool {
		if musterFunctions[names[i]] != musterFunctions[names[j]] {
			return musterFunctions[names[i]] > musterFunctions[names[j]]
		}
		return names[i] < names[j]
	})
	for _, fn := range names[:min(8, len(names))] {
		fmt.Fprintf(b, "| `%s` | %s |\n", strings.TrimPrefix(fn, musterPrefix), share(musterFunctions[fn]))
	}
	b.WriteString("\n")
	return nil
}

func stackFunctions(s *profile.Sample) map[string]bool {
	functions := map[string]bool{}
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil {
				functions[l.Function.Name] = true
			}
		}
	}
	return functions
}
