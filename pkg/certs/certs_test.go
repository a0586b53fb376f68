package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var secretKey = types.NamespacedName{Namespace: "muster-system", Name: "muster-webhook-cert"}

func newManager(t *testing.T, hosts ...string) (*Manager, client.Client, *testingclock.FakeClock) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "muster-controller"},
			Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "pods.muster-controller.muster.dev"}},
		},
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "muster-controller"},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "podgroups.muster-controller.muster.dev"}, {Name: "other.muster.dev"}},
		},
	).Build()
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	return &Manager{
		Client: c, Reader: c, Clock: clock, Secret: secretKey, Hosts: hosts, CertDir: t.TempDir(),
		MutatingWebhooks: []string{"muster-controller"}, ValidatingWebhooks: []string{"muster-controller"},
	}, c, clock
}

// served is what the webhook server would load from CertDir.
func served(t *testing.T, m *Manager) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(m.CertDir, CertKey), filepath.Join(m.CertDir, KeyKey))
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	return cert
}

// verify checks the served certificate the way the API server does: against
// the caBundle of every webhook, for the host it dials, at the time given.
func verify(t *testing.T, m *Manager, c client.Client, host string, at time.Time) {
	t.Helper()
	cert := served(t, m)
	var bundles [][]byte
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: "muster-controller"}, mutating))
	for _, w := range mutating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: "muster-controller"}, validating))
	for _, w := range validating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	require.Len(t, bundles, 3)
	for _, bundle := range bundles {
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM(bundle))
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: at})
		assert.NoError(t, err)
	}
}

func secret(t *testing.T, c client.Client) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, c.Get(context.Background(), secretKey, s))
	return s
}

func TestEnsureIssuesAndInjects(t *testing.T) {
	m, c, clock := newManager(t, "muster-controller-webhook.muster-system.svc", "127.0.0.1")
	require.NoError(t, m.Ensure(context.Background()))
	verify(t, m, c, "muster-controller-webhook.muster-system.svc", clock.Now())
	verify(t, m, c, "127.0.0.1", clock.Now())
	assert.Equal(t, corev1.SecretTypeTLS, secret(t, c).Type)

	info, err := os.Stat(filepath.Join(m.CertDir, KeyKey))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the key is readable by its owner only")
}

func TestEnsureKeepsACurrentCertificate(t *testing.T) {
	m, c, clock := newManager(t, "webhook.muster-system.svc")
	require.NoError(t, m.Ensure(context.Background()))
	first := secret(t, c)

	clock.Step(200 * 24 * time.Hour)
	require.NoError(t, m.Ensure(context.Background()), "a restart or an hourly check")
	assert.Equal(t, first.ResourceVersion, secret(t, c).ResourceVersion, "nothing was rewritten")
}

func TestEnsureRenewsBeforeExpiry(t *testing.T) {
	m, c, clock := newManager(t, "webhook.muster-system.svc")
	require.NoError(t, m.Ensure(context.Background()))
	first := secret(t, c)
	firstCert := served(t, m)

	clock.Step(250 * 24 * time.Hour) // under a third of the year left
	require.NoError(t, m.Ensure(context.Background()))
	renewed := secret(t, c)
	assert.NotEqual(t, firstCert.SerialNumber, served(t, m).SerialNumber, "the serving certificate was renewed")
	assert.Equal(t, first.Data[CACertKey], renewed.Data[CACertKey], "by the same CA")
	verify(t, m, c, "webhook.muster-system.svc", firstCert.NotAfter.Add(time.Hour))
}

func TestEnsureRotatesTheCAKeepingTheOldOneInTheBundle(t *testing.T) {
	m, c, clock := newManager(t, "webhook.muster-system.svc")
	require.NoError(t, m.Ensure(context.Background()))
	oldCA := certificates(secret(t, c).Data[CACertKey])
	require.Len(t, oldCA, 1)

	clock.Step(7 * 365 * 24 * time.Hour) // under a third of ten years left
	require.NoError(t, m.Ensure(context.Background()))
	bundle := certificates(secret(t, c).Data[CACertKey])
	require.Len(t, bundle, 2, "the new CA, then the old one until it expires")
	assert.NotEqual(t, oldCA[0].SerialNumber, bundle[0].SerialNumber)
	assert.Equal(t, oldCA[0].SerialNumber, bundle[1].SerialNumber)
	verify(t, m, c, "webhook.muster-system.svc", clock.Now())
}

func TestEnsureReissuesForNewHosts(t *testing.T) {
	m, c, clock := newManager(t, "webhook.muster-system.svc")
	require.NoError(t, m.Ensure(context.Background()))
	m.Hosts = []string{"webhook.muster-system.svc", "webhook.muster-system.svc.cluster.local"}
	require.NoError(t, m.Ensure(context.Background()))
	verify(t, m, c, "webhook.muster-system.svc.cluster.local", clock.Now())
}

func TestEnsureAdoptsAnotherReplicasCertificate(t *testing.T) {
	m, _, _ := newManager(t, "webhook.muster-system.svc")
	require.NoError(t, m.Ensure(context.Background()))
	other := *m
	other.CertDir = t.TempDir()
	require.NoError(t, other.Ensure(context.Background()))
	assert.Equal(t, served(t, m).SerialNumber, served(t, &other).SerialNumber, "both replicas serve the one stored certificate")
}
