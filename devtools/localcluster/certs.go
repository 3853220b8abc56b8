package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is long enough for a dev environment left running for weeks.
const certValidity = 365 * 24 * time.Hour

// CA is the certificate authority of one environment: it signs every
// apiserver's serving certificate and every client certificate, so all
// kubeconfigs of the environment embed the same CA data.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is the PEM encoding of Cert, as embedded in kubeconfigs.
	CertPEM []byte
}

// NewCA generates a fresh CA.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	caCert, err := cert.NewSelfSignedCACert(cert.Config{CommonName: name}, key)
	if err != nil {
		return nil, fmt.Errorf("self-signing CA: %w", err)
	}
	return &CA{Cert: caCert, Key: key, CertPEM: encodeCertPEM(caCert)}, nil
}

// LoadCA reads a CA written by WriteFiles.
func LoadCA(dir string) (*CA, error) {
	certs, err := cert.CertsFromFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, fmt.Errorf("reading CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key in %s is not a signing key", dir)
	}
	return &CA{Cert: certs[0], Key: signer, CertPEM: encodeCertPEM(certs[0])}, nil
}

// WriteFiles writes ca.crt and ca.key into dir.
func (ca *CA) WriteFiles(dir string) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(ca.Key)
	if err != nil {
		return fmt.Errorf("encoding CA key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ca.key"), keyPEM, 0o600)
}

// keyPair is a PEM-encoded certificate and its private key.
type keyPair struct {
	CertPEM, KeyPEM []byte
}

func (kp keyPair) write(certPath, keyPath string) error {
	if err := os.WriteFile(certPath, kp.CertPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, kp.KeyPEM, 0o600)
}

// issue signs a certificate for a server (when hosts or ips are given) or a
// client (organizations become groups, as the apiserver reads them).
func (ca *CA) issue(commonName string, organizations []string, hosts []string, ips []net.IP, usage x509.ExtKeyUsage) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key for %s: %w", commonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: organizations},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     hosts,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate for %s: %w", commonName, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return keyPair{}, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{CertPEM: encodeCertPEM(parsed), KeyPEM: keyPEM}, nil
}

// IssueServing signs a serving certificate for loopback addresses, such as a
// webhook server run by a test.
func (ca *CA) IssueServing(commonName string, extraHosts ...string) (certPEM, keyPEM []byte, err error) {
	kp, err := ca.issue(commonName, nil, append([]string{"localhost"}, extraHosts...),
		[]net.IP{net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth)
	return kp.CertPEM, kp.KeyPEM, err
}

// IssueClient signs a client certificate; groups become the user's groups.
func (ca *CA) IssueClient(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	kp, err := ca.issue(user, groups, nil, nil, x509.ExtKeyUsageClientAuth)
	return kp.CertPEM, kp.KeyPEM, err
}

func encodeCertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: c.Raw})
}

// Kubeconfig builds a kubeconfig for server that trusts the CA and
// authenticates with a client certificate: the only kind of kubeconfig the
// product accepts (no file paths, no exec plugins, no skipped TLS checks).
func (ca *CA) Kubeconfig(contextName, server string, client keyPair) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.CertPEM}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	return cfg
}

// WriteClientKubeconfig writes a kubeconfig for server, as user (in
// groups), to path: a process of the environment with an identity of its
// own, told apart from the admin in audit logs and admission policies.
func (ca *CA) WriteClientKubeconfig(path, server, user string, groups ...string) error {
	kp, err := ca.issue(user, groups, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	return writeKubeconfig(ca.Kubeconfig(user, server, kp), path)
}

func writeKubeconfig(cfg *clientcmdapi.Config, path string) error {
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
