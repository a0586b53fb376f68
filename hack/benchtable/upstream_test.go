package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamTargetsHoldMusterToTheInTreeProcess: with the in-tree
// profile run as a process too, each upstream target compares muster with
// it, round by round, and CPU per bound pod is derived from each run's own
// line; the in-process profile stays as a second reference.
func TestUpstreamTargetsHoldMusterToTheInTreeProcess(t *testing.T) {
	const workload = "GangPreemptionBasic/100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods"
	suite, name, _ := strings.Cut(workload, "/")
	// Per profile: throughput, admission p99 (ms), CPU seconds, pods bound.
	figures := map[string][4]float64{
		"default": {40, 1000, 0, 0}, // in the harness's process: no CPU of its own
		"intree":  {20, 2000, 2.2, 1100},
		"muster":  {22, 1800, 3.3, 1100},
	}
	var lines []string
	for round := range 5 {
		for _, profile := range []string{"default", "intree", "muster"} {
			f := figures[profile]
			line := fmt.Sprintf("BenchmarkUpstreamWorkloadPreemption/%s-%s/%s-2 1 %g SchedulingThroughput/Average %g gang_admission_ms/Perc99 10 gangs 0 partial_gangs 1000 preempted_pods",
				suite, profile, name, f[0]+float64(round), f[1])
			if f[2] > 0 {
				line += fmt.Sprintf(" %g scheduler_cpu_s %g bound_pods", f[2], f[3])
			}
			lines = append(lines, line)
		}
	}
	data := pageOf(t, lines)
	text := string(data)
	for _, want := range []struct{ behaviour, line string }{
		{"throughput is held to the in-tree process, with each round's ratio and the in-process reference",
			"| upstream " + workload + " throughput: muster ≥ 1.0 × the in-tree process (in the harness's process: 0.57×) | 1.09×; rounds 1.10×, 1.10×, 1.09×, 1.09×, 1.08× | yes |"},
		{"admission p99 is held to the in-tree process",
			"| upstream " + workload + ": gang admission p99 ≤ 1.0 × the in-tree process's (2000.0 ms) (in the harness's process: 1.80×) | 1800.0 ms, 0.90×; rounds 0.90×, 0.90×, 0.90×, 0.90×, 0.90× | yes |"},
		{"CPU per bound pod is each process's CPU over its own bound pods, and a higher one misses",
			"| upstream " + workload + ": CPU per bound pod ≤ 1.0 × the in-tree process's (2.0 ms) | 3.0 ms, 1.50×; rounds 1.50×, 1.50×, 1.50×, 1.50×, 1.50× | **missed** |"},
		{"the tables have a column for each profile and muster's ratio to each other one",
			"| workload | default | intree | muster | muster / default | muster / intree | n |"},
	} {
		if !strings.Contains(text, want.line) {
			t.Errorf("%s: the page lacks\n%s", want.behaviour, want.line)
		}
	}
	if strings.Contains(text, "coscheduling |") {
		t.Error("the page has a coscheduling column though no result has that profile")
	}
}

// TestThePageSaysWhenUpstreamRanWithoutTheInTreeProcess: the intro
// describes three upstream profiles, so a run that left `intree` out says
// so, and one that ran it does not.
func TestThePageSaysWhenUpstreamRanWithoutTheInTreeProcess(t *testing.T) {
	const note = "This run left the `intree` profile out"
	for _, tc := range []struct {
		name     string
		profiles []string
		wantNote bool
	}{
		{"upstream without the in-tree process is told", []string{"default", "muster"}, true},
		{"upstream with the in-tree process is not", []string{"default", "intree", "muster"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			for _, profile := range tc.profiles {
				lines = append(lines, fmt.Sprintf("BenchmarkUpstreamTopology/TopologyAwareScheduling-%s/5000Nodes_750Gangs_3000Pods-2 1 100 SchedulingThroughput/Average 750 gangs 0 partial_gangs", profile))
			}
			data := pageOf(t, lines)
			if got := strings.Contains(string(data), note); got != tc.wantNote {
				t.Errorf("the page has the note: %v, want %v", got, tc.wantNote)
			}
		})
	}
}

// TestPerfSchedulingAloneHasNoUpstreamNote: a page of muster's own
// workloads has no upstream case to say anything of.
func TestPerfSchedulingAloneHasNoUpstreamNote(t *testing.T) {
	data := pageOf(t, []string{"BenchmarkPerfScheduling/GangFit10-muster/500Nodes-2 1 100 SchedulingThroughput/Average"})
	if strings.Contains(string(data), "left the `intree` profile out") {
		t.Error("a page without upstream cases says the in-tree process was left out")
	}
}

// pageOf writes the page benchtable makes from these results lines.
func pageOf(t *testing.T, lines []string) []byte {
	t.Helper()
	dir := t.TempDir()
	results := filepath.Join(dir, "results.txt")
	if err := os.WriteFile(results, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "page.md")
	if err := run(results, page, "Test", "test", "", "", ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
