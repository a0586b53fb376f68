// Package version reports which muster build is running and which
// Kubernetes release it embeds.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is muster's own version, set at build time with
// -ldflags "-X github.com/muster-dev/muster/pkg/version.Version=...".
var Version = "v0.0.0-dev"

// kubernetesModule is the module whose release muster-scheduler embeds.
const kubernetesModule = "k8s.io/kubernetes"

// Info describes a build.
type Info struct {
	Muster string
	// Kubernetes is the release of k8s.io/kubernetes compiled in; empty for
	// a binary that embeds none of it.
	Kubernetes string
	Go         string
}

// Get reads the build's versions. The Kubernetes version comes from the
// module graph compiled into the binary, so it cannot drift from go.mod.
func Get() Info {
	return Info{Muster: Version, Kubernetes: kubernetesVersion(), Go: runtime.Version()}
}

func (i Info) String() string {
	if i.Kubernetes == "" {
		return fmt.Sprintf("muster %s (%s)", i.Muster, i.Go)
	}
	return fmt.Sprintf("muster %s (kubernetes %s, %s)", i.Muster, i.Kubernetes, i.Go)
}

func kubernetesVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, dep := range info.Deps {
		if dep.Path != kubernetesModule {
			continue
		}
		if dep.Replace != nil {
			return dep.Replace.Version
		}
		return dep.Version
	}
	return ""
}
