package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ocilayout "github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"
)

// Registry is a local OCI registry: CNCF Distribution (bin/registry, built
// by hack/tools) serving over TLS with a CA of its own and one user
// (htpasswd), its blobs on disk. A release is published to it and real
// nodes pull from it as from any private registry: containerd trusts its
// CA (Cluster.TrustRegistry), the kubelet pulls with a Secret of its
// credentials (DockerConfig).
type Registry struct {
	// Host is the registry's address, ip:port: the name of its images.
	Host string `json:"host"`
	// Dir holds its configuration, certificates and storage.
	Dir string `json:"dir"`
	// User and Password are the one account it accepts, for push and pull.
	User     string `json:"user"`
	Password string `json:"password"`
}

// CAFile is the registry's CA certificate (PEM), what a client verifies it
// with (helm --ca-file, containerd's hosts.toml).
func (r *Registry) CAFile() string { return filepath.Join(r.Dir, "ca.crt") }

// DockerConfig is the config.json `docker login` writes for the registry:
// helm, the usual container tools and a kubelet's pull Secret
// (kubernetes.io/dockerconfigjson) read it.
func (r *Registry) DockerConfig() []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{"auth": auth}}})
	return data
}

func registryFile(dir string) string { return filepath.Join(dir, "registry.json") }

// registryStartTimeout bounds the wait for the registry to answer.
const registryStartTimeout = 30 * time.Second

// StartRegistry writes a registry's files into dir (a new CA, a serving
// certificate for ip, a random password) and runs it as a component of c,
// serving on ip at a free port; it returns once the registry answers.
// Stopped with c, by PID; the files stay in dir.
func (c *Cluster) StartRegistry(ctx context.Context, binDir, dir, ip string) (*Registry, error) {
	if err := checkBinaries(binDir, "registry"); err != nil {
		return nil, fmt.Errorf("%w (the local registry: `make tools`)", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	r := &Registry{Host: net.JoinHostPort(ip, strconv.Itoa(ports[0])), Dir: dir, User: "jobferry", Password: hex.EncodeToString(secret)}
	if err := r.writeFiles(ip); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		return nil, err
	}
	p, err := c.StartComponent("registry", filepath.Join(binDir, "registry"), "serve", filepath.Join(dir, "config.yml"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(r.CAFile())
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, registryStartTimeout, p, r.answers(caPEM)); err != nil {
		return nil, err
	}
	return r, writeJSON(registryFile(dir), r)
}

// LoadRegistry reads the registry a (detached) environment started into
// dir; nil if none.
func LoadRegistry(dir string) (*Registry, error) {
	data, err := os.ReadFile(registryFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Registry
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reading %s: %w", registryFile(dir), err)
	}
	return &r, nil
}

func (r *Registry) writeFiles(ip string) error {
	if err := os.MkdirAll(filepath.Join(r.Dir, "data"), 0o755); err != nil {
		return err
	}
	ca, err := NewCA("jobferry-local-registry-ca")
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.CAFile(), ca.CertPEM, 0o644); err != nil {
		return err
	}
	serving, err := ca.issue("jobferry-local-registry", nil, nil, []net.IP{net.ParseIP(ip)}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	if err := serving.write(filepath.Join(r.Dir, "registry.crt"), filepath.Join(r.Dir, "registry.key")); err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "htpasswd"), []byte(r.User+":"+string(hash)+"\n"), 0o600); err != nil {
		return err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	config := fmt.Sprintf(registryConfig, filepath.Join(r.Dir, "data"), r.Host, hex.EncodeToString(secret),
		filepath.Join(r.Dir, "registry.crt"), filepath.Join(r.Dir, "registry.key"), filepath.Join(r.Dir, "htpasswd"))
	return os.WriteFile(filepath.Join(r.Dir, "config.yml"), []byte(config), 0o600)
}

// registryConfig: Distribution's configuration; every request needs the
// user's credentials, as a private registry's do.
const registryConfig = `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
  secret: %s
  tls:
    certificate: %s
    key: %s
auth:
  htpasswd:
    realm: jobferry-local-registry
    path: %s
`

// answers holds once the registry serves its API over TLS verified with
// its CA (asking for credentials: 401 without them).
func (r *Registry) answers(caPEM []byte) func(context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.Host+"/v2/", nil)
		if err != nil {
			return err
		}
		req.SetBasicAuth(r.User, r.Password)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("https://%s/v2/ with the registry's credentials: %s", r.Host, resp.Status)
		}
		return nil
	}
}

// TrustRegistry makes the cluster's real node pull from the registry over
// TLS verified with its CA: a hosts.toml in containerd's registry
// configuration directory (read at every pull, so no restart).
func (c *Cluster) TrustRegistry(r *Registry) error {
	n, err := c.realNode()
	if err != nil {
		return err
	}
	dir := n.path("certs.d", r.Host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %q\n", "https://"+r.Host, "https://"+r.Host, r.CAFile())
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// PullLikeAPlatformsNodes configures the cluster's real node as a platform
// team configures its nodes for a private registry in an air-gapped site:
// containerd trusts the registry's CA and sends its credentials with every
// pull from it (so pods need no pull Secret), and pulls Docker Hub's images
// (docker.io, `busybox`) from it, as from a mirror. What docs pages say to
// run, images and all, then runs here as written (TestInstallPage).
func (c *Cluster) PullLikeAPlatformsNodes(r *Registry) error {
	n, err := c.realNode()
	if err != nil {
		return err
	}
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
	host := fmt.Sprintf("[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %q\n  [host.%q.header]\n    Authorization = [%q]\n",
		"https://"+r.Host, r.CAFile(), "https://"+r.Host, "Basic "+auth)
	for registry, server := range map[string]string{r.Host: "https://" + r.Host, "docker.io": "https://registry-1.docker.io"} {
		dir := n.path("certs.d", registry)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(fmt.Sprintf("server = %q\n\n%s", server, host)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// realNode reads what the cluster's real node was started with.
func (c *Cluster) realNode() (realNode, error) {
	data, err := os.ReadFile(nodeFile(c.Dir))
	if err != nil {
		return realNode{}, fmt.Errorf("cluster %s has no real node: %w", c.Name, err)
	}
	var n realNode
	err = json.Unmarshal(data, &n)
	return n, err
}

// PushImage pushes the one image of an OCI layout archive (a node image
// of hack/nodes.sh) to ref in the registry, with its credentials.
func (r *Registry) PushImage(ctx context.Context, archive, ref string) error {
	dir, err := os.MkdirTemp("", "jobferry-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.CommandContext(ctx, "tar", "-xf", archive, "-C", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("extracting %s: %w: %s", archive, err, out)
	}
	index, err := ocilayout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", archive, err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return err
	}
	if len(manifest.Manifests) != 1 {
		return fmt.Errorf("%s holds %d manifests, want one image", archive, len(manifest.Manifests))
	}
	image, err := index.Image(manifest.Manifests[0].Digest)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return err
	}
	transport, err := r.transport()
	if err != nil {
		return err
	}
	return remote.Write(tag, image, remote.WithContext(ctx), remote.WithTransport(transport),
		remote.WithAuth(&authn.Basic{Username: r.User, Password: r.Password}))
}

// transport trusts the registry's CA.
func (r *Registry) transport() (http.RoundTripper, error) {
	caPEM, err := os.ReadFile(r.CAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no certificate", r.CAFile())
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}
