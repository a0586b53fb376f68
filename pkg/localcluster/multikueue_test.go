package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestAMultiKueueNeedsAWorker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mk")
	_, err := UpMultiKueue(context.Background(), MultiKueueOptions{Dir: dir, BinDir: fakeBinDir(t), Workers: 0})
	if err == nil || err.Error() != "--workers=0: MultiKueue needs at least 1 worker cluster" {
		t.Fatalf("UpMultiKueue with no worker: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused MultiKueue left %s behind (%v)", dir, err)
	}
}

func TestAMultiKueueIsLoadedWithItsWorkersInOrder(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{ManagerDir, WorkerName(1), WorkerName(2)} {
		c := &Cluster{Dir: filepath.Join(dir, name), Kubeconfig: filepath.Join(dir, name, "kubeconfig")}
		if err := os.MkdirAll(c.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := c.save(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := LoadMultiKueue(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Manager.Dir != filepath.Join(dir, ManagerDir) || len(m.Workers) != 2 || m.Workers[1].Dir != filepath.Join(dir, "worker-2") {
		t.Errorf("loaded manager %s and workers %v", m.Manager.Dir, m.Workers)
	}
	if err := m.Down(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Down left %s behind (%v)", dir, err)
	}
}
