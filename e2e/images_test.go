//go:build e2e

package e2e

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"sigs.k8s.io/yaml"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// `make images` (run by `make test-e2e`) writes an OCI archive per binary:
// opened with go-containerregistry, each holds one image, named as the
// chart's default image reference, running its static binary as uid 65532
// with the OCI version and revision labels; the binary taken out of the
// layer runs (--help).
func TestImagesRunTheirBinaries(t *testing.T) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, binary := range []string{"manager", "worker"} {
		t.Run(binary, func(t *testing.T) {
			archive := filepath.Join(root, "_output", "images", "jobferry-"+binary+".oci.tar")
			dir := t.TempDir()
			if err := untar(archive, dir); err != nil {
				t.Fatalf("%v (run `make images`)", err)
			}
			index, err := layout.ImageIndexFromPath(dir)
			if err != nil {
				t.Fatal(err)
			}
			manifest, err := index.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if len(manifest.Manifests) != 1 {
				t.Fatalf("the archive holds %d images, want 1", len(manifest.Manifests))
			}
			desc := manifest.Manifests[0]
			ref := desc.Annotations["org.opencontainers.image.ref.name"]
			if want := chartImage(t, root, "jobferry-"+binary); ref != want {
				t.Errorf("image named %q, but the chart's default image is %q", ref, want)
			}
			img, err := index.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cfg.Config
			if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/"+binary || cfg.OS != "linux" {
				t.Errorf("config: user %q, entrypoint %q, os %s; want 65532:65532, [/%s], linux", c.User, c.Entrypoint, cfg.OS, binary)
			}
			version := strings.TrimPrefix(ref[strings.LastIndex(ref, ":")+1:], "v")
			for label, want := range map[string]string{
				"org.opencontainers.image.version": version, "org.opencontainers.image.source": "https://github.com/jobferry/jobferry",
			} {
				if c.Labels[label] != want {
					t.Errorf("label %s = %q, want %q", label, c.Labels[label], want)
				}
			}
			if rev := c.Labels["org.opencontainers.image.revision"]; len(rev) != 40 {
				t.Errorf("label org.opencontainers.image.revision = %q, want a commit", rev)
			}

			// The filesystem: the binary and /tmp, nothing else.
			fsDir := t.TempDir()
			rc := mutate.Extract(img)
			defer rc.Close()
			names, err := untarReader(rc, fsDir)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(names, " ") != "tmp "+binary {
				t.Errorf("image files %v, want [tmp %s]", names, binary)
			}
			out, err := exec.CommandContext(t.Context(), filepath.Join(fsDir, binary), "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --help from the image: %v\n%s", binary, err, out)
			}
			if !strings.Contains(string(out), "-metrics-bind-address") {
				t.Errorf("%s --help printed no flags:\n%s", binary, out)
			}
			t.Logf("%s: %s, labels %v, --help ok", ref, desc.Digest, c.Labels)
		})
	}
}

// chartImage is the image reference a chart deploys by default.
func chartImage(t *testing.T, root, chart string) string {
	t.Helper()
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	readYAML(t, filepath.Join(root, "charts", chart, "Chart.yaml"), &meta)
	readYAML(t, filepath.Join(root, "charts", chart, "values.yaml"), &values)
	tag := values.Image.Tag
	if tag == "" {
		tag = meta.AppVersion
	}
	return values.Image.Repository + ":" + tag
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = untarReader(f, dir)
	return err
}

// untarReader writes the regular files and directories of a tar stream
// under dir and returns their names in order.
func untarReader(r io.Reader, dir string) ([]string, error) {
	tr := tar.NewReader(r)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			return nil, errors.New("tar entry outside the directory: " + h.Name)
		}
		names = append(names, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755)
			if err != nil {
				return nil, err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return nil, err
			}
			if err := f.Close(); err != nil {
				return nil, err
			}
		}
	}
}
