package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A multi-platform archive holds one image index, named, whose images are
// each built for the platform the index says.
func TestIndexArchiveHoldsAnImagePerPlatform(t *testing.T) {
	created := time.Unix(1764000000, 0).UTC()
	var images []Image
	for _, arch := range []string{"amd64", "arm64"} {
		images = append(images, Image{
			Entries:    []Entry{{Name: "manager", Mode: 0o755, Data: []byte("binary for " + arch)}},
			Entrypoint: []string{"/manager"}, User: NonRootUser, Created: created,
			Platform: v1.Platform{OS: "linux", Architecture: arch},
		})
	}
	archive := filepath.Join(t.TempDir(), "jobferry-manager.oci.tar")
	const ref = "registry.example/jobferry-manager:0.2.0"
	if err := writeIndexArchive(archive, ref, images); err != nil {
		t.Fatal(err)
	}
	dir := untar(t, archive)
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != types.OCIImageIndex || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("index.json: %+v, want one image index named %s", top.Manifests, ref)
	}
	index, err := outer.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 2 {
		t.Fatalf("the index holds %d images, want 2", len(manifest.Manifests))
	}
	for i, desc := range manifest.Manifests {
		want := images[i].Platform
		if desc.Platform == nil || desc.Platform.OS != want.OS || desc.Platform.Architecture != want.Architecture {
			t.Errorf("image %d: platform %v, want %v", i, desc.Platform, want)
		}
		img, err := index.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != want.OS || cfg.Architecture != want.Architecture || cfg.Config.User != NonRootUser {
			t.Errorf("image %d: config %s/%s as %s, want %s/%s as %s", i, cfg.OS, cfg.Architecture, cfg.Config.User, want.OS, want.Architecture, NonRootUser)
		}
	}

	// The same inputs make the same archive.
	again := filepath.Join(t.TempDir(), "again.oci.tar")
	if err := writeIndexArchive(again, ref, images); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(archive)
	b, _ := os.ReadFile(again)
	if string(a) != string(b) {
		t.Error("two archives of the same images differ")
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := parsePlatforms("linux/amd64, linux/arm64")
	if err != nil || len(got) != 2 || got[1].Architecture != "arm64" {
		t.Errorf("parsePlatforms: %v, %v", got, err)
	}
	for _, bad := range []string{"linux", "linux/", "/amd64", "linux/arm/v7", ""} {
		if _, err := parsePlatforms(bad); err == nil {
			t.Errorf("%q taken for platforms", bad)
		}
	}
}

// untar extracts an archive tarDir wrote into a new directory.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
