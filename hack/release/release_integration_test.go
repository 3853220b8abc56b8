//go:build integration

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// A release assembled with the real helm from the tree's charts and
// CHANGELOG.md: every artifact is there, the charts carry the version as
// chart version and appVersion, SHA256SUMS matches each file, and a second
// release of the same inputs is the same bytes.
func TestIntegrationReleaseWritesEveryArtifact(t *testing.T) {
	bin := os.Getenv("KUBEBUILDER_ASSETS")
	if bin == "" {
		t.Fatal("KUBEBUILDER_ASSETS must point at bin/ (make test-integration sets it)")
	}
	const version = "0.1.0" // CHANGELOG.md's entry
	dir, plugins := t.TempDir(), t.TempDir()
	platforms := [][2]string{{"linux", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}
	for _, p := range platforms {
		if err := os.MkdirAll(filepath.Join(plugins, p[0]+"_"+p[1]), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plugins, p[0]+"_"+p[1], Bin(p[0])), []byte("plugin for "+p[0]+"/"+p[1]), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	release := func(dir string) {
		if err := run(version, dir, plugins, filepath.Join(bin, "helm"), "../../charts", "../../CHANGELOG.md",
			"https://example.com/v{version}", time.Unix(1764000000, 0)); err != nil {
			t.Fatal(err)
		}
	}
	release(dir)
	again := t.TempDir()
	release(again)
	first, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	if second, err := os.ReadFile(filepath.Join(again, SumsFile)); err != nil || !bytes.Equal(first, second) {
		t.Errorf("two releases of the same inputs differ:\n%s\n%s", first, second)
	}

	for _, chart := range Charts {
		meta := chartYAML(t, filepath.Join(dir, chart+"-"+version+".tgz"), chart)
		if meta["version"] != version || meta["appVersion"] != version {
			t.Errorf("%s packaged with version %v, appVersion %v; want %s for both", chart, meta["version"], meta["appVersion"], version)
		}
	}
	notes, err := os.ReadFile(filepath.Join(dir, "RELEASE_NOTES.md"))
	if err != nil || !strings.Contains(string(notes), "### Added") {
		t.Errorf("RELEASE_NOTES.md: %v\n%s", err, notes)
	}
	var manifest krewPlugin
	data, err := os.ReadFile(filepath.Join(dir, PluginName+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Spec.Platforms) != len(platforms) {
		t.Errorf("the krew manifest has %d platforms, want %d", len(manifest.Spec.Platforms), len(platforms))
	}
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		listed[name] = sum
	}
	for _, p := range manifest.Spec.Platforms {
		name := p.URI[strings.LastIndex(p.URI, "/")+1:]
		if listed[name] != p.SHA256 {
			t.Errorf("%s: the krew manifest says sha256 %s, SHA256SUMS %s", name, p.SHA256, listed[name])
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(entries)-1 {
		t.Errorf("SHA256SUMS lists %d files, the release has %d besides it", len(listed), len(entries)-1)
	}
	for name, sum := range listed {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file is %x", name, sum, got)
		}
	}
}

// chartYAML reads Chart.yaml from a packaged chart.
func chartYAML(t *testing.T, path, chart string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s has no %s/Chart.yaml: %v", path, chart, err)
		}
		if h.Name != chart+"/Chart.yaml" {
			continue
		}
		raw, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		meta := map[string]any{}
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		return meta
	}
}
