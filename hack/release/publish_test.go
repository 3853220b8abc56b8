package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// publish pushes only what SHA256SUMS lists, unchanged.
func TestVerifySums(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"a.tgz": "chart", "b.oci.tar": "image", "unlisted.tgz": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "unlisted.tgz")); err != nil {
		t.Fatal(err)
	}
	sums, err := Sums(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unlisted.tgz"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifySums(dir, []string{"a.tgz", "b.oci.tar"}); err != nil {
		t.Errorf("an unchanged release: %v", err)
	}
	if err := VerifySums(dir, []string{"unlisted.tgz"}); err == nil || !strings.Contains(err.Error(), "is not in SHA256SUMS") {
		t.Errorf("a file SHA256SUMS does not list: %v, want it refused", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.tgz"), []byte("another chart"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifySums(dir, []string{"a.tgz", "b.oci.tar"}); err == nil || !strings.Contains(err.Error(), "a.tgz of "+dir+" changed") {
		t.Errorf("a changed file: %v, want it refused by name", err)
	}
	if err := VerifySums(t.TempDir(), []string{"a.tgz"}); err == nil || !strings.Contains(err.Error(), "make release") {
		t.Errorf("a directory without SHA256SUMS: %v, want it refused as no release", err)
	}
}

func TestValidRegistry(t *testing.T) {
	for registry, ok := range map[string]bool{
		"registry.example.com/jobferry": true,
		"10.250.3.1:41234/jobferry":     true,
		"localhost:5000":                true,
		"https://registry.example.com":  false,
		"registry.example.com/Jobferry": false,
		"registry.example.com/a:tag":    false,
		"":                              false,
	} {
		if err := ValidRegistry(registry); (err == nil) != ok {
			t.Errorf("ValidRegistry(%q) = %v, want ok %v", registry, err, ok)
		}
	}
}

// The commands publish prints install the charts it pushed with the images
// it pushed.
func TestInstallCommands(t *testing.T) {
	out := InstallCommands("registry.example.com/jobferry", "0.2.0")
	for _, want := range []string{
		"helm install jobferry-manager oci://registry.example.com/jobferry/charts/jobferry-manager --version 0.2.0 ",
		"--set image.repository=registry.example.com/jobferry/jobferry-manager\n",
		"helm install jobferry-worker oci://registry.example.com/jobferry/charts/jobferry-worker --version 0.2.0 ",
		"--set image.repository=registry.example.com/jobferry/jobferry-worker ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the install commands lack %q:\n%s", want, out)
		}
	}
}

// A registry answering plain HTTP (as go-containerregistry tries for a
// private or loopback address) never sees a request, credentials or not.
func TestPublishSpeaksHTTPSOnly(t *testing.T) {
	var seen []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusOK)
	}))
	defer plain.Close()
	rt, err := registryTransport("")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, plain.URL+"/v2/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("user", "secret")
	if resp, err := rt.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Errorf("a plain HTTP request went through: %s", resp.Status)
	}
	if len(seen) > 0 {
		t.Errorf("the plain HTTP server saw %q", seen)
	}
}
