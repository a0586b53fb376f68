// Package recovery tests how muster-scheduler keeps gangs whole across a
// crash and a change of their PodGroup, against a real control plane. Its
// scheduler runs with no gang backoff, so that a gang that cannot fit
// stays still until an event can help it, and a test can tell which events
// wake it.
package recovery

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	const backoff, noBackoff = "backoffSeconds: 5", "backoffSeconds: 0"
	if !bytes.Contains(manifests.SchedulerConfig, []byte(backoff)) {
		fmt.Fprintf(os.Stderr, "manifests/scheduler-config.yaml no longer sets %q\n", backoff)
		os.Exit(1)
	}
	framework.RunMain(m, func(opts *localcluster.Options) {
		opts.SchedulerConfig = bytes.Replace(manifests.SchedulerConfig, []byte(backoff), []byte(noBackoff), 1)
	})
}
