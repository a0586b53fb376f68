package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// StartJobSet runs the JobSet controller from binDir as its users run it,
// with its CRD installed and its webhooks, mutating and validating, served
// on loopback: its internal certificate management is off and it serves a
// certificate of the cluster's CA from a directory of the cluster's own.
func (c *Cluster) StartJobSet(ctx context.Context, binDir string) error {
	ports, err := c.reservePorts(2)
	if err != nil {
		return err
	}
	certDir := filepath.Join(c.Dir, "jobset-certs")
	caPEM, err := c.servingCertificate(certDir)
	if err != nil {
		return err
	}
	config := filepath.Join(c.Dir, "jobset-config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
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
`, ports[0], certDir, ports[1])), 0o600); err != nil {
		return fmt.Errorf("writing the JobSet configuration: %w", err)
	}
	return c.StartOperator(ctx, binDir, Operator{
		Name:   "jobset",
		Args:   []string{"--config=" + config},
		Health: "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/readyz",
		Webhook: &OperatorWebhook{
			URL:      "https://127.0.0.1:" + strconv.Itoa(ports[0]),
			CABundle: caPEM,
		},
	})
}

// servingCertificate writes tls.crt and tls.key for 127.0.0.1 into dir,
// signed by a CA of their own, as a controller-runtime webhook server reads
// them, and returns the CA's certificate.
func (c *Cluster) servingCertificate(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	caKey, caCert, err := newCA()
	if err != nil {
		return nil, err
	}
	if err := writeServingCert(caKey, caCert, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err != nil {
		return nil, err
	}
	return pemEncode("CERTIFICATE", caCert.Raw), nil
}
