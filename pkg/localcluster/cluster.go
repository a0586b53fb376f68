// Package localcluster runs a real Kubernetes control plane on loopback for
// muster's integration tests and demo: etcd, kube-apiserver with RBAC,
// kube-controller-manager, kwok as the kubelet of every simulated node, and
// muster-scheduler. Every program is a child process whose PID is recorded,
// so that Down stops exactly what Up started.
package localcluster

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/muster-dev/muster/pkg/topology"
)

// Annotations that script a pod's life on a simulated node. Both take a Go
// duration such as "30s".
const (
	// SimStartAfterAnnotation delays the start of a pod's containers
	// after it is bound: it stays Pending, bound, until then.
	SimStartAfterAnnotation = "muster.dev/sim-start-after"
	// SimReadyAfterAnnotation delays the pod's Ready condition after it
	// starts running.
	SimReadyAfterAnnotation = "muster.dev/sim-ready-after"
	// SimRunForAnnotation makes the pod Succeed this long after it became
	// Ready.
	SimRunForAnnotation = "muster.dev/sim-run-for"
)

// SimulatedNodeEphemeralStorage is the local storage a simulated node
// advertises.
const SimulatedNodeEphemeralStorage = "100Gi"

// SchedulerName is the profile of muster-scheduler's configuration.
const SchedulerName = topology.SchedulerName

const (
	stateFile          = "state.json"
	apiServerServiceIP = "10.0.0.1"
	// stepTimeout bounds each start-up step; a cold API server on a busy
	// 2-core machine takes well under a minute.
	stepTimeout = 2 * time.Minute
)

// programs are the binaries a cluster runs, in the order it starts them.
var programs = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "muster-scheduler", "muster-controller"}

// controlPlanePrograms are the programs Options.KubeVersion takes from
// another release.
var controlPlanePrograms = []string{"kube-apiserver", "kube-controller-manager"}

// ControlPlaneDir is where `make control-plane-next` builds the control
// plane of Kubernetes version, under binDir.
func ControlPlaneDir(binDir, version string) string {
	return filepath.Join(binDir, "control-plane", version)
}

//go:embed kwok-stages.yaml
var kwokStages []byte

