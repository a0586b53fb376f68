// Package gang tests the Gang plugin in muster-scheduler against a real
// control plane, with kwok running the pods.
package gang

import (
	"testing"

	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}
