// Package plugins lists muster's scheduler plugins: muster-scheduler and
// the benchmarks' in-process scheduler register the same ones.
package plugins

import (
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/muster-dev/muster/pkg/plugins/gang"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
	"github.com/muster-dev/muster/pkg/plugins/heldrooms"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/launchorder"
	"github.com/muster-dev/muster/pkg/plugins/placement"
	"github.com/muster-dev/muster/pkg/plugins/podgroupdra"
	"github.com/muster-dev/muster/pkg/plugins/sharedclaims"
)

// Registry holds every plugin of muster's by name. A plugin listed here
// can be enabled in a profile of the KubeSchedulerConfiguration. The
// plugins of one scheduler share its group model, which the registry
// owns: nothing outlives the scheduler it serves. GangPreemption shrinks
// elastic owners through what newShrinker builds.
func Registry(newShrinker gangpreemption.NewOwnerShrinker) frameworkruntime.Registry {
	models := group.NewModels()
	return frameworkruntime.Registry{
		gang.Name:           models.Plugin(gang.New),
		gangpreemption.Name: models.Plugin(gangpreemption.New(newShrinker)),
		heldrooms.Name:      models.Plugin(heldrooms.New),
		launchorder.Name:    models.Plugin(launchorder.New),
		placement.Name:      models.Plugin(placement.New),
		podgroupdra.Name:    models.Plugin(podgroupdra.New),
		sharedclaims.Name:   models.Plugin(sharedclaims.New),
	}
}