// Options describe the cluster to start.
type Options struct {
	// Dir holds the cluster's state, credentials and logs. Down removes it.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kwok,
	// muster-scheduler and muster-controller.
	BinDir string
	// KubeVersion, when set, is the Kubernetes version of the control
	// plane, kube-apiserver and kube-controller-manager, taken from
	// ControlPlaneDir(BinDir, KubeVersion) instead of BinDir: muster, built
	// on the release BinDir holds, against another one (version skew).
	// The API server must report exactly that version.
	KubeVersion string
	// Nodes is how many simulated nodes to create.
	Nodes int
	// NodeCPU, NodeMemory and NodeGPUs are each node's allocatable
	// resources, as quantities.
	NodeCPU    string
	NodeMemory string
	NodeGPUs   int
	// NodeDevices is how many devices each node publishes for Dynamic
	// Resource Allocation, in a ResourceSlice of DeviceDriver that
	// DeviceClassName selects (devices.go).
	NodeDevices int
	// NodesPerRack, when set, labels the nodes into racks of that many
	// under RackLabel (rack-0, rack-1, …, in node order); RacksPerBlock,
	// when set too, groups the racks into blocks under BlockLabel.
	NodesPerRack  int
	RacksPerBlock int
	// SchedulerConfig is muster-scheduler's KubeSchedulerConfiguration;
	// empty means manifests/scheduler-config.yaml, whose leader election
	// runs here as in a cluster, with the lease its RBAC allows.
	SchedulerConfig []byte
	// SchedulerFeatureGates, when set, replace the feature gates of
	// muster-scheduler's Deployment. With a configuration of
	// kube-scheduler's default plugins only, muster-scheduler is the
	// in-tree scheduler with those gates, which benchmarks compare with.
	SchedulerFeatureGates string
	// ElasticWindow is muster-controller's --elastic-window; zero keeps
	// its default.
	ElasticWindow time.Duration
	// ControllerReplicas is how many muster-controller replicas run, 1
	// when zero. Several serve the webhooks behind a front on loopback
	// (muster-local front), as a Service would, and elect a leader.
	ControllerReplicas int
	// AuditMuster writes the API server's audit log of muster-scheduler's
	// and muster-controller's requests, and only theirs, to
	// AuditLogPath: what the benchmarks count requests by.
	AuditMuster bool
	// WorkloadAPI serves scheduling.k8s.io/v1beta1 Workloads and
	// PodGroups: GenericWorkload and WorkloadWithJob on in the API server
	// and kube-controller-manager, whose Job controller then makes a
	// Workload and a PodGroup for a Job with spec.scheduling.
	// muster-scheduler runs with its Deployment's gates all the same,
	// GenericWorkload off: it reads those PodGroups as groups of its own,
	// and upstream's PodGroup cycle and GangScheduling stay out of its way.
	WorkloadAPI bool
	// StaticNodes gives nodes a day's grace before the node lifecycle
	// controller takes one that stopped heartbeating for unreachable: a
	// node the caller creates Ready, and kwok does not play, stays Ready
	// and its pods stay, as in upstream's scheduler_perf, which runs no
	// node lifecycle controller at all. For clusters of more nodes than
	// kwok can heartbeat on the machine.
	StaticNodes bool
	// Detach lets the programs outlive the calling process, for the
	// muster-local command. Tests leave it false so that nothing survives
	// a test binary that dies.
	Detach bool
	// RealNodes is how many real nodes to add beside the simulated ones:
	// each a kubelet with its own containerd in a network namespace of its
	// own, on a pod network with kube-proxy and CoreDNS (realnodes.go).
	// With real nodes, muster runs as pods, installed by applying
	// ManifestsDir with the images of ImagesDir, as a user installs it.
	RealNodes int
	// ImagesDir holds the OCI archives make images writes, which every
	// real node imports.
	ImagesDir string
	// ExampleImages are the example workloads' images, from
	// ImagesDir/examples (make example-images), that the real nodes
	// import as well, such as muster-example-mpi.
	ExampleImages []string
	// ManifestsDir is muster's kustomize base, manifests/.
	ManifestsDir string
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// DefaultOptions are the options muster-local and the tests start from.
func DefaultOptions(dir, binDir string) Options {
	return Options{Dir: dir, BinDir: binDir, Nodes: 4, NodeCPU: "32", NodeMemory: "256Gi"}
}

// AuditLogPath is the API server's audit log in a cluster's directory, written
// when Options.AuditMuster is set: one JSON event per line.
func AuditLogPath(dir string) string { return filepath.Join(dir, "logs", "audit.log") }

// Cluster is a running local control plane.
type Cluster struct {
	Dir string `json:"dir"`
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// Server is the API server's URL.
	Server    string     `json:"server"`
	Processes []*Process `json:"processes"`
	// Mounted are directories outside Dir that the cluster wrote for a
	// program, as a kubelet mounts a volume; Down removes them.
	Mounted []string `json:"mounted,omitempty"`
	// Detached is true when its programs outlive the process that started
	// them (Options.Detach), as operators started later do too.
	Detached bool `json:"detached,omitempty"`
	// RealNodes is how many real nodes the cluster made; Down removes
	// their namespaces, mounts and cgroups.
	RealNodes int `json:"realNodes,omitempty"`
	// Ports are the ports reserved for the cluster's programs (ports.go);
	// Down releases them.
	Ports []int `json:"ports,omitempty"`
	// locks are the machine-wide locks the cluster holds while it runs.
	locks []*os.File
}

// Up starts a cluster and returns once its nodes are Ready, the PodGroup CRD
// is established and muster-scheduler serves. On failure it stops whatever
// it had started.
func Up(ctx context.Context, opts Options) (c *Cluster, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving --dir %q: %w", opts.Dir, err)
	}
	if existing, err := Load(dir); err == nil {
		if existing.anyRunning() {
			return nil, fmt.Errorf("a cluster already runs in %s; stop it first with: muster-local down --dir %s", dir, opts.Dir)
		}
		// A cluster left stopped in dir, whose ports this one may take.
		if err := existing.releasePorts(existing.Ports); err != nil {
			return nil, err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clearing %s: %w", dir, err)
	}
	for _, sub := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
	}

	c = &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), Detached: opts.Detach}
	defer func() {
		if err != nil {
			if downErr := c.Down(); downErr != nil {
				err = errors.Join(err, fmt.Errorf("cleaning up after the failed start: %w", downErr))
			}
		}
	}()
	s := &starter{opts: opts, cluster: c, binDir: opts.BinDir}
	return c, s.run(ctx)
}

