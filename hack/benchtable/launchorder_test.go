package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestLaunchOrderTargetsMeasureMusterNotTheAPIServer: muster's own release
// delay is held to 1 ms; the launcher's release delay to 100 ms where the
// workload is paced, and, where it saturates the API server, to the same
// round's Bind p99 at the API server plus 100 ms, each round paired with
// itself.
func TestLaunchOrderTargetsMeasureMusterNotTheAPIServer(t *testing.T) {
	tests := []struct {
		name     string
		workload string
		// Per round: muster's own release p99, the launcher's release
		// p99 and Bind p99 at the API server, in ms; bind < 0 for none.
		rounds [][3]float64
		want   []string
	}{
		{
			name:     "a saturated run is held to its own Bind p99 plus 100 ms",
			workload: "LaunchOrder9/500Nodes",
			rounds:   [][3]float64{{0.1, 580, 500}, {0.1, 560, 400}, {0.2, 450, 420}},
			want: []string{
				"| LaunchOrder9/500Nodes: muster's own release delay p99 ≤ 1 ms, the scheduler seeing the last worker Ready to the launcher allowed | 0.1 ms | yes |",
				"| LaunchOrder9/500Nodes: launcher release delay p99 ≤ the same round's Bind p99 at the API server + 100 ms | +80.0 ms (median; rounds 580.0 − 500.0, 560.0 − 400.0, 450.0 − 420.0 ms) | yes |",
			},
		},
		{
			name:     "a release further behind its round's Bind misses",
			workload: "LaunchOrder9Ready2s/500Nodes",
			rounds:   [][3]float64{{0.1, 600, 300}, {3, 600, 350}, {0.1, 500, 450}},
			want: []string{
				"| LaunchOrder9Ready2s/500Nodes: launcher release delay p99 ≤ the same round's Bind p99 at the API server + 100 ms | +250.0 ms (median; rounds 600.0 − 300.0, 600.0 − 350.0, 500.0 − 450.0 ms) | **missed** |",
			},
		},
		{
			name:     "a saturated run without Bind at the API server cannot meet it",
			workload: "LaunchOrder9/500Nodes",
			rounds:   [][3]float64{{0.1, 80, -1}},
			want: []string{
				"| LaunchOrder9/500Nodes: launcher release delay p99 ≤ the same round's Bind p99 at the API server + 100 ms | 80.0 ms; no Bind p99 at the API server in every round | **missed** |",
			},
		},
		{
			name:     "the paced run is held to 100 ms",
			workload: "LaunchOrder9Paced/100Nodes",
			rounds:   [][3]float64{{0.1, 70, 20}, {0.1, 110, 20}, {0.1, 90, 20}},
			want: []string{
				"| LaunchOrder9Paced/100Nodes: launcher release delay p99 ≤ 100 ms after the last worker is Ready | 90.0 ms | yes |",
			},
		},
		{
			name:     "muster's own delay above 1 ms misses",
			workload: "LaunchOrder9Paced/100Nodes",
			rounds:   [][3]float64{{1.6, 70, 20}},
			want: []string{
				"| LaunchOrder9Paced/100Nodes: muster's own release delay p99 ≤ 1 ms, the scheduler seeing the last worker Ready to the launcher allowed | 1.6 ms | **missed** |",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lines []string
			for _, r := range tt.rounds {
				line := fmt.Sprintf("BenchmarkPerfScheduling/%s-muster/%s-2 1 100 SchedulingThroughput/Average %g muster_launch_release_delay_ms/Perc99 %g launch_release_ms/Perc99 0 launch_early",
					strings.Split(tt.workload, "/")[0], strings.Split(tt.workload, "/")[1], r[0], r[1])
				if r[2] >= 0 {
					line += fmt.Sprintf(" %g apiserver_request_duration_ms/Perc99", r[2])
				}
				lines = append(lines, line)
			}
			data := pageOf(t, lines)
			for _, want := range tt.want {
				if !strings.Contains(string(data), want) {
					t.Errorf("the page lacks\n%s\nits targets:\n%s", want, targetsOf(string(data)))
				}
			}
		})
	}
}

// targetsOf is the page's Targets section, for a failure's message.
func targetsOf(page string) string {
	_, after, _ := strings.Cut(page, "## Targets")
	section, _, _ := strings.Cut(after, "## ")
	return section
}
