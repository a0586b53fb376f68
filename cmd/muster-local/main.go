// Command muster-local runs a real Kubernetes control plane on this machine:
// etcd, kube-apiserver, kube-controller-manager, kwok simulating the nodes'
// kubelets, and muster-scheduler. The demo and the integration tests run on
// it; so can you, with kubectl.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/version"
)

const defaultDir = "_output/local"

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "muster-local:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var dir string
	root := &cobra.Command{
		Use:   "muster-local",
		Short: "Run a local Kubernetes control plane with muster-scheduler and simulated nodes",
		Long: `muster-local runs a real Kubernetes control plane on loopback: etcd,
kube-apiserver (RBAC on), kube-controller-manager, kwok keeping simulated
nodes Ready and playing their pods' lifecycle, and muster-scheduler. It needs
the binaries that 'make tools build' puts into bin/.

Pods bound to a simulated node run and become Ready at once. Two annotations
script them (Go durations):
  muster.dev/sim-ready-after: 30s   Ready only 30s after the pod starts running
  muster.dev/sim-run-for: 1m        Succeeds 1m after it became Ready

Every program's PID is recorded in DIR/state.json; 'down' stops exactly those
and removes DIR.`,
		Example: `  muster-local up --nodes 4
  export KUBECONFIG=$PWD/` + defaultDir + `/kubeconfig
  bin/kubectl get nodes
  muster-local status
  muster-local down`,
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&dir, "dir", defaultDir, "directory for the cluster's state, credentials and logs")
	root.AddCommand(newUpCommand(&dir), newDownCommand(&dir), newStatusCommand(&dir), newTourCommand(&dir), newTrainingOperatorCommand(&dir), newMPIOperatorCommand(&dir), newJobSetCommand(&dir), newTrainerCommand(&dir), newKueueCommand(&dir), newMultiKueueCommand(), newDevicesCommand(&dir), newFrontCommand())
	return root
}

func newUpCommand(dir *string) *cobra.Command {
	opts := localcluster.DefaultOptions("", defaultBinDir())
	var schedulerConfig string
	var kueue bool
	var kueueOpts localcluster.KueueOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the cluster; returns once nodes are Ready and muster-scheduler serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Dir = *dir
			opts.Detach = true
			opts.Logf = func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }
			if schedulerConfig != "" {
				data, err := os.ReadFile(schedulerConfig)
				if err != nil {
					return fmt.Errorf("--scheduler-config: %w", err)
				}
				opts.SchedulerConfig = data
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			began := time.Now()
			fmt.Printf("Starting a local cluster in %s\n", *dir)
			cluster, err := localcluster.Up(ctx, opts)
			if err != nil {
				return err
			}
			if kueue {
				if err := cluster.StartKueue(ctx, opts.BinDir, kueueOpts); err != nil {
					return fmt.Errorf("starting Kueue: %w", err)
				}
				fmt.Println("Kueue runs; jobs that name a LocalQueue (label kueue.x-k8s.io/queue-name) wait for its admission.")
			}
			fmt.Printf(`Cluster up with %d simulated and %d real nodes in %s.

Use it:
  export KUBECONFIG=%s
  %s get nodes

Pods with spec.schedulerName: %s are placed by muster-scheduler.
Logs are in %s.
Stop it:
  %s down --dir %s
`, opts.Nodes, opts.RealNodes, time.Since(began).Round(100*time.Millisecond), cluster.Kubeconfig,
				filepath.Join(opts.BinDir, "kubectl"), localcluster.SchedulerName,
				filepath.Join(cluster.Dir, "logs"), os.Args[0], *dir)
			return nil
		},
	}
	flags := cmd.Flags()
	flags.IntVar(&opts.Nodes, "nodes", opts.Nodes, "number of simulated nodes")
	flags.IntVar(&opts.RealNodes, "real-nodes", 0, "number of real nodes: each a kubelet with its own containerd in a network namespace of its own, on a pod network with kube-proxy and CoreDNS; muster then runs as pods, installed from --manifests (needs root)")
	flags.StringVar(&opts.ImagesDir, "images-dir", defaultImagesDir(), "the images real nodes import, which make images writes")
	flags.StringSliceVar(&opts.ExampleImages, "example-images", nil, "example workloads' images real nodes import from --images-dir/examples (make example-images), such as muster-example-mpi")
	flags.StringVar(&opts.ManifestsDir, "manifests", "manifests", "muster's manifests/ directory, applied with kubectl apply -k to install muster on real nodes")
	flags.StringVar(&opts.NodeCPU, "node-cpu", opts.NodeCPU, "allocatable CPU of each node")
	flags.StringVar(&opts.NodeMemory, "node-memory", opts.NodeMemory, "allocatable memory of each node")
	flags.IntVar(&opts.NodeGPUs, "node-gpus", opts.NodeGPUs, "nvidia.com/gpu of each node")
	flags.IntVar(&opts.NodeDevices, "node-devices", 0, "devices each node publishes for Dynamic Resource Allocation, in a ResourceSlice of driver "+localcluster.DeviceDriver+"; claims get them through DeviceClass "+localcluster.DeviceClassName)
	flags.IntVar(&opts.NodesPerRack, "nodes-per-rack", 0, "label the nodes into racks of this many, under "+localcluster.RackLabel+" (rack-0, rack-1, …); 0 for none")
	flags.IntVar(&opts.RacksPerBlock, "racks-per-block", 0, "group the racks into blocks of this many, under "+localcluster.BlockLabel+"; 0 for none")
	flags.StringVar(&opts.BinDir, "bin-dir", opts.BinDir, "directory holding etcd, kube-apiserver, kube-controller-manager, kwok and muster-scheduler")
	flags.StringVar(&opts.KubeVersion, "kube-version", "", "run kube-apiserver and kube-controller-manager of this Kubernetes version, from --bin-dir/control-plane/VERSION (make control-plane-next builds the one hack/tools/kube-next pins), against muster as built; empty is --bin-dir's own, the release muster is built on")
	flags.IntVar(&opts.ControllerReplicas, "controller-replicas", 1, "muster-controller replicas; several elect a leader and serve the webhooks behind a front, as a Service would")
	flags.BoolVar(&opts.WorkloadAPI, "workload-api", false, "serve upstream's scheduling.k8s.io/v1beta1 Workloads and PodGroups (GenericWorkload, WorkloadWithJob, TopologyAwareWorkloadScheduling and DRAWorkloadResourceClaims on), whose PodGroups muster-scheduler also reads as groups")
	flags.BoolVar(&kueue, "kueue", false, "run Kueue (bin/kueue, built by 'make tools') in front of muster-scheduler, its webhooks served on loopback, its integrations for batch/Job, pod groups, JobSet, the Kubeflow jobs and TrainJob on")
	flags.StringVar(&kueueOpts.WaitForPodsReady, "kueue-wait-for-pods-ready", "", "Kueue's waitForPodsReady timeout (a Go duration such as 5m); off when empty")
	flags.StringVar(&schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration for muster-scheduler (default: the embedded manifests/scheduler-config.yaml)")
	return cmd
}

func newDownCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop every program the cluster started, by PID, and remove its directory",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			if err := cluster.Down(); err != nil {
				return err
			}
			fmt.Printf("Stopped %d programs and removed %s.\n", len(cluster.Processes), cluster.Dir)
			return nil
		},
	}
}

func newTrainingOperatorCommand(dir *string) *cobra.Command {
	var opts localcluster.TrainingOperatorOptions
	cmd := &cobra.Command{
		Use:   "training-operator",
		Short: "Run Kubeflow's training-operator against the cluster, pointed at muster-scheduler",
		Long: `Runs bin/training-operator (built by 'make tools') as its users run it
with muster, --gang-scheduler-name=muster-scheduler, with its CRDs installed
and its webhooks served on loopback. 'down' stops it with the rest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			if err := cluster.StartTrainingOperator(cmd.Context(), defaultBinDir(), opts); err != nil {
				return err
			}
			fmt.Println("training-operator runs; its jobs' pods are scheduled by muster-scheduler.")
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&opts.Schemes, "schemes", nil, "job kinds to run, such as pytorchjob,tfjob (its --enable-scheme); all when empty. Leave out mpijob to run mpi-operator beside it")
	cmd.Flags().StringVar(&opts.PyTorchInitImage, "pytorch-init-container-image", "", "the image of the init container of PyTorchJob workers, which runs nslookup (its --pytorch-init-container-image); on real nodes, muster.local/muster-example-torch:debian12, which has it")
	return cmd
}

func newMPIOperatorCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "mpi-operator",
		Short: "Run Kubeflow's mpi-operator against the cluster, pointed at muster-scheduler",
		Long: `Runs bin/mpi-operator (built by 'make tools') as its users run it with
muster, --gang-scheduling=muster-scheduler, with its MPIJob v2beta1 CRD
installed. It always serves its health check on port 8080. 'down' stops
it with the rest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			if err := cluster.StartMPIOperator(cmd.Context(), defaultBinDir()); err != nil {
				return err
			}
			fmt.Println("mpi-operator runs; its MPIJobs' pods are scheduled by muster-scheduler.")
			return nil
		},
	}
}

func newJobSetCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "jobset",
		Short: "Run the JobSet controller against the cluster",
		Long: `Runs bin/jobset (built by 'make tools') as its users run it, with its
CRD installed and its webhooks served on loopback, its internal
certificate management off. A JobSet whose pod templates name
muster-scheduler is grouped by muster. 'down' stops it with the rest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			if err := cluster.StartJobSet(cmd.Context(), defaultBinDir()); err != nil {
				return err
			}
			fmt.Println("the JobSet controller runs; JobSets whose pods name muster-scheduler are grouped by muster.")
			return nil
		},
	}
}

func newTrainerCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "trainer",
		Short: "Run Kubeflow Trainer's controller manager (and JobSet's) against the cluster",
		Long: `Runs bin/trainer (built by 'make tools') as its users run it, with its
CRDs installed and its webhooks served on loopback, its certificate
management off; the JobSet controller, which runs every TrainJob, is
started first unless it runs. A TrainJob whose runtime has a coscheduling
PodGroup policy and names muster-scheduler is grouped and ordered by
muster. 'down' stops it with the rest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			if err := cluster.StartTrainer(cmd.Context(), defaultBinDir()); err != nil {
				return err
			}
			fmt.Println("Kubeflow Trainer runs; TrainJobs whose runtimes name muster-scheduler are grouped and ordered by muster.")
			return nil
		},
	}
}

func newKueueCommand(dir *string) *cobra.Command {
	var opts localcluster.KueueOptions
	cmd := &cobra.Command{
		Use:   "kueue",
		Short: "Run Kueue in front of muster-scheduler, as up --kueue does",
		Long: `Runs bin/kueue (built by 'make tools') as its users run it in front of a
scheduler: its CRDs installed, its webhooks served on loopback, its internal
certificate management off, its integrations for batch/Job, pod groups,
JobSet, the Kubeflow jobs and TrainJob on. A job that names a LocalQueue
(label kueue.x-k8s.io/queue-name) waits, suspended, for Kueue to admit it;
then muster-scheduler gangs and orders its pods. 'down' stops it with the
rest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			if err := cluster.StartKueue(cmd.Context(), defaultBinDir(), opts); err != nil {
				return err
			}
			fmt.Println("Kueue runs; jobs that name a LocalQueue (label kueue.x-k8s.io/queue-name) wait for its admission.")
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.WaitForPodsReady, "wait-for-pods-ready", "", "Kueue's waitForPodsReady timeout (a Go duration such as 5m); off when empty")
	return cmd
}

func newDevicesCommand(dir *string) *cobra.Command {
	count := 0
	cmd := &cobra.Command{
		Use:   "devices NODE...",
		Short: "Publish simulated devices on nodes of the cluster, as up --node-devices does",
		Long: `Makes each named node publish --count devices for Dynamic Resource
Allocation, in a ResourceSlice of driver ` + localcluster.DeviceDriver + ` that the node owns, and
creates DeviceClass ` + localcluster.DeviceClassName + ` unless it exists: for nodes created
after 'up'.`,
		Example: "  muster-local devices gpu-0 gpu-1 --count 2",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, nodes []string) error {
			if err := localcluster.CheckDeviceCount("--count", count); err != nil {
				return err
			}
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			client, err := cluster.Clientset()
			if err != nil {
				return err
			}
			for _, name := range nodes {
				node, err := client.CoreV1().Nodes().Get(cmd.Context(), name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("reading node %s: %w", name, err)
				}
				if err := localcluster.PublishDevices(cmd.Context(), client, node, count); err != nil {
					return err
				}
			}
			fmt.Printf("%d nodes publish %d devices each, of DeviceClass %s.\n", len(nodes), count, localcluster.DeviceClassName)
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "devices each node publishes")
	return cmd
}

func newStatusCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Say which programs of the cluster run and answer their health checks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			fmt.Printf("Cluster in %s, API server %s\n", cluster.Dir, cluster.Server)
			down := 0
			for _, st := range cluster.Status(cmd.Context()) {
				state := "healthy"
				switch {
				case !st.Running:
					state = "not running"
					down++
				case !st.Healthy:
					state = "running, not healthy"
					down++
				}
				fmt.Printf("  %-24s pid %-7d %-21s log %s\n", st.Process.Name, st.Process.PID, state, st.Process.Log)
			}
			if down > 0 {
				return fmt.Errorf("%d of %d programs are not healthy", down, len(cluster.Processes))
			}
			return nil
		},
	}
}

// defaultBinDir is $MUSTER_BIN_DIR, else the directory of this executable:
// make builds muster-local into bin/ next to the tools.
// defaultImagesDir is where make images writes, as the Makefile exports it.
func defaultImagesDir() string {
	if dir := os.Getenv("MUSTER_IMAGES_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("_output", "images")
}

func defaultBinDir() string {
	if dir := os.Getenv("MUSTER_BIN_DIR"); dir != "" {
		return dir
	}
	exe, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(exe)
}
