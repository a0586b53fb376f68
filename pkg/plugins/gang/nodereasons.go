package gang

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	fwk "k8s.io/kube-scheduler/framework"
)

// mostReasons is how many of the filters' reasons a rejection names.
const mostReasons = 3

// nodeReasons says why a member fits on no node: the nodes counted by each
// reason their filters gave, most first, as kube-scheduler's "0/N nodes
// are available" does, for example "4 nodes: cannot allocate all claims".
// It is empty when no node says.
func nodeReasons(statuses fwk.NodeToStatusReader, nodes fwk.NodeInfoLister) string {
	if statuses == nil || nodes == nil {
		return ""
	}
	counts := map[string]int{}
	for _, code := range []fwk.Code{fwk.Unschedulable, fwk.UnschedulableAndUnresolvable} {
		infos, err := statuses.NodesForStatusCode(nodes, code)
		if err != nil {
			return ""
		}
		for _, info := range infos {
			for _, reason := range statuses.Get(info.Node().Name).Reasons() {
				counts[reason]++
			}
		}
	}
	reasons := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	parts := make([]string, 0, mostReasons+1)
	for i, reason := range reasons {
		if i == mostReasons {
			parts = append(parts, fmt.Sprintf("%d more reasons", len(reasons)-mostReasons))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %s", nodeCount(counts[reason]), reason))
	}
	return strings.Join(parts, "; ")
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}
