package perf

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// caseOf is the upstream test case a benchmark runs, its name without the
// profile: BenchmarkUpstreamGangScheduling/GangScheduling-intree/... is
// GangScheduling.
func caseOf(benchmark string) string {
	parts := strings.Split(benchmark, "/")
	if len(parts) < 2 {
		return ""
	}
	return parts[1][:max(0, strings.LastIndex(parts[1], "-"))]
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
