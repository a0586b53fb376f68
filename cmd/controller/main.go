// Command muster-controller is muster's companion controller. Its webhooks
// give each grouped pod its DNS name, files, SSH keys and framework
// environment, and refuse invalid PodGroups; its reconcilers keep each
// group's Service, ConfigMap and Secret, and PodGroup status current.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/certs"
	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/version"
	"github.com/muster-dev/muster/pkg/webhooks"
	"github.com/muster-dev/muster/pkg/workloadapi"
)

type options struct {
	kubeconfig              string
	leaderElect             bool
	leaderElectionNamespace string
	metricsAddress          string
	schedulerName           string
	healthAddress           string
	showVersion             bool
	clusterDomain           string
	webhookHost             string
	webhookPort             int
	certDir                 string
	certManagement          string
	certSecret              string
	webhookHosts            []string
	webhookConfiguration    string
	elasticWindow           time.Duration
}

// Ways the webhook certificate is managed.
const (
	certsSelf        = "self"
	certsCertManager = "cert-manager"
)

func main() {
	opts := options{}
	flags := pflag.NewFlagSet("muster-controller", pflag.ExitOnError)
	flags.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means in-cluster configuration or $KUBECONFIG")
	flags.BoolVar(&opts.leaderElect, "leader-elect", true, "elect a leader among replicas, so that one writes at a time")
	flags.StringVar(&opts.leaderElectionNamespace, "leader-election-namespace", "muster-system", "namespace of the leader election lease")
	flags.StringVar(&opts.metricsAddress, "metrics-bind-address", ":8080", "address of the /metrics endpoint; 0 turns it off")
	flags.StringVar(&opts.healthAddress, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	flags.BoolVar(&opts.showVersion, "version", false, "print the version and exit")
	flags.StringVar(&opts.schedulerName, "scheduler-name", topology.SchedulerName, "the schedulerName of muster-scheduler's profile: pods that name it are members of their groups; the webhook configurations' matchConditions must name it too")
	flags.StringVar(&opts.clusterDomain, "cluster-domain", envinject.DefaultClusterDomain, "the cluster's DNS domain, for the DNS search path of MPI workers")
	flags.StringVar(&opts.webhookHost, "webhook-bind-address", "", "address the webhooks listen on; empty means every address")
	flags.IntVar(&opts.webhookPort, "webhook-port", 9443, "port the webhooks listen on")
	flags.StringVar(&opts.certDir, "cert-dir", "/tmp/muster-controller/serving-certs", "directory of the webhooks' tls.crt and tls.key")
	flags.StringVar(&opts.certManagement, "cert-management", certsSelf, `"self": the controller issues, stores and renews the webhook certificate and injects its CA bundle; "cert-manager": cert-manager does, and mounts tls.crt and tls.key in --cert-dir`)
	flags.StringVar(&opts.certSecret, "cert-secret", "muster-system/muster-webhook-cert", "namespace/name of the Secret that holds the self-managed webhook certificate")
	flags.StringSliceVar(&opts.webhookHosts, "webhook-hosts", []string{"muster-controller-webhook.muster-system.svc"}, "DNS names and IP addresses the API server reaches the webhooks at, for the self-managed certificate")
	flags.DurationVar(&opts.elasticWindow, "elastic-window", podgroup.DefaultElasticWindow, "how long after room was taken back from elastic groups for a waiting gang none is taken for it again")
	flags.StringVar(&opts.webhookConfiguration, "webhook-configuration", "muster-controller", "name of the Mutating- and ValidatingWebhookConfiguration that get the self-managed CA bundle")
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
	// Of Services, ConfigMaps and Secrets, only muster's own are cached.
	managed := labels.SelectorFromSet(labels.Set{podgroup.ManagedByLabel: podgroup.ManagedBy})
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.metricsAddress},
		HealthProbeBindAddress:  opts.healthAddress,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "muster-controller",
		LeaderElectionNamespace: opts.leaderElectionNamespace,
		// A replica that stops hands the lease over at once.
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:       {Label: labels.NewSelector().Add(*grouped)},
			&corev1.Service{}:   {Label: managed},
			&corev1.ConfigMap{}: {Label: managed},
			&corev1.Secret{}:    {Label: managed},
		}},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: opts.webhookHost, Port: opts.webhookPort, CertDir: opts.certDir,
			CertName: certs.CertKey, KeyName: certs.KeyKey,
		}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := podgroup.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	groups, err := readGroups(ctx, mgr, opts.schedulerName)
	if err != nil {
		return err
	}
	statusReconciler := &podgroup.StatusReconciler{
		Client:   mgr.GetClient(),
		Groups:   groups,
		Recorder: mgr.GetEventRecorderFor("muster-controller"),
		Clock:    clock.RealClock{},
	}
	if err := statusReconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the PodGroup status reconciler: %w", err)
	}
	resourceReconciler := &podgroup.ResourceReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Groups:   groups,
		Scheme:   scheme,
		Recorder: mgr.GetEventRecorderFor("muster-controller"),
	}
	if err := resourceReconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the PodGroup resource reconciler: %w", err)
	}
	topologyReconciler := &podgroup.TopologyReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("muster-controller"),
	}
	if err := topologyReconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the PodGroup topology reconciler: %w", err)
	}
	jobSetReconciler := &podgroup.JobSetGroupReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("muster-controller"),
	}
	if err := jobSetReconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the JobSet PodGroup reconciler: %w", err)
	}
	kueueReconciler := &podgroup.KueuePodGroupReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("muster-controller"),
	}
	if err := kueueReconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Kueue pod group PodGroup reconciler: %w", err)
	}
	rooms, err := podgroup.NewRoomCache(mgr.GetConfig(), scheme)
	if err != nil {
		return err
	}
	if err := mgr.Add(rooms); err != nil {
		return fmt.Errorf("adding the cache of nodes and bound pods: %w", err)
	}
	elasticScaler := &podgroup.ElasticScaler{
		Client:   mgr.GetClient(),
		Rooms:    rooms,
		Reader:   mgr.GetAPIReader(),
		Groups:   groups,
		Recorder: mgr.GetEventRecorderFor("muster-controller"),
		Clock:    clock.RealClock{},
		Window:   opts.elasticWindow,
	}
	if err := elasticScaler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the elastic scaler: %w", err)
	}

	if err := setupCertificates(ctx, mgr, opts); err != nil {
		return err
	}
	webhooks.Setup(mgr, opts.clusterDomain)

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	// Ready means the webhooks serve: the API server may send pods.
	if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	klog.InfoS("Starting muster-controller", "version", version.Get().String())
	return mgr.Start(ctx)
}

