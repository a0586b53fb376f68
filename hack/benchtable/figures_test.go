package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestThePageLinksItsFiguresDrawnFromEachRound: from results of three
// rounds, the page is written with its figures beside it and links them;
// the throughput figure names each workload, and the gang-size figure is
// drawn only where there are gang sizes.
func TestThePageLinksItsFiguresDrawnFromEachRound(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.txt")
	var lines []string
	for round := range 3 {
		for _, workload := range []string{"GangFit10/500Nodes", "GangSize10/5000Nodes", "GangSize1000/5000Nodes"} {
			suite, name, _ := strings.Cut(workload, "/")
			for i, profile := range profiles {
				throughput := 100 + 10*i + round
				lines = append(lines, "BenchmarkPerfScheduling/"+suite+"-"+profile+"/"+name+"-2 1 "+strconv.Itoa(throughput)+" SchedulingThroughput/Average "+strconv.Itoa(1+round)+" completion_s")
			}
		}
	}
	if err := os.WriteFile(results, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "benchmarks-test.md")
	if err := run(results, page, "Test", "test", "", "", ""); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, figure := range []string{"benchmarks-test-throughput.svg", "benchmarks-test-gangsize.svg"} {
		if !strings.Contains(string(text), "]("+figure+")") {
			t.Errorf("the page does not link %s", figure)
		}
		svg, err := os.ReadFile(filepath.Join(dir, figure))
		if err != nil {
			t.Fatalf("%s not written: %v", figure, err)
		}
		if !strings.Contains(string(svg), "<svg") {
			t.Errorf("%s is not SVG", figure)
		}
	}
	if svg, _ := os.ReadFile(filepath.Join(dir, "benchmarks-test-gangsize.svg")); !strings.Contains(string(svg), "completion time / members") {
		t.Error("the gang-size figure is not drawn from the completion time, as the target is")
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "benchmarks-test-throughput.svg"))
	for _, workload := range []string{"GangFit10/500Nodes", "GangSize10/5000Nodes"} {
		if !strings.Contains(string(svg), workload) {
			t.Errorf("the throughput figure does not name %s", workload)
		}
	}
}
