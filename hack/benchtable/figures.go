package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/muster-dev/muster/test/perf/figures"
)

const throughputUnit = "SchedulingThroughput/Average"

// gangSize reads N from a GangSize<N> workload.
var gangSize = regexp.MustCompile(`^GangSize(\d+)/`)

// writeFigures draws the page's figures beside it, out's name with the
// figure's, and links them: every round's throughput as a ratio to the
// default (in-tree) profile's of the same round, per workload; and, with
// GangSize workloads, what one member costs against the gang's size.
func writeFigures(b *strings.Builder, r results, out string) error {
	base := strings.TrimSuffix(out, filepath.Ext(out))
	var links []string
	if data, ok, err := throughputFigure(r); err != nil {
		return err
	} else if ok {
		path := base + "-throughput.svg"
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		links = append(links, fmt.Sprintf("![Throughput of each round, as a ratio to the default profile's in the same round](%s)", filepath.Base(path)))
	}
	if data, ok, err := gangSizeFigure(r); err != nil {
		return err
	} else if ok {
		path := base + "-gangsize.svg"
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		links = append(links, fmt.Sprintf("![Milliseconds of scheduling per member against the gang's size](%s)", filepath.Base(path)))
	}
	if len(links) == 0 {
		return nil
	}
	b.WriteString("## Figures\n\nDrawn by the same command from the same results; each point is one round.\n\n")
	for _, link := range links {
		b.WriteString(link + "\n\n")
	}
	return nil
}

// roundRatios divides each round's value of profile by the default's of
// the same round: the rounds ran interleaved, so round i of each profile
// shared the machine's state.
func roundRatios(r results, workload, profile string) []float64 {
	base := r.samples[key{workload, "default", throughputUnit}]
	values := r.samples[key{workload, profile, throughputUnit}]
	var ratios []float64
	for i := range min(len(base), len(values)) {
		if base[i] > 0 {
			ratios = append(ratios, values[i]/base[i])
		}
	}
	return ratios
}

func throughputFigure(r results) ([]byte, bool, error) {
	var workloads []string
	compared := []string{"muster", "coscheduling", "intree"}
	series := make([]figures.Series, len(compared))
	for i, profile := range compared {
		series[i].Name = profile + " / default"
	}
	for _, w := range r.workloads {
		ratios := make([][]float64, len(compared))
		any := false
		for i, profile := range compared {
			ratios[i] = roundRatios(r, w, profile)
			any = any || len(ratios[i]) > 0
		}
		if !any {
			continue
		}
		workloads = append(workloads, shortName(w))
		for i := range compared {
			series[i].Values = append(series[i].Values, ratios[i])
		}
	}
	if len(workloads) == 0 {
		return nil, false, nil
	}
	series = slices.DeleteFunc(series, func(s figures.Series) bool {
		return !slices.ContainsFunc(s.Values, func(v []float64) bool { return len(v) > 0 })
	})
	data, err := figures.Rounds("Throughput against the default profile, each round", "ratio to default (higher is better)", workloads, 1, series)
	return data, err == nil, err
}

func gangSizeFigure(r results) ([]byte, bool, error) {
	type point struct {
		size     float64
		workload string
	}
	var points []point
	for _, w := range r.workloads {
		if m := gangSize.FindStringSubmatch(w); m != nil {
			n, err := strconv.ParseFloat(m[1], 64)
			if err == nil {
				points = append(points, point{n, w})
			}
		}
	}
	if len(points) < 2 {
		return nil, false, nil
	}
	slices.SortFunc(points, func(a, b point) int { return int(a.size - b.size) })
	xs := make([]float64, len(points))
	var series []figures.Series
	for _, profile := range profiles {
		s := figures.Series{Name: profile}
		any := false
		for i, p := range points {
			xs[i] = p.size
			var perMember []float64
			for _, v := range r.samples[key{p.workload, profile, metricByUnit("completion_s").unit}] {
				if v > 0 {
					perMember = append(perMember, msPerMember(v, p.size))
				}
			}
			any = any || len(perMember) > 0
			if len(perMember) == 0 {
				perMember = []float64{math.NaN()}
			}
			s.Values = append(s.Values, perMember)
		}
		if any {
			series = append(series, s)
		}
	}
	data, err := figures.Lines("What one member costs against the gang's size", "members in the gang", "ms per member (completion time / members)", xs, true, series)
	return data, err == nil, err
}

// shortName cuts a workload's name to fit under its tick: upstream's
// names run long.
func shortName(workload string) string {
	if len(workload) <= 32 {
		return workload
	}
	return workload[:29] + "..."
}
