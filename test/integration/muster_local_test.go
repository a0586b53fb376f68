package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestMusterLocalUpStatusDown drives the muster-local command the way the
// demo and a developer do: its programs outlive `up`, and `down` must stop
// every one of them by PID and leave no state behind.
func TestMusterLocalUpStatusDown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	musterLocal := filepath.Join(framework.BinDir(), "muster-local")
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, musterLocal, append(args, "--dir", dir)...).CombinedOutput()
		return string(out), err
	}

	// The flag a developer gives for another release's control plane.
	out, err := run("up", "--nodes", "1", "--kube-version", framework.KubeVersion())
	if err != nil {
		t.Fatalf("muster-local up: %v\n%s", err, out)
	}
	cluster, err := localcluster.Load(dir)
	if err != nil {
		t.Fatalf("loading the state of the cluster: %v", err)
	}
	// Whatever happens below, nothing outlives the test.
	t.Cleanup(func() {
		if err := cluster.Down(); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	if !strings.Contains(out, "export KUBECONFIG="+cluster.Kubeconfig) {
		t.Errorf("muster-local up does not say how to use the cluster:\n%s", out)
	}
	wantPrograms := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "muster-scheduler", "muster-controller"}
	var names []string
	for _, p := range cluster.Processes {
		names = append(names, p.Name)
		if !p.Running() {
			t.Errorf("%s is not running after up", p)
		}
	}
	if strings.Join(names, ",") != strings.Join(wantPrograms, ",") {
		t.Errorf("up started %v, want %v", names, wantPrograms)
	}

	out, err = run("status")
	if err != nil {
		t.Errorf("muster-local status on a running cluster: %v\n%s", err, out)
	}
	for _, name := range wantPrograms {
		if !strings.Contains(out, name) {
			t.Errorf("muster-local status does not mention %s:\n%s", name, out)
		}
	}

	if out, err := run("down"); err != nil {
		t.Fatalf("muster-local down: %v\n%s", err, out)
	}
	for _, p := range cluster.Processes {
		if p.Running() {
			t.Errorf("%s still runs after down", p)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("down left %s behind (stat: %v)", dir, err)
	}
	if out, err := run("status"); err == nil {
		t.Errorf("muster-local status succeeds after down:\n%s", out)
	}
}
