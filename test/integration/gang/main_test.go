// Package gang tests the Gang plugin in muster-scheduler against a real
// control plane, with kwok running the pods.
package gang

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestMain runs muster-scheduler as shipped but for kube-scheduler's
// per-pod backoff, which is at most a second instead of ten: the tests
// that free room reason about which waiting pods are tried first, which
// the queue's order decides only for pods out of their backoff.
func TestMain(m *testing.M) {
	config := map[string]any{}
	if err := yaml.Unmarshal(manifests.SchedulerConfig, &config); err != nil {
		fmt.Fprintln(os.Stderr, "reading the scheduler configuration:", err)
		os.Exit(1)
	}
	config["podInitialBackoffSeconds"], config["podMaxBackoffSeconds"] = 1, 1
	data, err := yaml.Marshal(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writing the scheduler configuration:", err)
		os.Exit(1)
	}
	framework.RunMain(m, func(opts *localcluster.Options) { opts.SchedulerConfig = data })
}
