// Command muster-scheduler is kube-scheduler with muster's plugins compiled
// in. It runs next to the default scheduler and schedules the pods that set
// spec.schedulerName: muster-scheduler.
package main

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/muster-dev/muster/pkg/ownerscale"
	"github.com/muster-dev/muster/pkg/plugins"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
	"github.com/muster-dev/muster/pkg/version"
)

// options register muster's plugins (plugins.Registry) in kube-scheduler,
// GangPreemption shrinking elastic owners through pkg/ownerscale.
func options() []app.Option {
	var opts []app.Option
	for name, factory := range plugins.Registry(NewOwnerShrinker) {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}

func main() {
	if versionRequested(os.Args[1:]) {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	command := app.NewSchedulerCommand(options()...)
	command.Use = "muster-scheduler"
	command.Short = "kube-scheduler with muster's gang and launch-order plugins"
	command.Long = `muster-scheduler is kube-scheduler ` + version.Get().Kubernetes + ` with muster's plugins compiled in.
It runs as a secondary scheduler: it schedules only pods that set
spec.schedulerName to a profile of its configuration (muster-scheduler in
manifests/scheduler-config.yaml).

Start it with a KubeSchedulerConfiguration:

  muster-scheduler --config=manifests/scheduler-config.yaml

Every kube-scheduler flag below is accepted.`
	os.Exit(cli.Run(command))
}

// NewOwnerShrinker is GangPreemption's OwnerShrinker: pkg/ownerscale's,
// on the scheduler's client configuration.
func NewOwnerShrinker(config *rest.Config) (gangpreemption.OwnerShrinker, error) {
	return ownerscale.NewShrinker(config)
}

// versionRequested reports whether the command line asks for the version.
// muster answers it itself, so that the output names muster's own version
// as well as the Kubernetes release it embeds.
func versionRequested(args []string) bool {
	for _, arg := range args {
		if arg == "--version" || (strings.HasPrefix(arg, "--version=") && arg != "--version=false") {
			return true
		}
	}
	return false
}
