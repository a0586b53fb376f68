package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KueueNamespace is Kueue's own namespace, kept out of its pod webhooks as
// its kustomization keeps it.
const KueueNamespace = "kueue-system"

// KueueFrameworks are the integrations Kueue runs here: every kind of job
// muster groups. Kueue sets up each one once its API is served, so an
// operator may be started after Kueue.
var KueueFrameworks = []string{
	"batch/job",
	"pod",
	"jobset.x-k8s.io/jobset",
	"kubeflow.org/mpijob",
	"kubeflow.org/pytorchjob",
	"kubeflow.org/tfjob",
	"kubeflow.org/paddlejob",
	"kubeflow.org/xgboostjob",
	"kubeflow.org/jaxjob",
	"trainer.kubeflow.org/trainjob",
}

// KueueOptions are what a cluster's Kueue is configured with beyond its
// defaults.
type KueueOptions struct {
	// WaitForPodsReady, when set, is Kueue's waitForPodsReady timeout: a
	// workload admitted whose pods are not all Ready in time is evicted
	// and queued again.
	WaitForPodsReady string
	// MultiKueue, when set, makes this Kueue a MultiKueue manager
	// (multikueue.go).
	MultiKueue *MultiKueueManager
	// Frameworks are the integrations on; KueueFrameworks when empty.
	Frameworks []string
}

// MultiKueueManager configures a Kueue that dispatches workloads to worker
// clusters.
type MultiKueueManager struct {
	// WorkerLostTimeout is how long a workload stays on a worker the
	// manager has lost contact with before it is queued again and
	// dispatched anew (Kueue's default is 15 minutes).
	WorkerLostTimeout string
	// GCInterval is how often the manager deletes, from its workers, the
	// objects it made there whose workload it no longer has there.
	GCInterval string
}

// StartKueue runs Kueue from binDir as its users run it in front of a
// scheduler: its CRDs installed, its webhooks served on loopback with its
// internal certificate management off, the integrations of KueueFrameworks
// on, and jobs managed only when they name a LocalQueue
// (kueue.x-k8s.io/queue-name). Its visibility server, an aggregated API
// bound on every address, is off.
//
// With its internal certificates off, Kueue reads its metrics server's
// certificate from /etc/kueue/metrics/certs, a path it does not let be
// changed, where its users mount one into its pod. Here it runs in a mount
// namespace of its own (unshare) that overlays /etc with that directory,
// so nothing is written to the machine's /etc.
func (c *Cluster) StartKueue(ctx context.Context, binDir string, opts KueueOptions) error {
	if _, err := c.createNamespace(ctx, KueueNamespace); err != nil {
		return err
	}
	ports, err := c.reservePorts(2)
	if err != nil {
		return err
	}
	certDir := filepath.Join(c.Dir, "kueue-certs")
	caPEM, err := c.servingCertificate(certDir)
	if err != nil {
		return err
	}
	wrapper, err := c.kueueMetricsCerts(certDir)
	if err != nil {
		return err
	}
	waitForPodsReady := ""
	if opts.WaitForPodsReady != "" {
		waitForPodsReady = fmt.Sprintf(`waitForPodsReady:
  timeout: %s
  blockAdmission: false
`, opts.WaitForPodsReady)
	}
	multiKueue := ""
	if opts.MultiKueue != nil {
		multiKueue = fmt.Sprintf(`multiKueue:
  workerLostTimeout: %s
  gcInterval: %s
`, opts.MultiKueue.WorkerLostTimeout, opts.MultiKueue.GCInterval)
	}
	frameworks := opts.Frameworks
	if len(frameworks) == 0 {
		frameworks = KueueFrameworks
	}
	config := filepath.Join(c.Dir, "kueue-config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
manageJobsWithoutQueueName: false
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:%d
%s%sintegrations:
  frameworks: [%s]
`, KueueNamespace, ports[0], certDir, ports[1], waitForPodsReady, multiKueue, strings.Join(frameworks, ", "))), 0o600); err != nil {
		return fmt.Errorf("writing the Kueue configuration: %w", err)
	}
	notSystem := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", KueueNamespace},
	}}}
	selectors := map[string]*metav1.LabelSelector{}
	for _, name := range []string{"mpod.kb.io", "vpod.kb.io", "mdeployment.kb.io", "vdeployment.kb.io", "mstatefulset.kb.io", "vstatefulset.kb.io"} {
		selectors[name] = notSystem
	}
	return c.StartOperator(ctx, binDir, Operator{
		Name:    "kueue",
		Args:    []string{"--config=" + config, "--feature-gates=VisibilityOnDemand=false"},
		Wrapper: wrapper,
		Health:  "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/readyz",
		Webhook: &OperatorWebhook{
			URL:                "https://127.0.0.1:" + strconv.Itoa(ports[0]),
			CABundle:           caPEM,
			NamespaceSelectors: selectors,
		},
	})
}

// kueueMetricsCertDir is where Kueue reads its metrics server's certificate
// when its internal certificate management is off.
const kueueMetricsCertDir = "kueue/metrics/certs"

// kueueMetricsCerts gives Kueue the serving certificate in certDir at
// /etc/kueue/metrics/certs: it returns a wrapper that runs it in a mount
// namespace of its own whose /etc is the machine's, overlaid with a
// directory of the cluster's that holds the certificate. Without root, the
// namespace maps the caller to root in a user namespace of its own.
func (c *Cluster) kueueMetricsCerts(certDir string) ([]string, error) {
	upper := filepath.Join(c.Dir, "kueue-etc")
	work := filepath.Join(c.Dir, "kueue-etc-work")
	certs := filepath.Join(upper, kueueMetricsCertDir)
	for _, dir := range []string{certs, work} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	for _, file := range []string{"tls.crt", "tls.key"} {
		data, err := os.ReadFile(filepath.Join(certDir, file))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(certs, file), data, 0o600); err != nil {
			return nil, err
		}
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("Kueue needs unshare (util-linux) to find its metrics certificate at /etc/%s: %w", kueueMetricsCertDir, err)
	}
	wrapper := []string{unshare, "--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		wrapper = append(wrapper, "--map-root-user")
	}
	// sh runs the mount, then execs the program ($0) with its arguments.
	script := fmt.Sprintf(`mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc && exec "$0" "$@"`, upper, work)
	return append(wrapper, "sh", "-c", script), nil
}
