// Command muster-controller is muster's companion controller. It keeps
// PodGroup status current and tells the members of a group that cannot be
// scheduled yet why they wait.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/version"
)

type options struct {
	kubeconfig              string
	leaderElect             bool
	leaderElectionNamespace string
	metricsAddress          string
	healthAddress           string
	showVersion             bool
}

func main() {
	opts := options{}
	flags := pflag.NewFlagSet("muster-controller", pflag.ExitOnError)
	flags.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means in-cluster configuration or $KUBECONFIG")
	flags.BoolVar(&opts.leaderElect, "leader-elect", true, "elect a leader among replicas, so that one writes at a time")
	flags.StringVar(&opts.leaderElectionNamespace, "leader-election-namespace", "kube-system", "namespace of the leader election lease")
	flags.StringVar(&opts.metricsAddress, "metrics-bind-address", ":8080", "address of the /metrics endpoint; 0 turns it off")
	flags.StringVar(&opts.healthAddress, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	flags.BoolVar(&opts.showVersion, "version", false, "print the version and exit")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	flags.AddGoFlagSet(klogFlags)
	_ = flags.Parse(os.Args[1:])

	if opts.showVersion {
		fmt.Println(version.Get())
		return
	}
	if err := run(opts); err != nil {
		klog.ErrorS(err, "muster-controller stopped")
		os.Exit(1)
	}
}

func run(opts options) error {
	ctrl.SetLogger(klog.NewKlogr())
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: opts.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	// Only grouped pods are cached: the controller never holds the whole
	// cluster's pods in memory.
	grouped, err := labels.NewRequirement(topology.GroupLabel, selection.Exists, nil)
	if err != nil {
		return fmt.Errorf("building the pod selector: %w", err)
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.metricsAddress},
		HealthProbeBindAddress:  opts.healthAddress,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "muster-controller",
		LeaderElectionNamespace: opts.leaderElectionNamespace,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.NewSelector().Add(*grouped)},
		}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	statusReconciler := &podgroup.StatusReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("muster-controller"),
		Clock:    clock.RealClock{},
	}
	if err := statusReconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the PodGroup status reconciler: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	klog.InfoS("Starting muster-controller", "version", version.Get().String())
	return mgr.Start(ctrl.SetupSignalHandler())
}
