package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// identity is a user the API server knows by a static bearer token.
type identity struct {
	name   string
	groups []string
	token  string
}

// pki holds the credentials of one local cluster, written under dir.
type pki struct {
	caCert        []byte // PEM
	caCertFile    string
	servingCert   string
	servingKey    string
	saPublicKey   string
	saPrivateKey  string
	tokenAuthFile string
	// kubeletClientCert and kubeletClientKey are how the API server
	// proves itself to real nodes' kubelets, for logs, exec and the like.
	kubeletClientCert string
	kubeletClientKey  string
	admin             identity
	controllers       identity
	kubelet           identity
}

// newPKI writes a CA, the API server's serving certificate, the service
// account signing key and the static tokens of the cluster's users.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	p := &pki{
		caCertFile:        filepath.Join(dir, "ca.crt"),
		servingCert:       filepath.Join(dir, "apiserver.crt"),
		servingKey:        filepath.Join(dir, "apiserver.key"),
		saPublicKey:       filepath.Join(dir, "sa.pub"),
		saPrivateKey:      filepath.Join(dir, "sa.key"),
		tokenAuthFile:     filepath.Join(dir, "tokens.csv"),
		kubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		kubeletClientKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),
		admin:             identity{name: "muster-local-admin", groups: []string{"system:masters"}},
		// muster-scheduler and muster-controller run as the
		// ServiceAccounts of manifests/rbac, with tokens requested once
		// those exist. kube-controller-manager and kwok stand in for the cluster's
		// infrastructure, not for anything muster ships.
		controllers: identity{name: "system:kube-controller-manager", groups: []string{"system:masters"}},
		kubelet:     identity{name: "kwok", groups: []string{"system:masters"}},
	}

	caKey, caCert, err := newCA()
	if err != nil {
		return nil, err
	}
	p.caCert = pemEncode("CERTIFICATE", caCert.Raw)
	if err := os.WriteFile(p.caCertFile, p.caCert, 0o600); err != nil {
		return nil, fmt.Errorf("writing CA certificate: %w", err)
	}
	if err := writeServingCert(caKey, caCert, p.servingCert, p.servingKey); err != nil {
		return nil, err
	}
	kubeletClient := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := writeCert(caKey, caCert, kubeletClient, p.kubeletClientCert, p.kubeletClientKey); err != nil {
		return nil, err
	}
	if err := writeServiceAccountKey(p.saPrivateKey, p.saPublicKey); err != nil {
		return nil, err
	}

	var tokens strings.Builder
	for _, id := range []*identity{&p.admin, &p.controllers, &p.kubelet} {
		if id.token, err = randomToken(); err != nil {
			return nil, err
		}
		fmt.Fprintf(&tokens, "%s,%s,%s,%q\n", id.token, id.name, id.name, strings.Join(id.groups, ","))
	}
	if err := os.WriteFile(p.tokenAuthFile, []byte(tokens.String()), 0o600); err != nil {
		return nil, fmt.Errorf("writing token file: %w", err)
	}
	return p, nil
}

func newCA() (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "muster-local-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return key, cert, nil
}

func writeServingCert(caKey *ecdsa.PrivateKey, caCert *x509.Certificate, certFile, keyFile string) error {
	return writeCert(caKey, caCert, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		// Real nodes and their pods reach it on the pod network's bridge.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(apiServerServiceIP), net.ParseIP(nodeGateway)},
	}, certFile, keyFile)
}

// writeCert signs the template, valid for a year, with a new key.
func writeCert(caKey *ecdsa.PrivateKey, caCert *x509.Certificate, template *x509.Certificate, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the key of %s: %w", template.Subject.CommonName, err)
	}
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().AddDate(1, 0, 0)
	template.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing the certificate of %s: %w", template.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding the key of %s: %w", template.Subject.CommonName, err)
	}
	if err := os.WriteFile(certFile, pemEncode("CERTIFICATE", der), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, pemEncode("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", keyFile, err)
	}
	return nil
}

func writeServiceAccountKey(privateFile, publicFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding service account public key: %w", err)
	}
	if err := os.WriteFile(privateFile, pemEncode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), 0o600); err != nil {
		return fmt.Errorf("writing service account key: %w", err)
	}
	if err := os.WriteFile(publicFile, pemEncode("PUBLIC KEY", pub), 0o600); err != nil {
		return fmt.Errorf("writing service account public key: %w", err)
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func pemEncode(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
