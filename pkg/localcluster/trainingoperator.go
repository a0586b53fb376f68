package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// What training-operator expects of its surroundings, all its defaults:
// the namespace it runs in when its pod namespace is not set, the Secret
// its certificate rotator keeps its webhook certificate in, its Service,
// the webhook configuration its rotator injects the CA into, and the
// directory it reads its serving certificate from (in a cluster the
// kubelet mounts the Secret there).
const (
	trainingOperatorNamespace = "kubeflow"
	trainingOperatorSecret    = "training-operator-webhook-cert"
	trainingOperatorService   = "training-operator"
	trainingOperatorWebhooks  = "validator.training-operator.kubeflow.org"
	trainingOperatorCertDir   = "/tmp/k8s-webhook-server/serving-certs"
	// trainingOperatorLock is held by the cluster whose training-operator
	// owns trainingOperatorCertDir, so that clusters of test packages
	// running side by side take turns.
	trainingOperatorLock = "/tmp/k8s-webhook-server.lock"
)

// StartTrainingOperator runs training-operator from binDir as its users
// run it with muster, --gang-scheduler-name=muster-scheduler, with its
// CRDs installed and its validating webhooks served on loopback: for the
// given schemes (lower-case kinds, such as pytorchjob), or all of them. Its
// certificate Secret is pre-filled with a certificate for 127.0.0.1, and
// the files its rotator waits for are written where the kubelet would
// mount them; Down removes them.
func (c *Cluster) StartTrainingOperator(ctx context.Context, binDir string, opts TrainingOperatorOptions) error {
	schemes := opts.Schemes
	ports, err := c.reservePorts(3)
	if err != nil {
		return err
	}
	caPEM, secret, err := trainingOperatorCertificates()
	if err != nil {
		return err
	}
	client, err := c.createNamespace(ctx, trainingOperatorNamespace)
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Secrets(trainingOperatorNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the webhook certificate Secret: %w", err)
	}
	if err := c.holdLock(ctx, trainingOperatorLock); err != nil {
		return err
	}
	if err := c.mountSecret(secret, trainingOperatorCertDir); err != nil {
		return err
	}
	args := []string{
		// Any name but volcano means scheduler-plugins' PodGroups.
		"--gang-scheduler-name=" + SchedulerName,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--webhook-server-port=" + strconv.Itoa(ports[2]),
	}
	if opts.PyTorchInitImage != "" {
		args = append(args, "--pytorch-init-container-image="+opts.PyTorchInitImage)
	}
	var crds []string
	for _, scheme := range schemes {
		args = append(args, "--enable-scheme="+scheme)
		crds = append(crds, "kubeflow.org_"+scheme+"s.yaml")
	}
	if len(schemes) == 0 {
		schemes = trainingOperatorSchemes
	}
	webhooks := "https://127.0.0.1:" + strconv.Itoa(ports[2])
	return c.StartOperator(ctx, binDir, Operator{
		Name:   "training-operator",
		Args:   args,
		CRDs:   crds,
		Health: "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/readyz",
		SetUp:  trainingOperatorControllersSetUp(webhooks, caPEM, schemes),
		Webhook: &OperatorWebhook{
			ConfigurationName: trainingOperatorWebhooks,
			URL:               webhooks,
			CABundle:          caPEM,
		},
	})
}

// TrainingOperatorOptions are how training-operator is configured.
type TrainingOperatorOptions struct {
	// Schemes are the job kinds it runs (lower-case, such as pytorchjob):
	// all of them when empty.
	Schemes []string
	// PyTorchInitImage is the image of the init container that makes a
	// PyTorchJob's workers wait for the master's name to resolve
	// (--pytorch-init-container-image), which needs nslookup; empty keeps
	// its default, alpine:3.10, which a cluster without a registry lacks.
	PyTorchInitImage string
}

// trainingOperatorSchemes are the job kinds training-operator runs when
// none is named.
var trainingOperatorSchemes = []string{"pytorchjob", "tfjob", "mpijob", "xgboostjob", "paddlejob", "jaxjob"}

// trainingOperatorControllersSetUp tells whether training-operator has set
// up the controllers of the schemes. It does so only after its readiness
// probe passes, one scheme at a time, each followed by that scheme's
// webhook; a job created before its controller watches PodGroups can wait
// forever, since its update of the PodGroup muster-controller has just
// annotated conflicts and the event that would retry it came too early.
// So a scheme counts as set up once its webhook is served (mpijob has
// none, and is taken on trust).
func trainingOperatorControllersSetUp(webhooks string, caPEM []byte, schemes []string) func(context.Context) bool {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
	}
	return func(ctx context.Context) bool {
		for _, scheme := range schemes {
			if scheme == "mpijob" {
				continue
			}
			if code, ok := statusOf(ctx, client, http.MethodPost, webhooks+"/validate-kubeflow-org-v1-"+scheme); !ok || code == http.StatusNotFound {
				return false
			}
		}
		return true
	}
}

// trainingOperatorCertificates makes the pre-filled certificate Secret
// training-operator's rotator accepts and keeps: a CA with a PKCS#1 key
// whose name is also its DNS name, and a serving certificate for its
// Service name and for 127.0.0.1, where the API server reaches it here;
// both valid past the rotator's look-ahead of 90 days.
func trainingOperatorCertificates() ([]byte, *corev1.Secret, error) {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	const caName, lifetime = "training-operator-ca", 365 * 24 * time.Hour
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName, Organization: []string{"training-operator"}},
		DNSNames:  []string{caName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	dnsName := trainingOperatorService + "." + trainingOperatorNamespace + ".svc"
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime),
		DNSNames: []string{dnsName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: trainingOperatorNamespace, Name: trainingOperatorSecret},
		Data: map[string][]byte{
			"ca.crt":  caPEM,
			"ca.key":  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(caKey)}),
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		},
	}
	return caPEM, secret, nil
}

// holdLock waits until this process holds an exclusive lock on path, or
// ctx ends; Down releases it, as does the end of this process.
func (c *Cluster) holdLock(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		f.Close()
		return fmt.Errorf("waiting for %s, held by another cluster on this machine: %w", path, err)
	}
	c.locks = append(c.locks, f)
	return nil
}

// mountSecret writes the Secret's keys as files into dir, as the kubelet
// mounts a Secret volume; Down removes the directory.
func (c *Cluster) mountSecret(secret *corev1.Secret, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists already: is another training-operator running on this machine?", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	c.Mounted = append(c.Mounted, filepath.Dir(dir))
	if err := c.save(); err != nil {
		return err
	}
	for key, data := range secret.Data {
		if err := os.WriteFile(filepath.Join(dir, key), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", key, err)
		}
	}
	return nil
}
