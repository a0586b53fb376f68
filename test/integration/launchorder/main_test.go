// Package launchorder tests the LaunchOrder plugin, with Gang, in
// muster-scheduler against a real control plane; kwok delays the
// predecessors' readiness.
package launchorder

import (
	"testing"

	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}
