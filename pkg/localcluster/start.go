package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/certs"
	"github.com/muster-dev/muster/pkg/topology"
)

// starter brings the programs up one after another.
type starter struct {
	opts    Options
	cluster *Cluster
	binDir  string
	pki     *pki
	ports   ports
	etcdURL string
	client  kubernetes.Interface
}

// ports are the loopback ports the programs listen on.
type ports struct {
	etcdClient, etcdPeer, apiServer, controllerManager, scheduler int
	// defaultScheduler is kube-scheduler's, which runs with real nodes.
	defaultScheduler int
	// controllerWebhook is where the API server calls the webhooks: the
	// one replica, or the front of several.
	controllerWebhook int
	controllers       []controllerPorts
}

// controllerPorts are one muster-controller replica's.
type controllerPorts struct {
	metrics, health, webhook int
}

// tokenLifetime is how long muster's programs' ServiceAccount tokens last:
// longer than any test or demo cluster.
const tokenLifetime = int64(7 * 24 * 60 * 60)

func (s *starter) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

func (s *starter) run(ctx context.Context) error {
	var err error
	if s.pki, err = newPKI(s.path("pki")); err != nil {
		return err
	}
	replicas := max(s.opts.ControllerReplicas, 1)
	free, err := s.cluster.reservePorts(7 + 3*replicas)
	if err != nil {
		return err
	}
	s.ports = ports{
		etcdClient: free[0], etcdPeer: free[1], apiServer: free[2], controllerManager: free[3], scheduler: free[4],
		controllerWebhook: free[5], defaultScheduler: free[6],
	}
	for i := range replicas {
		p := free[7+3*i:]
		s.ports.controllers = append(s.ports.controllers, controllerPorts{metrics: p[0], health: p[1], webhook: p[2]})
	}
	if replicas == 1 {
		// The API server calls the one replica itself.
		s.ports.controllers[0].webhook = s.ports.controllerWebhook
	}
	type step struct {
		what string
		do   func(context.Context) error
	}
	steps := []step{
		{"etcd", s.startEtcd},
		{"kube-apiserver", s.startAPIServer},
		{"PodGroup CRD and RBAC", s.install},
		{"kube-controller-manager", s.startControllerManager},
		{"kwok and nodes", s.startNodes},
		{"muster-scheduler", s.startScheduler},
		{"muster-controller", s.startController},
	}
	if s.opts.RealNodes > 0 {
		// muster runs as pods, installed from its manifests once the
		// nodes, their network and the cluster DNS are up.
		steps = []step{
			{"pod network", s.startPodNetwork},
			{"etcd", s.startEtcd},
			{"kube-apiserver", s.startAPIServer},
			{"kube-controller-manager", s.startControllerManager},
			{"kube-scheduler", s.startDefaultScheduler},
			{"kwok and nodes", s.startNodes},
			{"real nodes", s.startRealNodes},
			{"CoreDNS", s.startClusterDNS},
			{"muster from manifests/", s.installMuster},
		}
	}
	for _, step := range steps {
		began := time.Now()
		if err := step.do(ctx); err != nil {
			return fmt.Errorf("starting %s: %w", step.what, err)
		}
		s.logf("%-24s ready in %s", step.what, time.Since(began).Round(10*time.Millisecond))
	}
	return nil
}

func (s *starter) path(parts ...string) string {
	return filepath.Join(append([]string{s.cluster.Dir}, parts...)...)
}

// start launches a program and records it before anything can fail, so that
// Down always knows about it.
func (s *starter) start(name string, args []string, health string) (*Process, error) {
	return s.startAs(name, name, args, health)
}

// startAs is start for a program whose name is not its binary's: a second
// replica, say.
func (s *starter) startAs(name, binary string, args []string, health string) (*Process, error) {
	p, err := startProcess(name, filepath.Join(s.opts.binaryDir(binary), binary), args, nil, nil, s.path("logs"), s.opts.Detach)
	if err != nil {
		return nil, err
	}
	p.Health = health
	s.cluster.Processes = append(s.cluster.Processes, p)
	return p, s.cluster.save()
}

