// Package operators tests muster with the real Kubeflow operators, built
// from the module graph by `make tools` and run as their users run them,
// against a real control plane: jobs carry no muster annotation, and the
// operators point their pods at muster-scheduler with their own flags.
package operators

import (
	"testing"

	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}
