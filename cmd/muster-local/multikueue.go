package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/muster-dev/muster/pkg/localcluster"
)

// newMultiKueueCommand runs a MultiKueue manager and its worker clusters.
func newMultiKueueCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "multikueue",
		Short: "Run a MultiKueue manager cluster and worker clusters, each worker a muster cluster",
		Long: `Runs, side by side on loopback, a MultiKueue manager cluster and worker
clusters, as a platform team runs them past one cluster. Every cluster runs
Kueue and the JobSet controller; each worker is a whole muster cluster
(muster-scheduler, muster-controller, simulated nodes) where jobs run. The
manager queues jobs and dispatches each, through its AdmissionCheck
"` + localcluster.MultiKueueCheck + `", to a worker with room for it. A ClusterQueue of the manager
names that check; each worker has a ClusterQueue and LocalQueue of the
same names, and the job's namespace.`,
		Example: `  muster-local multikueue up --workers 2
  export KUBECONFIG=$PWD/` + defaultMultiKueueDir + `/manager/kubeconfig
  muster-local multikueue down`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", defaultMultiKueueDir, "directory for the clusters' state, credentials and logs, a directory each")
	cmd.AddCommand(newMultiKueueUpCommand(&dir), newMultiKueueDownCommand(&dir))
	return cmd
}

const defaultMultiKueueDir = ".muster-multikueue"

func newMultiKueueUpCommand(dir *string) *cobra.Command {
	opts := localcluster.MultiKueueOptions{
		BinDir:  defaultBinDir(),
		Workers: 2,
		Worker:  localcluster.DefaultOptions("", ""),
		Manager: localcluster.MultiKueueManager{WorkerLostTimeout: "1m", GCInterval: "10s"},
	}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the manager and the workers; returns once the manager sees every worker active",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for flag, value := range map[string]string{"--worker-lost-timeout": opts.Manager.WorkerLostTimeout, "--gc-interval": opts.Manager.GCInterval} {
				if _, err := time.ParseDuration(value); err != nil {
					return fmt.Errorf("%s=%q is not a duration (for example 1m): %w", flag, value, err)
				}
			}
			opts.Dir, opts.Detach = *dir, true
			opts.Logf = func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			began := time.Now()
			fmt.Printf("Starting a MultiKueue manager and %d workers in %s\n", opts.Workers, *dir)
			m, err := localcluster.UpMultiKueue(ctx, opts)
			if err != nil {
				return err
			}
			fmt.Printf("Up in %s.\n\nThe manager, where jobs are submitted:\n  export KUBECONFIG=%s\n", time.Since(began).Round(100*time.Millisecond), m.Manager.Kubeconfig)
			for i, w := range m.Workers {
				fmt.Printf("%s, %d simulated nodes: KUBECONFIG=%s\n", localcluster.WorkerName(i+1), opts.Worker.Nodes, w.Kubeconfig)
			}
			fmt.Printf("Logs are in %s/*/logs.\nStop them:\n  %s multikueue down --dir %s\n", m.Dir, os.Args[0], *dir)
			return nil
		},
	}
	flags := cmd.Flags()
	flags.IntVar(&opts.Workers, "workers", opts.Workers, "number of worker clusters")
	flags.IntVar(&opts.Worker.Nodes, "nodes", opts.Worker.Nodes, "simulated nodes of each worker")
	flags.StringVar(&opts.Worker.NodeCPU, "node-cpu", opts.Worker.NodeCPU, "allocatable CPU of each worker node")
	flags.StringVar(&opts.Manager.WorkerLostTimeout, "worker-lost-timeout", opts.Manager.WorkerLostTimeout, "how long a job stays on a worker the manager lost contact with before it is dispatched again (Kueue's default is 15m)")
	flags.StringVar(&opts.Manager.GCInterval, "gc-interval", opts.Manager.GCInterval, "how often the manager deletes what it left on its workers (Kueue's default is 1m)")
	flags.StringVar(&opts.BinDir, "bin-dir", opts.BinDir, "directory holding the binaries 'make tools build' puts there")
	return cmd
}

func newMultiKueueDownCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop every program of the manager and the workers, by PID, and remove the directory",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			abs, err := filepath.Abs(*dir)
			if err != nil {
				return err
			}
			m, err := localcluster.LoadMultiKueue(abs)
			if err != nil {
				return err
			}
			if err := m.Down(); err != nil {
				return err
			}
			fmt.Printf("Stopped the manager and %d workers and removed %s.\n", len(m.Workers), abs)
			return nil
		},
	}
}
