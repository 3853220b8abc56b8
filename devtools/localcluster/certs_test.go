package localcluster

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"
)

func TestCertificatesChainToTheCA(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)

	servingPEM, servingKey, err := ca.IssueServing("webhook")
	if err != nil {
		t.Fatal(err)
	}
	serving := parse(t, servingPEM, servingKey)
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify for 127.0.0.1: %v", err)
	}
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("serving certificate is accepted for client authentication")
	}

	clientPEM, clientKey, err := ca.IssueClient("alice", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	client := parse(t, clientPEM, clientKey)
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	if client.Subject.CommonName != "alice" || !slices.Equal(client.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("client subject %v, want CN alice in group system:masters", client.Subject)
	}

	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AppendCertsFromPEM(other.CertPEM)
	if _, err := client.Verify(x509.VerifyOptions{Roots: otherRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("certificate verifies against another environment's CA")
	}
}

func TestCARoundTripsThroughFiles(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := loaded.IssueClient("bob")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	if _, err := parse(t, certPEM, keyPEM).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("certificate issued by the reloaded CA does not verify against the original: %v", err)
	}
}

// Kubeconfigs must be self-contained: the product rejects file paths, exec
// plugins and skipped TLS verification.
func TestKubeconfigIsSelfContained(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClient("admin")
	if err != nil {
		t.Fatal(err)
	}
	cfg := ca.Kubeconfig("w1", "https://127.0.0.1:6443", keyPair{CertPEM: certPEM, KeyPEM: keyPEM})
	cluster, user := cfg.Clusters["w1"], cfg.AuthInfos["w1"]
	switch {
	case cfg.CurrentContext != "w1":
		t.Errorf("current context %q", cfg.CurrentContext)
	case cluster.InsecureSkipTLSVerify || cluster.CertificateAuthority != "" || len(cluster.CertificateAuthorityData) == 0:
		t.Errorf("cluster entry not self-contained: %+v", cluster)
	case user.Exec != nil || user.ClientCertificate != "" || user.ClientKey != "" || user.TokenFile != "" || len(user.ClientCertificateData) == 0:
		t.Errorf("user entry not self-contained: %+v", user)
	}
}

func parse(t *testing.T, certPEM, keyPEM []byte) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}
