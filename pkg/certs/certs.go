// Package certs keeps muster-controller's webhook serving certificate: a CA
// and a certificate it signs, stored in one Secret that every replica
// shares, written to the directory the webhook server reads, and the CA
// injected as the caBundle of the webhook configurations. Each is renewed
// when a third of its lifetime remains.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the Secret, as cert-manager writes them, plus the CA's key.
const (
	CACertKey = "ca.crt"
	caKeyKey  = "ca.key"
	CertKey   = corev1.TLSCertKey
	KeyKey    = corev1.TLSPrivateKeyKey
)

// Lifetimes. Renewal starts when a third is left, so a replica that checks
// hourly always renews long before anything expires.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	certLifetime = 365 * 24 * time.Hour
	checkEvery   = time.Hour
)

// Manager keeps the webhook certificate current. Run Ensure once before the
// webhook server starts, since the server reads the files at start; then
// Start keeps them renewed.
type Manager struct {
	// Client writes the Secret and the webhook configurations; Reader reads
	// them uncached.
	Client client.Client
	Reader client.Reader
	Clock  clock.WithTicker
	// Secret holds the CA and the serving certificate.
	Secret types.NamespacedName
	// Hosts are the DNS names and IP addresses the API server reaches the
	// webhooks at.
	Hosts []string
	// CertDir receives tls.crt and tls.key.
	CertDir string
	// MutatingWebhooks and ValidatingWebhooks name the configurations that
	// get the caBundle.
	MutatingWebhooks   []string
	ValidatingWebhooks []string
}

// NeedLeaderElection is false: every replica serves the webhooks, so every
// replica needs the files.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start renews the certificate while ctx lasts.
func (m *Manager) Start(ctx context.Context) error {
	ticker := m.Clock.NewTicker(checkEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			if err := m.Ensure(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Keeping the webhook certificate current; will try again", "secret", m.Secret)
			}
		}
	}
}

// Ensure makes the Secret hold a valid CA and serving certificate for
// Hosts, writes them to CertDir, and injects the CA bundle.
func (m *Manager) Ensure(ctx context.Context) error {
	secret, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	if err := m.writeFiles(secret); err != nil {
		return err
	}
	return m.injectCABundle(ctx, secret.Data[CACertKey])
}

func (m *Manager) ensureSecret(ctx context.Context) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := m.Reader.Get(ctx, m.Secret, secret)
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.Secret.Namespace, Name: m.Secret.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "muster-controller"}},
			Type: corev1.SecretTypeTLS,
		}
		if secret.Data, err = m.renew(nil); err != nil {
			return nil, err
		}
		if err := m.Client.Create(ctx, secret); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Another replica was first; use its certificate.
				return m.readSecret(ctx)
			}
			return nil, fmt.Errorf("creating the webhook certificate Secret %s: %w", m.Secret, err)
		}
		klog.FromContext(ctx).Info("Created the webhook certificate", "secret", klog.KObj(secret))
		return secret, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the webhook certificate Secret %s: %w", m.Secret, err)
	}
	if m.current(secret.Data) {
		return secret, nil
	}
	if secret.Data, err = m.renew(secret.Data); err != nil {
		return nil, err
	}
	// The update carries the resourceVersion read: if another replica
	// renewed first, this fails and the next check reads its result.
	if err := m.Client.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("renewing the webhook certificate in Secret %s: %w", m.Secret, err)
	}
	klog.FromContext(ctx).Info("Renewed the webhook certificate", "secret", klog.KObj(secret))
	return secret, nil
}

func (m *Manager) readSecret(ctx context.Context) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := m.Reader.Get(ctx, m.Secret, secret); err != nil {
		return nil, fmt.Errorf("reading the webhook certificate Secret %s: %w", m.Secret, err)
	}
	return secret, nil
}

// current reports whether the stored certificate serves Hosts, is signed by
// the stored CA, and neither needs renewing.
func (m *Manager) current(data map[string][]byte) bool {
	ca, _, err := parsePair(data[CACertKey], data[caKeyKey])
	if err != nil || m.due(ca) {
		return false
	}
	cert, _, err := parsePair(data[CertKey], data[KeyKey])
	if err != nil || m.due(cert) || cert.CheckSignatureFrom(ca) != nil {
		return false
	}
	for _, host := range m.Hosts {
		if cert.VerifyHostname(host) != nil {
			return false
		}
	}
	return true
}

// due reports whether a third or less of the certificate's lifetime is
// left.
func (m *Manager) due(cert *x509.Certificate) bool {
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	return m.Clock.Now().After(cert.NotAfter.Add(-lifetime / 3))
}