func (o Options) validate() error {
	if o.Dir == "" {
		return errors.New("--dir is required: the directory for the cluster's state")
	}
	if o.Nodes < 0 || o.RealNodes < 0 {
		return fmt.Errorf("--nodes=%d, --real-nodes=%d: cannot be negative", o.Nodes, o.RealNodes)
	}
	if o.Nodes+o.RealNodes < 1 {
		return fmt.Errorf("--nodes=%d: a cluster needs at least 1 node, simulated (--nodes) or real (--real-nodes)", o.Nodes)
	}
	if o.RealNodes > maxRealNodes {
		return fmt.Errorf("--real-nodes=%d: at most %d real nodes fit this machine's pod network", o.RealNodes, maxRealNodes)
	}
	if o.NodesPerRack < 0 || o.RacksPerBlock < 0 {
		return fmt.Errorf("--nodes-per-rack=%d, --racks-per-block=%d: cannot be negative", o.NodesPerRack, o.RacksPerBlock)
	}
	if o.RacksPerBlock > 0 && o.NodesPerRack == 0 {
		return fmt.Errorf("--racks-per-block=%d needs --nodes-per-rack: blocks are made of racks", o.RacksPerBlock)
	}
	if o.NodeGPUs < 0 {
		return fmt.Errorf("--node-gpus=%d: cannot be negative", o.NodeGPUs)
	}
	if err := CheckDeviceCount("--node-devices", o.NodeDevices); err != nil {
		return err
	}
	for flag, value := range map[string]string{"--node-cpu": o.NodeCPU, "--node-memory": o.NodeMemory} {
		if _, err := resource.ParseQuantity(value); err != nil {
			return fmt.Errorf("%s=%q is not a quantity (for example 32 or 256Gi): %w", flag, value, err)
		}
	}
	if o.ControllerReplicas < 0 {
		return fmt.Errorf("--controller-replicas=%d: cannot be negative", o.ControllerReplicas)
	}
	needed := programs
	if o.ControllerReplicas > 1 {
		// The replicas' front.
		needed = append(slices.Clone(programs), "muster-local")
	}
	if o.RealNodes > 0 {
		needed = append(slices.Clone(needed), realNodePrograms...)
		if o.ImagesDir == "" || o.ManifestsDir == "" {
			return errors.New("real nodes need --images-dir, where make images writes the images, and --manifests, muster's manifests/ directory")
		}
		if _, err := os.Stat(filepath.Join(o.ManifestsDir, "kustomization.yaml")); err != nil {
			return fmt.Errorf("--manifests=%s holds no kustomization.yaml: name muster's manifests/ directory", o.ManifestsDir)
		}
		if os.Geteuid() != 0 {
			return errors.New("real nodes need root: they make network namespaces, mounts and cgroups")
		}
	}
	for _, name := range needed {
		if o.KubeVersion != "" && slices.Contains(controlPlanePrograms, name) {
			continue
		}
		if _, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil {
			return fmt.Errorf("%s is missing from %s: run `make tools build` first", name, o.BinDir)
		}
	}
	if o.KubeVersion != "" {
		dir := ControlPlaneDir(o.BinDir, o.KubeVersion)
		for _, name := range controlPlanePrograms {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("--kube-version=%s: %s is missing from %s: build it with `make control-plane-next`, which builds the version hack/tools/kube-next pins", o.KubeVersion, name, dir)
			}
		}
	}
	return nil
}

// binaryDir is where the cluster's program name comes from.
func (o Options) binaryDir(name string) string {
	if o.KubeVersion != "" && slices.Contains(controlPlanePrograms, name) {
		return ControlPlaneDir(o.BinDir, o.KubeVersion)
	}
	return o.BinDir
}

// Load reads the state of the cluster in dir.
func Load(dir string) (*Cluster, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no local cluster in %s: %w", dir, err)
	}
	c := &Cluster{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, stateFile), err)
	}
	return c, nil
}