// waitFor polls cond until it holds, giving up early with the program's log
// when the program exits.
func waitFor(ctx context.Context, p *Process, what string, cond func(context.Context) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
		if !p.Running() {
			return false, fmt.Errorf("%s exited; the end of %s:\n%s", p, p.Log, p.logTail(20))
		}
		return cond(ctx), nil
	})
	if err != nil && p.Running() {
		return fmt.Errorf("waiting for %s: %w; the end of %s:\n%s", what, err, p.Log, p.logTail(20))
	}
	return err
}

func (s *starter) waitHealthy(ctx context.Context, p *Process) error {
	return waitFor(ctx, p, p.Health, func(ctx context.Context) bool { return healthy(ctx, p.Health) })
}

func (s *starter) startEtcd(ctx context.Context) error {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(s.ports.etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(s.ports.etcdPeer)
	p, err := s.start("etcd", []string{
		"--name=muster-local",
		"--data-dir=" + s.path("etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=muster-local=" + peerURL,
		// A throwaway cluster: durability is not worth the fsyncs.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, clientURL+"/health")
	if err != nil {
		return err
	}
	s.etcdURL = clientURL
	return s.waitHealthy(ctx, p)
}

// workloadAPIGates turn on upstream's Workload API, the Job controller's
// use of it, and the topology constraints and shared claims of its
// PodGroups, which the API server drops without
// TopologyAwareWorkloadScheduling and DRAWorkloadResourceClaims: a cluster
// that serves them is one muster must answer clearly (docs/dra.md).
const workloadAPIGates = "--feature-gates=GenericWorkload=true,WorkloadWithJob=true,TopologyAwareWorkloadScheduling=true,DRAWorkloadResourceClaims=true"

func (s *starter) startAPIServer(ctx context.Context) error {
	port := s.ports.apiServer
	address := "127.0.0.1"
	if s.opts.RealNodes > 0 {
		// Where real nodes and their pods reach it.
		address = nodeGateway
	}
	s.cluster.Server = "https://" + address + ":" + strconv.Itoa(port)
	args := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=" + address,
		"--advertise-address=" + address,
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + s.pki.servingCert,
		"--tls-private-key-file=" + s.pki.servingKey,
		"--token-auth-file=" + s.pki.tokenAuthFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.pki.saPublicKey,
		"--service-account-signing-key-file=" + s.pki.saPrivateKey,
		"--service-cluster-ip-range=" + apiServerServiceIP + "/24",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	if s.opts.RealNodes > 0 {
		args = append(args,
			// Webhooks are called at their Services' endpoints: no
			// kube-proxy runs beside the API server.
			"--enable-aggregator-routing=true",
			"--kubelet-preferred-address-types=InternalIP",
			"--kubelet-client-certificate="+s.pki.kubeletClientCert,
			"--kubelet-client-key="+s.pki.kubeletClientKey)
	} else {
		// Endpoints may not name a loopback address, and no pod needs to
		// reach the API server through its Service here.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if s.opts.WorkloadAPI {
		args = append(args, workloadAPIGates, "--runtime-config="+topology.UpstreamPodGroupVersion.String()+"=true")
	}
	if s.opts.AuditMuster {
		audit, err := s.auditFlags()
		if err != nil {
			return err
		}
		args = append(args, audit...)
	}
	p, err := s.start("kube-apiserver", args, s.cluster.Server+"/readyz")
	if err != nil {
		return err
	}
	if err := s.waitHealthy(ctx, p); err != nil {
		return err
	}
	for name, id := range map[string]identity{
		"kubeconfig": s.pki.admin, "controller-manager.kubeconfig": s.pki.controllers, "kwok.kubeconfig": s.pki.kubelet,
		"kubelet.kubeconfig": s.pki.kubelet,
	} {
		if err := s.writeKubeconfig(s.path(name), id); err != nil {
			return err
		}
	}
	config, err := s.cluster.RESTConfig()
	if err != nil {
		return err
	}
	s.client, err = kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	return s.checkKubeVersion()
}

// checkKubeVersion makes sure the API server is the version asked for, so
// that a skew run never passes on the wrong control plane.
func (s *starter) checkKubeVersion() error {
	if s.opts.KubeVersion == "" {
		return nil
	}
	info, err := s.client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server's version: %w", err)
	}
	if info.GitVersion != s.opts.KubeVersion {
		return fmt.Errorf("--kube-version=%s, but the API server of %s reports %s: rebuild it with `make control-plane-next`",
			s.opts.KubeVersion, ControlPlaneDir(s.opts.BinDir, s.opts.KubeVersion), info.GitVersion)
	}
	return nil
}

// auditPolicy logs the metadata of every request muster's programs make,
// once each, when it completes, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  users:
  - system:serviceaccount:muster-system:muster-scheduler
  - system:serviceaccount:muster-system:muster-controller
- level: None
`

func (s *starter) auditFlags() ([]string, error) {
	policy := s.path("audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", policy, err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + AuditLogPath(s.cluster.Dir),
		"--audit-log-format=json",
		// Batched, so that the log costs the API server little.
		"--audit-log-mode=batch",
	}, nil
}

func (s *starter) writeKubeconfig(path string, id identity) error {
	config := clientcmdapi.NewConfig()
	config.Clusters["muster-local"] = &clientcmdapi.Cluster{Server: s.cluster.Server, CertificateAuthorityData: s.pki.caCert}
	config.AuthInfos[id.name] = &clientcmdapi.AuthInfo{Token: id.token}
	config.Contexts["muster-local"] = &clientcmdapi.Context{Cluster: "muster-local", AuthInfo: id.name}
	config.CurrentContext = "muster-local"
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// objectClient is an admin client of any kind the manifests hold.
func (s *starter) objectClient() (client.Client, error) {
	config, err := s.cluster.RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

// install creates, from manifests/, muster's namespace, the PodGroup CRD,
// and the ServiceAccounts and RBAC of muster-scheduler and
// muster-controller, and writes their kubeconfigs with tokens of those
// ServiceAccounts: muster's programs run with exactly the permissions they
// ship with.
func (s *starter) install(ctx context.Context) error {
	config, err := s.cluster.RESTConfig()
	if err != nil {
		return err
	}
	apply, err := s.objectClient()
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(manifests.PodGroupCRD, crd); err != nil {
		return fmt.Errorf("decoding the PodGroup CRD: %w", err)
	}
	crds, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := markApplied(crd); err != nil {
		return err
	}
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
	}
	for _, manifest := range [][]byte{manifests.Namespace, manifests.SchedulerRBAC, manifests.ControllerRBAC} {
		objects, err := manifests.Objects(manifest)
		if err != nil {
			return err
		}
		for _, obj := range objects {
			if err := markApplied(obj); err != nil {
				return err
			}
			if err := apply.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
			}
		}
	}
	for file, account := range map[string]string{"scheduler.kubeconfig": manifests.SchedulerAccount, "controller.kubeconfig": manifests.ControllerAccount} {
		request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(tokenLifetime)}}
		token, err := s.client.CoreV1().ServiceAccounts(manifests.SystemNamespace).CreateToken(ctx, account, request, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", manifests.SystemNamespace, account, err)
		}
		if err := s.writeKubeconfig(s.path(file), identity{name: account, token: token.Status.Token}); err != nil {
			return err
		}
	}
	// Ready means served: the typed client that muster's plugins use can
	// list PodGroups.
	podGroups, err := schedulingclient.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating PodGroup client: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := podGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// startControllerManager runs the controllers a real cluster has: service
// accounts and their tokens, Jobs, garbage collection, namespace deletion.
func (s *starter) startControllerManager(ctx context.Context) error {
	port := s.ports.controllerManager
	args := []string{
		"--kubeconfig=" + s.path("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--leader-elect=false",
		"--service-account-private-key-file=" + s.pki.saPrivateKey,
		"--root-ca-file=" + s.pki.caCertFile,
		"--use-service-account-credentials=false",
		"--v=1",
	}
	if s.opts.WorkloadAPI {
		args = append(args, workloadAPIGates)
	}
	if s.opts.StaticNodes {
		args = append(args, "--node-monitor-grace-period=24h")
	}
	p, err := s.start("kube-controller-manager", args, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz")
	if err != nil {
		return err
	}
	if err := s.waitHealthy(ctx, p); err != nil {
		return err
	}
	// Pods are refused until their namespace's default ServiceAccount
	// exists, so the cluster is not ready before the first one is.
	return waitFor(ctx, p, "the default ServiceAccount", func(ctx context.Context) bool {
		_, err := s.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
}

// simulatedNodeAnnotation marks the nodes kwok plays the kubelet for.
const simulatedNodeAnnotation = "kwok.x-k8s.io/node"

func (s *starter) startNodes(ctx context.Context) error {
	if s.opts.Nodes == 0 {
		return nil
	}
	config := s.path("kwok.yaml")
	if err := os.WriteFile(config, kwokStages, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", config, err)
	}
	p, err := s.start("kwok", []string{
		"--kubeconfig=" + s.path("kwok.kubeconfig"),
		"--config=" + config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + simulatedNodeAnnotation + "=fake",
		"--node-ip=127.0.0.1",
		// Pod IPs are only written into pod status; nothing connects to them.
		"--cidr=10.244.0.1/16",
	}, "")
	if err != nil {
		return err
	}
	for i := range s.opts.Nodes {
		node := simulatedNode(fmt.Sprintf("kwok-node-%d", i), s.opts)
		maps.Copy(node.Labels, s.opts.topologyLabels(i))
		created, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		if s.opts.NodeDevices > 0 {
			if err := PublishDevices(ctx, s.client, created, s.opts.NodeDevices); err != nil {
				return err
			}
		}
	}
	return waitFor(ctx, p, fmt.Sprintf("%d Ready nodes", s.opts.Nodes), func(ctx context.Context) bool {
		nodes, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == s.opts.Nodes
	})
}

// RackLabel and BlockLabel are the node labels the simulated nodes' racks
// and blocks are under (Options.NodesPerRack): the keys a gang names to
// stay in one (muster.dev/topology-required).
const (
	RackLabel  = topology.RackLabel
	BlockLabel = topology.BlockLabel
)

// topologyLabels are the rack and block labels of the i-th node.
func (o Options) topologyLabels(i int) map[string]string {
	labels := map[string]string{}
	if o.NodesPerRack > 0 {
		rack := i / o.NodesPerRack
		labels[RackLabel] = fmt.Sprintf("rack-%d", rack)
		if o.RacksPerBlock > 0 {
			labels[BlockLabel] = fmt.Sprintf("block-%d", rack/o.RacksPerBlock)
		}
	}
	return labels
}

func simulatedNode(name string, opts Options) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(opts.NodeCPU),
		corev1.ResourceMemory: resource.MustParse(opts.NodeMemory),
		corev1.ResourcePods:   resource.MustParse("110"),
		// Operators' init containers ask for it: the MPIJob v1 launcher's
		// kubectl delivery requests 5Gi.
		corev1.ResourceEphemeralStorage: resource.MustParse(SimulatedNodeEphemeralStorage),
	}
	if opts.NodeGPUs > 0 {
		resources["nvidia.com/gpu"] = *resource.NewQuantity(int64(opts.NodeGPUs), resource.DecimalSI)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname: name,
				corev1.LabelOSStable: "linux",
				"type":               "kwok",
			},
			Annotations: map[string]string{simulatedNodeAnnotation: "fake"},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Phase:       corev1.NodeRunning,
		},
	}
}

func (s *starter) startScheduler(ctx context.Context) error {
	config, err := s.schedulerConfig()
	if err != nil {
		return err
	}
	gates := s.opts.SchedulerFeatureGates
	if gates == "" {
		if gates, err = manifests.SchedulerFeatureGates(); err != nil {
			return err
		}
	}
	port := s.ports.scheduler
	p, err := s.start("muster-scheduler", []string{
		"--config=" + config,
		// The feature gates the Deployment sets, unless replaced.
		"--feature-gates=" + gates,
		// /metrics is served to callers the API server authorizes, as in a
		// real cluster.
		"--authentication-kubeconfig=" + s.path("scheduler.kubeconfig"),
		"--authorization-kubeconfig=" + s.path("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=2",
	}, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz")
	if err != nil {
		return err
	}
	return s.waitHealthy(ctx, p)
}

// startController registers muster-controller's webhooks at a loopback URL
// and runs its replicas with a certificate for 127.0.0.1, which they issue
// and inject themselves. Several replicas elect a leader for their
// reconcilers, as in a cluster, and each serves the webhooks behind a
// front (Front) that stands in for their Service.
func (s *starter) startController(ctx context.Context) error {
	webhookURL := "https://127.0.0.1:" + strconv.Itoa(s.ports.controllerWebhook)
	if err := s.registerWebhooks(ctx, webhookURL); err != nil {
		return err
	}
	if len(s.ports.controllers) > 1 {
		args := []string{"front", "--listen=127.0.0.1:" + strconv.Itoa(s.ports.controllerWebhook)}
		for _, p := range s.ports.controllers {
			args = append(args, fmt.Sprintf("--backend=127.0.0.1:%d=http://127.0.0.1:%d/readyz", p.webhook, p.health))
		}
		if _, err := s.startAs(ControllerFront, "muster-local", args, ""); err != nil {
			return err
		}
	}
	for i, ports := range s.ports.controllers {
		args := []string{
			"--kubeconfig=" + s.path("controller.kubeconfig"),
			"--leader-elect=true",
			"--leader-election-namespace=" + manifests.SystemNamespace,
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports.metrics),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports.health),
			"--webhook-bind-address=127.0.0.1",
			"--webhook-port=" + strconv.Itoa(ports.webhook),
			"--webhook-hosts=127.0.0.1",
			"--cert-dir=" + s.path(fmt.Sprintf("controller-certs-%d", i)),
			"--cert-secret=" + manifests.SystemNamespace + "/" + manifests.WebhookCertSecretName,
			"--v=2",
		}
		if s.opts.ElasticWindow > 0 {
			args = append(args, "--elastic-window="+s.opts.ElasticWindow.String())
		}
		p, err := s.startAs(ControllerReplica(i), "muster-controller", args, "http://127.0.0.1:"+strconv.Itoa(ports.health)+"/readyz")
		if err != nil {
			return err
		}
		p.Metrics = "http://127.0.0.1:" + strconv.Itoa(ports.metrics) + "/metrics"
		if err := s.waitHealthy(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// ControllerFront is the process name of the front of several
// muster-controller replicas.
const ControllerFront = "muster-controller-front"

// ControllerReplica is the process name of muster-controller's i-th
// replica: muster-controller, then muster-controller-1, and so on.
func ControllerReplica(i int) string {
	if i == 0 {
		return "muster-controller"
	}
	return fmt.Sprintf("muster-controller-%d", i)
}

// registerWebhooks creates the webhook configurations of manifests/, each
// pointed at url plus its service path instead of at a Service, and the
// admission policy beside them.
func (s *starter) registerWebhooks(ctx context.Context, url string) error {
	configs, err := manifests.Objects(manifests.WebhookConfigurations)
	if err != nil {
		return err
	}
	for _, config := range configs {
		for _, c := range certs.ClientConfigs(config) {
			pointAt(c, url)
		}
		if err := markApplied(config); err != nil {
			return err
		}
		switch config := config.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			_, err = s.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{})
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			_, err = s.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{})
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			_, err = s.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, config, metav1.CreateOptions{})
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			_, err = s.client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, config, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("registering muster's admission: %w", err)
		}
	}
	return nil
}

// markApplied records the object as `kubectl apply` would have created it,
// so that a later `kubectl apply -k manifests/` patches the cluster's
// objects cleanly: for instance it replaces a webhook's loopback URL by the
// Service of the manifests, rather than adding the Service beside it.
func markApplied(obj metav1.Object) error {
	applied, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[corev1.LastAppliedConfigAnnotation] = string(applied) + "\n"
	obj.SetAnnotations(annotations)
	return nil
}

func pointAt(config *admissionregistrationv1.WebhookClientConfig, url string) {
	config.URL = ptr.To(url + ptr.Deref(config.Service.Path, ""))
	config.Service = nil
}

// schedulerConfig writes the scheduler's configuration with its client
// pointed at this cluster; nothing else of the given configuration changes.
func (s *starter) schedulerConfig() (string, error) {
	source := s.opts.SchedulerConfig
	if len(source) == 0 {
		source = manifests.SchedulerConfig
	}
	config := map[string]any{}
	if err := yaml.Unmarshal(source, &config); err != nil {
		return "", fmt.Errorf("decoding the scheduler configuration: %w", err)
	}
	connection, _ := config["clientConnection"].(map[string]any)
	if connection == nil {
		connection = map[string]any{}
	}
	connection["kubeconfig"] = s.path("scheduler.kubeconfig")
	config["clientConnection"] = connection
	data, err := yaml.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("encoding the scheduler configuration: %w", err)
	}
	path := s.path("scheduler-config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
