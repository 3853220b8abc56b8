package main

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Images are the images of a release: <name>_<version>.oci.tar in its
// directory, pushed as REGISTRY/<name>:<version>.
var Images = []string{"jobferry-manager", "jobferry-worker"}

// ImageArchive is the file name of an image's archive in a release.
func ImageArchive(image, version string) string { return image + "_" + version + ".oci.tar" }

// ChartArchive is the file name of a chart's package in a release.
func ChartArchive(chart, version string) string { return chart + "-" + version + ".tgz" }

// ChartsUnder is where publish pushes the charts of a registry: a path of
// their own, so a chart and the image of the same name never share a
// repository.
func ChartsUnder(registry string) string { return registry + "/charts" }

// publishMain pushes a release made by `make release` to a registry:
//
//	go run ./hack/release publish --dir _output/release/0.2.0 --version 0.2.0 \
//	    --registry registry.example.com/jobferry [--ca-file CA.crt] [--helm bin/helm]
//
// The images go to REGISTRY/<image>:<version> as the multi-platform indexes
// of the release, the charts to oci://REGISTRY/charts; credentials are the
// ones the usual tools keep (docker login's config.json, podman's auth.json,
// credential helpers; helm reads those too besides its own registry login).
// What it pushes must be what SHA256SUMS lists: a release changed since it
// was made is refused before anything is pushed.
func publishMain(args []string) error {
	flags := flag.NewFlagSet("publish", flag.ContinueOnError)
	dir := flags.String("dir", "", "the release directory `make release` wrote")
	version := flags.String("version", "", "the release's version")
	registry := flags.String("registry", "", "where to push: a registry host and a path under it (registry.example.com/jobferry)")
	caFile := flags.String("ca-file", "", "PEM certificates to verify the registry with, besides the system's")
	helm := flags.String("helm", "bin/helm", "the helm binary that pushes the charts")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *version == "" || *registry == "" {
		return errors.New("publish: --dir, --version and --registry are required")
	}
	if err := ValidRegistry(*registry); err != nil {
		return err
	}
	var files []string
	for _, image := range Images {
		files = append(files, ImageArchive(image, *version))
	}
	for _, chart := range Charts {
		files = append(files, ChartArchive(chart, *version))
	}
	if err := VerifySums(*dir, files); err != nil {
		return err
	}
	transport, err := registryTransport(*caFile)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, image := range Images {
		ref, digest, err := pushIndex(ctx, filepath.Join(*dir, ImageArchive(image, *version)), *registry+"/"+image+":"+*version, transport)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref, digest)
	}
	for _, chart := range Charts {
		args := []string{"push", filepath.Join(*dir, ChartArchive(chart, *version)), "oci://" + ChartsUnder(*registry)}
		if *caFile != "" {
			args = append(args, "--ca-file", *caFile)
		}
		cmd := exec.Command(*helm, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
		}
	}
	fmt.Print(InstallCommands(*registry, *version))
	return nil
}

// ValidRegistry refuses what cannot name images under it: a scheme, a tag
// or digest, a path that is no repository name.
func ValidRegistry(registry string) error {
	if strings.Contains(registry, "://") {
		return fmt.Errorf("--registry %q: give a registry host and path without a scheme (registry.example.com/jobferry); TLS is always used", registry)
	}
	if _, err := name.NewRepository(registry+"/"+Images[0], name.StrictValidation); err != nil {
		return fmt.Errorf("--registry %q names no repository: %w", registry, err)
	}
	return nil
}

// InstallCommands is what a platform team runs after a publish: the charts
// from the registry, their images from it too (the charts default to the
// project's registry).
func InstallCommands(registry, version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nInstall from %s (add --ca-file when its CA is not in the system's trust, and imagePullSecrets when the nodes need credentials to pull):\n", registry)
	fmt.Fprintf(&b, "  helm install jobferry-manager oci://%s/jobferry-manager --version %s -n jobferry-system --create-namespace --set image.repository=%s/jobferry-manager\n",
		ChartsUnder(registry), version, registry)
	fmt.Fprintf(&b, "  helm install jobferry-worker oci://%s/jobferry-worker --version %s -n jobferry-system --create-namespace --set image.repository=%s/jobferry-worker   # on each worker cluster\n",
		ChartsUnder(registry), version, registry)
	return b.String()
}

// VerifySums checks files of dir against its SumsFile: each must be listed
// and match.
func VerifySums(dir string, files []string) error {
	f, err := os.Open(filepath.Join(dir, SumsFile))
	if err != nil {
		return fmt.Errorf("%w (is %s a release `make release` wrote?)", err, dir)
	}
	defer f.Close()
	listed := map[string]string{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		sum, file, ok := strings.Cut(lines.Text(), "  ")
		if ok {
			listed[file] = sum
		}
	}
	if err := lines.Err(); err != nil {
		return err
	}
	for _, file := range files {
		want, ok := listed[file]
		if !ok {
			return fmt.Errorf("%s is not in %s of %s", file, SumsFile, dir)
		}
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want {
			return fmt.Errorf("%s of %s changed since the release was made: its sha256 is not the one %s lists", file, dir, SumsFile)
		}
	}
	return nil
}

// registryTransport verifies the registry with the system's roots and
// caFile's certificates, and speaks HTTPS only: go-containerregistry tries
// plain HTTP too for a registry on a private or loopback address, which
// would hand the credentials to whoever answers there.
func registryTransport(caFile string) (http.RoundTripper, error) {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return httpsOnly{t}, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return httpsOnly{t}, nil
}

// httpsOnly refuses every request but over HTTPS (a redirect's included).
type httpsOnly struct{ next http.RoundTripper }

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("refusing %s %s: publish speaks HTTPS only", req.URL.Scheme, req.URL.Redacted())
	}
	return h.next.RoundTrip(req)
}

// pushIndex pushes the image index of an OCI layout archive hack/images
// wrote (its index.json names one index) to ref.
func pushIndex(ctx context.Context, archive, ref string, rt http.RoundTripper) (name.Reference, v1.Hash, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	dir, err := os.MkdirTemp("", "jobferry-publish-")
	if err != nil {
		return nil, v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	if err := untar(archive, dir); err != nil {
		return nil, v1.Hash{}, fmt.Errorf("%s: %w", archive, err)
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("%s: %w", archive, err)
	}
	manifest, err := root.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if len(manifest.Manifests) != 1 || !manifest.Manifests[0].MediaType.IsIndex() {
		return nil, v1.Hash{}, fmt.Errorf("%s holds %d manifests, want one image index (an archive of `make release`, not `make images`)", archive, len(manifest.Manifests))
	}
	index, err := root.ImageIndex(manifest.Manifests[0].Digest)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if err := remote.WriteIndex(tag, index, remote.WithContext(ctx), remote.WithTransport(rt),
		remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		var refused *transport.Error
		if errors.As(err, &refused) && (refused.StatusCode == http.StatusUnauthorized || refused.StatusCode == http.StatusForbidden) {
			return nil, v1.Hash{}, fmt.Errorf("pushing %s: %w\n(log in to %s first: docker login, podman login or crane auth login, which helm reads too)", tag, err, tag.RegistryStr())
		}
		return nil, v1.Hash{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	digest, err := index.Digest()
	return tag, digest, err
}

// untar extracts the regular files and directories of a tar archive into
// dir, refusing a path that leaves it.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("entry %q leaves the archive's directory", h.Name)
		}
		path := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			out, err := os.Create(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, r)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