// Down stops every program of the cluster, last started first, and removes
// its directory. The directory stays when a program could not be stopped, so
// that its log and PID remain to look at.
func (c *Cluster) Down() error {
	var errs []error
	for i := len(c.Processes) - 1; i >= 0; i-- {
		if err := c.Processes[i].stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if c.RealNodes > 0 {
		// What the nodes' programs leave: their containers, mounts,
		// namespaces and the kernel settings kubelet changed.
		errs = append(errs, cleanupRealNodes())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, dir := range c.Mounted {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing %s: %w", dir, err)
		}
	}
	for _, lock := range c.locks {
		lock.Close()
	}
	if err := c.releasePorts(c.Ports); err != nil {
		return err
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("removing %s: %w", c.Dir, err)
	}
	return nil
}

// Restart stops one program of the cluster and starts it again with the
// same arguments, as a crash and a restart by a supervisor would, and waits
// until it serves again.
func (c *Cluster) Restart(ctx context.Context, program string) error {
	for i, p := range c.Processes {
		if p.Name == program {
			return c.restart(ctx, i)
		}
	}
	return fmt.Errorf("the cluster runs no %s", program)
}

func (c *Cluster) restart(ctx context.Context, i int) error {
	p := c.Processes[i]
	if err := p.stop(stopGrace); err != nil {
		return err
	}
	detach := p.exited == nil
	restarted, err := startProcess(p.Name, p.Binary, p.Args, p.Env, p.Wrapper, filepath.Dir(p.Log), detach)
	if err != nil {
		return err
	}
	restarted.Health = p.Health
	c.Processes[i] = restarted
	if err := c.save(); err != nil {
		return err
	}
	if restarted.Health == "" {
		return nil
	}
	return waitFor(ctx, restarted, restarted.Health, func(ctx context.Context) bool { return healthy(ctx, restarted.Health) })
}

// Stop stops every program of the cluster, last started first, as Down
// does, but keeps its directory and etcd's data: the whole cluster is
// down, as one that lost its power or its network. Start runs it again.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.Processes) - 1; i >= 0; i-- {
		if err := c.Processes[i].stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Start starts every program of a stopped cluster again, in the order Up
// started them, each once the one before it serves.
func (c *Cluster) Start(ctx context.Context) error {
	for i := range c.Processes {
		if err := c.restart(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// Kill ends one program at once (SIGKILL), as a crash or a lost node would,
// and waits until it is gone.
func (c *Cluster) Kill(program string) error {
	for _, p := range c.Processes {
		if p.Name == program && p.Running() {
			return p.kill()
		}
	}
	return fmt.Errorf("the cluster runs no %s", program)
}

// Pause stops one program of the cluster where it is (SIGSTOP), as a hung
// process or a partitioned node would look to its clients: connections
// are accepted and never answered. The returned resume continues it.
func (c *Cluster) Pause(program string) (resume func() error, err error) {
	for _, p := range c.Processes {
		if p.Name != program || !p.Running() {
			continue
		}
		if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
			return nil, fmt.Errorf("pausing %s (pid %d): %w", p.Name, p.PID, err)
		}
		return func() error {
			if err := syscall.Kill(p.PID, syscall.SIGCONT); err != nil {
				return fmt.Errorf("resuming %s (pid %d): %w", p.Name, p.PID, err)
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("the cluster runs no %s", program)
}

// RESTConfig returns an admin client configuration.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", c.Kubeconfig, err)
	}
	return config, nil
}

// Clientset returns an admin clientset of the cluster.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	config, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return client, nil
}

// Endpoint returns the base URL a program serves on, such as
// https://127.0.0.1:10259 for muster-scheduler, or "" when the cluster does
// not run it or it serves nothing.
func (c *Cluster) Endpoint(program string) string {
	for _, p := range c.Processes {
		if p.Name != program || p.Health == "" {
			continue
		}
		u, err := url.Parse(p.Health)
		if err != nil {
			return ""
		}
		return u.Scheme + "://" + u.Host
	}
	return ""
}

// ProcessStatus is what Status reports of one program.
type ProcessStatus struct {
	Process *Process
	Running bool
	// Healthy is true when the program's health endpoint answers 200; a
	// program without one is healthy while it runs.
	Healthy bool
}

// Status reports which programs run and answer their health checks.
func (c *Cluster) Status(ctx context.Context) []ProcessStatus {
	statuses := make([]ProcessStatus, 0, len(c.Processes))
	for _, p := range c.Processes {
		st := ProcessStatus{Process: p, Running: p.Running()}
		st.Healthy = st.Running && (p.Health == "" || healthy(ctx, p.Health))
		statuses = append(statuses, st)
	}
	return statuses
}

func (c *Cluster) anyRunning() bool {
	for _, p := range c.Processes {
		if p.Running() {
			return true
		}
	}
	return false
}

func (c *Cluster) save() error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding cluster state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, stateFile), data, 0o600); err != nil {
		return fmt.Errorf("writing cluster state: %w", err)
	}
	return nil
}

// healthClient probes the health endpoints of the programs on loopback.
// Like a kubelet's probe it does not verify the serving certificate: the
// controller manager and the scheduler serve self-signed ones.
var healthClient = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health probes only
}

func healthy(ctx context.Context, url string) bool {
	code, ok := statusOf(ctx, healthClient, http.MethodGet, url)
	return ok && code == http.StatusOK
}

// statusOf is the status code a request with no body gets, and whether
// it got one.
func statusOf(ctx context.Context, client *http.Client, method, url string) (int, bool) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	resp.Body.Close()
	return resp.StatusCode, true
}
