//go:build integration

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// A release published to a real registry (Distribution, TLS from its own
// CA, one htpasswd user) with the credentials `docker login` writes: the
// registry then serves the release's image indexes at their digests and its
// charts byte for byte; without credentials nothing is pushed.
func TestIntegrationPublishPushesTheRelease(t *testing.T) {
	bin := os.Getenv("KUBEBUILDER_ASSETS")
	if bin == "" {
		t.Fatal("KUBEBUILDER_ASSETS must point at bin/ (make test-integration sets it)")
	}
	const version = "0.1.0" // CHANGELOG.md's entry
	dir, plugins := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(plugins, "linux_amd64"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "linux_amd64", Bin("linux")), []byte("plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The images as `make release` adds them before the rest: an index
	// per image in an OCI layout archive (random content: publish reads no
	// more than the layout).
	digests := map[string]string{}
	for _, image := range Images {
		index, err := random.Index(512, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		layoutDir := t.TempDir()
		p, err := layout.Write(layoutDir, empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendIndex(index); err != nil {
			t.Fatal(err)
		}
		tarred, err := exec.Command("tar", "-C", layoutDir, "-cf", filepath.Join(dir, ImageArchive(image, version)), ".").CombinedOutput()
		if err != nil {
			t.Fatalf("tar: %v\n%s", err, tarred)
		}
		digest, err := index.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[image] = digest.String()
	}
	if err := run(version, dir, plugins, filepath.Join(bin, "helm"), "../../charts", "../../CHANGELOG.md",
		"https://example.com/v{version}", time.Unix(1764000000, 0)); err != nil {
		t.Fatal(err)
	}

	host := &localcluster.Cluster{Name: "registry", Dir: t.TempDir()}
	t.Cleanup(func() {
		if err := host.Stop(); err != nil {
			t.Error(err)
		}
	})
	reg, err := host.StartRegistry(t.Context(), bin, filepath.Join(host.Dir, "registry"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	registry := reg.Host + "/jobferry"
	publish := []string{"--dir", dir, "--version", version, "--registry", registry, "--ca-file", reg.CAFile(), "--helm", filepath.Join(bin, "helm")}

	// Without credentials: refused by the registry, nothing there.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("HELM_REGISTRY_CONFIG", filepath.Join(t.TempDir(), "config.json"))
	if err := publishMain(publish); err == nil || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "log in to "+reg.Host+" first") {
		t.Errorf("publishing without credentials: %v, want the registry's refusal", err)
	}

	// With the config.json `docker login` writes.
	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "config.json"), reg.DockerConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", config)
	if err := publishMain(publish); err != nil {
		t.Fatal(err)
	}
	transport, err := registryTransport(reg.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range Images {
		ref, err := name.NewTag(registry + "/" + image + ":" + version)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref, remote.WithTransport(transport), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			t.Fatal(err)
		}
		if desc.Digest.String() != digests[image] || !desc.MediaType.IsIndex() {
			t.Errorf("%s: the registry serves %s %s, want the release's index %s", ref, desc.MediaType, desc.Digest, digests[image])
		}
	}
	for _, chart := range Charts {
		pulled := t.TempDir()
		out, err := exec.Command(filepath.Join(bin, "helm"), "pull", "oci://"+ChartsUnder(registry)+"/"+chart, "--version", version,
			"--ca-file", reg.CAFile(), "--destination", pulled).CombinedOutput()
		if err != nil {
			t.Fatalf("helm pull %s: %v\n%s", chart, err, out)
		}
		got, err := os.ReadFile(filepath.Join(pulled, ChartArchive(chart, version)))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, ChartArchive(chart, version)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("helm pull of %s gave other bytes than the release's %s", chart, ChartArchive(chart, version))
		}
	}
}
