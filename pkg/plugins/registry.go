// Package plugins lists muster's scheduler plugins: muster-scheduler and
// the benchmarks' in-process scheduler register the same ones.
package plugins

import (
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/muster-dev/muster/pkg/plugins/gang"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
	"github.com/muster-dev/muster/pkg/plugins/heldrooms"
	"github.com/muster-dev/muster/pkg/plugins/launchorder"
)

// Registry holds every plugin of muster's by name. A plugin listed here
// can be enabled in a profile of the KubeSchedulerConfiguration.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		gang.Name:           gang.New,
		gangpreemption.Name: gangpreemption.New,
		heldrooms.Name:      heldrooms.New,
		launchorder.Name:    launchorder.New,
	}
}