// renew issues a serving certificate, from the stored CA while it is
// current, else from a new CA. The bundle keeps a replaced CA until it
// expires, so API servers that still trust only the old one keep working
// while the new bundle spreads.
func (m *Manager) renew(old map[string][]byte) (map[string][]byte, error) {
	now := m.Clock.Now()
	ca, caKey, err := parsePair(old[CACertKey], old[caKeyKey])
	bundle := old[CACertKey]
	if err != nil || m.due(ca) {
		var caPEM []byte
		if ca, caKey, caPEM, err = issue(now, caLifetime, nil, nil, nil); err != nil {
			return nil, err
		}
		bundle = caPEM
		for _, previous := range certificates(old[CACertKey]) {
			if now.Before(previous.NotAfter) {
				bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: previous.Raw})...)
			}
		}
	}
	_, key, certPEM, err := issue(now, certLifetime, m.Hosts, ca, caKey)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	caKeyPEM, err := encodeKey(caKey)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		CACertKey: bundle, caKeyKey: caKeyPEM,
		CertKey: certPEM, KeyKey: keyPEM,
	}, nil
}

// issue creates a key and a certificate for it: a CA when parent is nil,
// else a serving certificate for hosts signed by parent.
func issue(now time.Time, lifetime time.Duration, hosts []string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating a serial number: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "muster-controller-webhook-ca"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(lifetime),
	}
	signer, signerKey := template, key
	if parent == nil {
		template.IsCA = true
		template.BasicConstraintsValid = true
		template.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	} else {
		signer, signerKey = parent, parentKey
		template.Subject = pkix.Name{CommonName: hosts[0]}
		template.KeyUsage = x509.KeyUsageDigitalSignature
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, host := range hosts {
			if ip := net.ParseIP(host); ip != nil {
				template.IPAddresses = append(template.IPAddresses, ip)
			} else {
				template.DNSNames = append(template.DNSNames, host)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("signing a certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading back a certificate: %w", err)
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// parsePair reads the first certificate of certPEM and its EC key.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certs := certificates(certPEM)
	if len(certs) == 0 {
		return nil, nil, errors.New("no certificate")
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, errors.New("no key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the key: %w", err)
	}
	if !key.PublicKey.Equal(certs[0].PublicKey) {
		return nil, nil, errors.New("the key does not match the certificate")
	}
	return certs[0], key, nil
}

func certificates(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil && block.Type == "CERTIFICATE" {
			certs = append(certs, cert)
		}
	}
}

// writeFiles replaces tls.crt and tls.key when they differ, each by rename,
// so the webhook server's watcher never reads half a file.
func (m *Manager) writeFiles(secret *corev1.Secret) error {
	if err := os.MkdirAll(m.CertDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", m.CertDir, err)
	}
	for _, key := range []string{KeyKey, CertKey} {
		path := filepath.Join(m.CertDir, key)
		if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, secret.Data[key]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, secret.Data[key], 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("replacing %s: %w", path, err)
		}
	}
	return nil
}

func (m *Manager) injectCABundle(ctx context.Context, bundle []byte) error {
	var configs []client.Object
	for _, name := range m.MutatingWebhooks {
		configs = append(configs, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	for _, name := range m.ValidatingWebhooks {
		configs = append(configs, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	for _, config := range configs {
		if err := m.inject(ctx, config, bundle); err != nil {
			return err
		}
	}
	return nil
}

// inject reads the webhook configuration named by config into it and sets
// the bundle on each of its webhooks.
func (m *Manager) inject(ctx context.Context, config client.Object, bundle []byte) error {
	name := config.GetName()
	if err := m.Reader.Get(ctx, types.NamespacedName{Name: name}, config); err != nil {
		return fmt.Errorf("reading webhook configuration %s: %w", name, err)
	}
	changed := false
	for _, c := range ClientConfigs(config) {
		if !bytes.Equal(c.CABundle, bundle) {
			c.CABundle = slices.Clone(bundle)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := m.Client.Update(ctx, config); err != nil {
		return fmt.Errorf("injecting the CA bundle into webhook configuration %s: %w", name, err)
	}
	klog.FromContext(ctx).Info("Injected the CA bundle", "webhookConfiguration", name)
	return nil
}

// ClientConfigs returns where the API server calls each webhook of a
// Mutating- or ValidatingWebhookConfiguration, for changing in place.
func ClientConfigs(config client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var configs []*admissionregistrationv1.WebhookClientConfig
	switch config := config.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range config.Webhooks {
			configs = append(configs, &config.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range config.Webhooks {
			configs = append(configs, &config.Webhooks[i].ClientConfig)
		}
	}
	return configs
}
