// Package dra tests gangs whose members claim devices through Dynamic
// Resource Allocation, against a real control plane whose simulated nodes
// publish devices in ResourceSlices and kwok runs the pods.
package dra

import (
	"testing"

	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}
