package perf

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// caseAndProfile splits a benchmark named
// Benchmark<Suite>/<Case>-<profile>/<workload> into its test case and its
// scheduler profile; both are empty for a name without them.
func caseAndProfile(benchmark string) (testCase, profile string) {
	parts := strings.Split(benchmark, "/")
	if len(parts) < 2 {
		return "", ""
	}
	dash := strings.LastIndex(parts[1], "-")
	if dash < 0 {
		return parts[1], ""
	}
	return parts[1][:dash], parts[1][dash+1:]
}

// caseOf is the test case a benchmark runs: for
// BenchmarkUpstreamGangScheduling/GangScheduling-intree/..., GangScheduling.
func caseOf(benchmark string) string {
	testCase, _ := caseAndProfile(benchmark)
	return testCase
}

// profileOf is the scheduler profile a benchmark runs: for
// BenchmarkPerfScheduling/GangFit10-muster/..., muster.
func profileOf(benchmark string) string {
	_, profile := caseAndProfile(benchmark)
	return profile
}

// featureGatesFlag writes a test case's featureGates, a map of gate to
// bool, as --feature-gates=A=true,B=false, in the gates' order.
func featureGatesFlag(gates any) (string, error) {
	if gates == nil {
		return "", nil
	}
	byName, ok := gates.(map[string]any)
	if !ok {
		return "", fmt.Errorf("featureGates is a %T, want a map of gate to true or false", gates)
	}
	var flags []string
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		enabled, ok := byName[name].(bool)
		if !ok {
			return "", fmt.Errorf("featureGates.%s is %v, want true or false", name, byName[name])
		}
		flags = append(flags, fmt.Sprintf("%s=%t", name, enabled))
	}
	return strings.Join(flags, ","), nil
}
