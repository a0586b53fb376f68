package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// StartTrainer runs Kubeflow Trainer's controller manager from binDir as
// its users run it, with its CRDs installed and its webhooks served on
// loopback with its certificate management off. Trainer runs every
// TrainJob as a JobSet, so the JobSet controller is started first unless
// it already runs.
func (c *Cluster) StartTrainer(ctx context.Context, binDir string) error {
	if !slices.ContainsFunc(c.Processes, func(p *Process) bool { return p.Name == "jobset" }) {
		if err := c.StartJobSet(ctx, binDir); err != nil {
			return err
		}
	}
	ports, err := c.reservePorts(2)
	if err != nil {
		return err
	}
	// controller-runtime reads the serving certificate from
	// $TMPDIR/k8s-webhook-server/serving-certs, and Trainer's
	// configuration cannot move it: a TMPDIR of the cluster's own keeps it
	// from the directory training-operator uses under /tmp.
	tmp := filepath.Join(c.Dir, "trainer-tmp")
	caPEM, err := c.servingCertificate(filepath.Join(tmp, "k8s-webhook-server", "serving-certs"))
	if err != nil {
		return err
	}
	config := filepath.Join(c.Dir, "trainer-config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
certManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: %d
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:%d
`, ports[0], ports[1])), 0o600); err != nil {
		return fmt.Errorf("writing the Trainer configuration: %w", err)
	}
	return c.StartOperator(ctx, binDir, Operator{
		Name:   "trainer",
		Args:   []string{"--config=" + config},
		Env:    []string{"TMPDIR=" + tmp},
		Health: "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/readyz",
		Webhook: &OperatorWebhook{
			URL:      "https://127.0.0.1:" + strconv.Itoa(ports[0]),
			CABundle: caPEM,
		},
	})
}
