// Package realnodes runs muster on real nodes: kubelets with their own
// containerd, a pod network, kube-proxy and CoreDNS, muster installed from
// manifests/ as pods, and the examples' frameworks in real containers.
package realnodes

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

// repoRoot is the top of the repository, from this file's place in it.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// imagesDir holds the images the nodes import (make images).
func imagesDir() string {
	if dir := os.Getenv("MUSTER_IMAGES_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(repoRoot(), "_output", "images")
}

func TestMain(m *testing.M) {
	framework.RunMain(m, func(o *localcluster.Options) {
		o.Nodes = 0
		o.RealNodes = 2
		o.ImagesDir = imagesDir()
		o.ManifestsDir = filepath.Join(repoRoot(), "manifests")
		o.ExampleImages = []string{"muster-example-mpi", "muster-example-torch", "muster-example-python"}
	})
}
