package launchorder

import (
	"os"
	"testing"

	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

func TestMain(m *testing.M) {
	// The framework records its own metrics, which must be registered.
	schedulermetrics.Register()
	os.Exit(m.Run())
}
