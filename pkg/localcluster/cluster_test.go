package localcluster

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func fakeBinDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range append(slices.Clone(programs), realNodePrograms...) {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestOptionsValidate(t *testing.T) {
	bin := fakeBinDir(t)
	const next = "v1.99.0-beta.0"
	if err := os.MkdirAll(ControlPlaneDir(bin, next), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range controlPlanePrograms {
		if err := os.WriteFile(filepath.Join(ControlPlaneDir(bin, next), name), nil, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{name: "defaults", change: func(*Options) {}},
		{name: "no dir", change: func(o *Options) { o.Dir = "" }, wantErr: "--dir is required"},
		{name: "no nodes", change: func(o *Options) { o.Nodes = 0 }, wantErr: "--nodes=0"},
		{name: "negative GPUs", change: func(o *Options) { o.NodeGPUs = -1 }, wantErr: "--node-gpus=-1"},
		{name: "negative devices", change: func(o *Options) { o.NodeDevices = -1 }, wantErr: "--node-devices=-1: must be 0 to 128"},
		{name: "more devices than a slice holds", change: func(o *Options) { o.NodeDevices = 129 }, wantErr: "--node-devices=129: must be 0 to 128, the devices one ResourceSlice holds"},
		{name: "devices", change: func(o *Options) { o.NodeDevices = 8 }},
		{name: "negative racks", change: func(o *Options) { o.NodesPerRack = -1 }, wantErr: "--nodes-per-rack=-1"},
		{name: "blocks without racks", change: func(o *Options) { o.RacksPerBlock = 2 }, wantErr: "--racks-per-block=2 needs --nodes-per-rack"},
		{name: "bad CPU", change: func(o *Options) { o.NodeCPU = "lots" }, wantErr: `--node-cpu="lots" is not a quantity`},
		{name: "bad memory", change: func(o *Options) { o.NodeMemory = "1 GB" }, wantErr: `--node-memory="1 GB" is not a quantity`},
		{name: "no binaries", change: func(o *Options) { o.BinDir = t.TempDir() }, wantErr: "run `make tools build` first"},
		{name: "another release's control plane, built", change: func(o *Options) { o.KubeVersion = next }},
		{name: "another release's control plane, not built", change: func(o *Options) { o.KubeVersion = "v1.98.0" }, wantErr: "--kube-version=v1.98.0: kube-apiserver is missing from " + ControlPlaneDir(bin, "v1.98.0") + ": build it with `make control-plane-next`"},
		{name: "real nodes alone", change: func(o *Options) { o.Nodes, o.RealNodes = 0, -1 }, wantErr: "--real-nodes=-1: cannot be negative"},
		{name: "more real nodes than the pod network has subnets", change: func(o *Options) { o.RealNodes = 251 }, wantErr: "--real-nodes=251: at most 250"},
		{name: "real nodes without images", change: func(o *Options) { o.RealNodes, o.ManifestsDir = 1, "manifests" }, wantErr: "real nodes need --images-dir"},
		{name: "real nodes without manifests", change: func(o *Options) { o.RealNodes, o.ImagesDir, o.ManifestsDir = 1, "images", t.TempDir() }, wantErr: "holds no kustomization.yaml: name muster's manifests/ directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := DefaultOptions("somewhere", bin)
			tt.change(&opts)
			err := opts.validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("validate() = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestSchedulerConfigPointsAtTheClusterAndKeepsTheRest(t *testing.T) {
	s := &starter{
		cluster: &Cluster{Dir: t.TempDir()},
		opts: Options{SchedulerConfig: []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 77
profiles:
- schedulerName: custom
`)},
	}
	path, err := s.schedulerConfig()
	if err != nil {
		t.Fatalf("schedulerConfig: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ClientConnection struct {
			Kubeconfig string  `json:"kubeconfig"`
			QPS        float64 `json:"qps"`
		} `json:"clientConnection"`
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	if want := s.path("scheduler.kubeconfig"); got.ClientConnection.Kubeconfig != want {
		t.Errorf("kubeconfig = %q, want %q", got.ClientConnection.Kubeconfig, want)
	}
	if got.ClientConnection.QPS != 77 || len(got.Profiles) != 1 || got.Profiles[0].SchedulerName != "custom" {
		t.Errorf("the rest of the configuration changed: %s", data)
	}
}

func TestSimulatedNodeHasTheAskedResources(t *testing.T) {
	node := simulatedNode("n", Options{NodeCPU: "8", NodeMemory: "64Gi", NodeGPUs: 2})
	if node.Annotations[simulatedNodeAnnotation] != "fake" {
		t.Errorf("node is not marked for kwok: %v", node.Annotations)
	}
	for name, want := range map[string]string{"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"} {
		got := node.Status.Allocatable[corev1.ResourceName(name)]
		if got.String() != want {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), want)
		}
	}
	noGPU := simulatedNode("n", Options{NodeCPU: "8", NodeMemory: "64Gi"})
	if _, ok := noGPU.Status.Allocatable["nvidia.com/gpu"]; ok {
		t.Errorf("a node without GPUs advertises nvidia.com/gpu")
	}
}

func TestTheNodesAreLabelledIntoRacksAndBlocks(t *testing.T) {
	opts := Options{NodesPerRack: 2, RacksPerBlock: 2}
	for i, want := range []map[string]string{
		{RackLabel: "rack-0", BlockLabel: "block-0"},
		{RackLabel: "rack-0", BlockLabel: "block-0"},
		{RackLabel: "rack-1", BlockLabel: "block-0"},
		{RackLabel: "rack-1", BlockLabel: "block-0"},
		{RackLabel: "rack-2", BlockLabel: "block-1"},
	} {
		if got := opts.topologyLabels(i); !maps.Equal(got, want) {
			t.Errorf("node %d: %v, want %v", i, got, want)
		}
	}
	if got := (Options{}).topologyLabels(3); len(got) != 0 {
		t.Errorf("no racks asked for: %v", got)
	}
	if got := (Options{NodesPerRack: 3}).topologyLabels(3); !maps.Equal(got, map[string]string{RackLabel: "rack-1"}) {
		t.Errorf("racks without blocks: %v", got)
	}
}

func TestBinaryDirTakesOnlyTheControlPlaneFromAnotherRelease(t *testing.T) {
	tests := []struct {
		name, kubeVersion, program, want string
	}{
		{"the API server of the version asked for", "v1.38.0-beta.0", "kube-apiserver", "/bin/control-plane/v1.38.0-beta.0"},
		{"the controller manager of the version asked for", "v1.38.0-beta.0", "kube-controller-manager", "/bin/control-plane/v1.38.0-beta.0"},
		{"muster as built, whatever the control plane", "v1.38.0-beta.0", "muster-scheduler", "/bin"},
		{"etcd and the nodes as built", "v1.38.0-beta.0", "kwok", "/bin"},
		{"no version: everything from bin/", "", "kube-apiserver", "/bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{BinDir: "/bin", KubeVersion: tt.kubeVersion}
			if got := opts.binaryDir(tt.program); got != tt.want {
				t.Errorf("binaryDir(%q) = %q, want %q", tt.program, got, tt.want)
			}
		})
	}
}