// readGroups makes scheduling.k8s.io's PodGroups the reconcilers' second
// source of groups when the API server serves them. It asks discovery
// once, at start: on a cluster without the API, the default, nothing
// watches it.
func readGroups(ctx context.Context, mgr ctrl.Manager, schedulerName string) (*podgroup.Groups, error) {
	groups := &podgroup.Groups{Client: mgr.GetClient(), SchedulerName: schedulerName}
	discoveryClient, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	served, err := workloadapi.ServesPodGroups(ctx, discovery.ToDiscoveryInterfaceWithContext(discoveryClient))
	if err != nil {
		return nil, err
	}
	if served {
		members, err := podgroup.NewUpstreamMemberCache(ctx, mgr.GetConfig(), cache.Options{
			Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		})
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(members); err != nil {
			return nil, fmt.Errorf("adding the cache of upstream members: %w", err)
		}
		groups.UpstreamMembers = members
	}
	klog.InfoS("Serving groups from PodGroups", "apis", workloadapi.GroupAPIs(served))
	return groups, nil
}

// setupCertificates makes sure the webhook server finds its certificate when
// it starts, since it reads the files then, and keeps it renewed after.
// Under cert-manager there is nothing to do: it mounts the files and
// injects the CA bundle.
func setupCertificates(ctx context.Context, mgr ctrl.Manager, opts options) error {
	switch opts.certManagement {
	case certsCertManager:
		return nil
	case certsSelf:
	default:
		return fmt.Errorf("--cert-management is %q; use %q or %q", opts.certManagement, certsSelf, certsCertManager)
	}
	namespace, name, ok := strings.Cut(opts.certSecret, "/")
	if !ok || namespace == "" || name == "" {
		return fmt.Errorf("--cert-secret is %q; write it as namespace/name", opts.certSecret)
	}
	// The cache does not run yet: the first certificate is read and written
	// directly.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return fmt.Errorf("creating a client for the webhook certificate: %w", err)
	}
	certManager := &certs.Manager{
		Client: direct, Reader: direct, Clock: clock.RealClock{},
		Secret:           types.NamespacedName{Namespace: namespace, Name: name},
		Hosts:            opts.webhookHosts,
		CertDir:          opts.certDir,
		MutatingWebhooks: []string{opts.webhookConfiguration}, ValidatingWebhooks: []string{opts.webhookConfiguration},
	}
	err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Cap: 30 * time.Second, Steps: 12},
		func(ctx context.Context) (bool, error) {
			if err := certManager.Ensure(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Preparing the webhook certificate; will try again")
				return false, nil
			}
			return true, nil
		})
	if err != nil {
		return fmt.Errorf("preparing the webhook certificate in Secret %s: %w", opts.certSecret, err)
	}
	if err := mgr.Add(certManager); err != nil {
		return fmt.Errorf("adding the certificate renewer: %w", err)
	}
	return nil
}
