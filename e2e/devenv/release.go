package devenv

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/jobferry/jobferry/e2e/localcluster"
)

// Release is a release `make release` wrote into Dir (`make release-e2e`:
// the tree, for this machine's platform, into _output/release-e2e).
type Release struct {
	Dir, Version string
}

// E2EReleaseDir is where `make release-e2e` writes.
func E2EReleaseDir() (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "release-e2e"), nil
}

// FindRelease reads the release in dir: its version is its charts'.
func FindRelease(dir string) (Release, error) {
	charts, _ := filepath.Glob(filepath.Join(dir, "jobferry-manager-*.tgz"))
	if len(charts) != 1 {
		return Release{}, fmt.Errorf("%s holds %d manager charts, want one: run `make release-e2e` (or `make release`)", dir, len(charts))
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(charts[0]), "jobferry-manager-"), ".tgz")
	return Release{Dir: dir, Version: version}, nil
}

// ExtractPlugin writes the release's kubectl-jobferry for this platform,
// from its archive, into dir and returns its path.
func (r Release) ExtractPlugin(dir string) (string, error) {
	archive := filepath.Join(r.Dir, fmt.Sprintf("kubectl-jobferry_%s_%s_%s.tar.gz", r.Version, runtime.GOOS, runtime.GOARCH))
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", archive, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s holds no kubectl-jobferry", archive)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", archive, err)
		}
		if h.Name != "kubectl-jobferry" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		path := filepath.Join(dir, "kubectl-jobferry")
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return path, err
	}
}

// The charts' release names, as the docs install them.
const (
	ManagerRelease = "jobferry-manager"
	WorkerRelease  = "jobferry-worker"
)

// RegistryPullSecret is the Secret, in SystemNamespace of every cluster,
// the charts' pods pull the local registry's images with.
const RegistryPullSecret = "jobferry-registry"

// InstallOptions say how InstallRelease installs a release.
type InstallOptions struct {
	Release Release
	// ManagerValues and WorkerValues are helm flags for the charts
	// (--set k=v ...).
	ManagerValues, WorkerValues []string
	// WorkerHelm names the helm of bin/ that installs the i-th worker's
	// chart (helm, helm4); nil: helm.
	WorkerHelm func(i int) string
	// Join registers every worker with the release's `kubectl jobferry
	// join` and waits until they are connected.
	Join bool
	// Out receives each command's output.
	Out io.Writer
}

// Installed is what InstallRelease made.
type Installed struct {
	// Registry is where the release was published (host:port/jobferry).
	Registry string
	// Plugin is the release's kubectl-jobferry.
	Plugin string
	// Kubeconfig holds every cluster of the environment as a context named
	// after it, the manager current: a platform team's kubeconfig.
	Kubeconfig string
}

// InstallRelease installs a release on an environment with real nodes and
// a registry (EnvironmentOptions.Registry) as a platform team does: `make
// publish` to the registry with the credentials `docker login` writes,
// then each chart from oci:// with helm (a pull Secret for the nodes, the
// images from the registry), the workers first; with Join, every worker
// joined with the release's plugin.
func InstallRelease(ctx context.Context, env *localcluster.Environment, binDir string, opts InstallOptions) (*Installed, error) {
	reg := env.Registry
	if reg == nil {
		return nil, errors.New("the environment has no registry to install from (localcluster.EnvironmentOptions.Registry)")
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	inst := &Installed{Registry: reg.Host + "/jobferry", Kubeconfig: filepath.Join(env.Dir, "kubeconfig")}
	docker := filepath.Join(env.Dir, "docker")
	if err := os.MkdirAll(docker, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(docker, "config.json"), reg.DockerConfig(), 0o600); err != nil {
		return nil, err
	}
	// helm keeps its cache and configuration apart from the user's.
	helmHome := filepath.Join(env.Dir, "helm")
	cmdEnv := append(os.Environ(), "DOCKER_CONFIG="+docker, "HELM_CACHE_HOME="+helmHome, "HELM_CONFIG_HOME="+helmHome, "HELM_DATA_HOME="+helmHome)
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = root, cmdEnv
		output, err := cmd.CombinedOutput()
		fmt.Fprintf(out, "$ %s %s\n%s", filepath.Base(name), strings.Join(args, " "), output)
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, output)
		}
		return nil
	}
	if err := run("make", "--no-print-directory", "publish", "VERSION="+opts.Release.Version, "RELEASE_DIR="+opts.Release.Dir,
		"REGISTRY="+inst.Registry, "REGISTRY_CA_FILE="+reg.CAFile()); err != nil {
		return nil, err
	}
	install := func(c *localcluster.Cluster, helm, chart string, values []string) error {
		if err := pullSecret(ctx, c, reg); err != nil {
			return err
		}
		args := append([]string{"--kubeconfig", c.KubeconfigPath, "install", chart, "oci://" + inst.Registry + "/charts/" + chart, "--version", opts.Release.Version,
			"-n", SystemNamespace, "--create-namespace", "--ca-file", reg.CAFile(),
			"--set", "image.repository=" + inst.Registry + "/" + chart, "--set", "imagePullSecrets[0].name=" + RegistryPullSecret,
			"--wait", "--timeout", "3m"}, values...)
		return run(filepath.Join(binDir, helm), args...)
	}
	for i, w := range env.Workers {
		helm := "helm"
		if opts.WorkerHelm != nil {
			helm = opts.WorkerHelm(i)
		}
		if err := install(w, helm, WorkerRelease, opts.WorkerValues); err != nil {
			return nil, err
		}
	}
	if err := install(env.Manager, "helm", ManagerRelease, opts.ManagerValues); err != nil {
		return nil, err
	}
	if inst.Plugin, err = opts.Release.ExtractPlugin(filepath.Join(env.Dir, "release-bin")); err != nil {
		return nil, err
	}
	if err := MergedKubeconfig(env, inst.Kubeconfig); err != nil {
		return nil, err
	}
	if !opts.Join {
		return inst, nil
	}
	for _, w := range env.Workers {
		if err := run(inst.Plugin, "join", w.Name, "--worker-context", w.Name, "--kubeconfig", inst.Kubeconfig); err != nil {
			return nil, err
		}
	}
	return inst, nil
}

// pullSecret creates, in SystemNamespace of the cluster (created if
// missing), the Secret of the registry's credentials a kubelet pulls with,
// as `kubectl create secret docker-registry` does.
func pullSecret(ctx context.Context, c *localcluster.Cluster, reg *localcluster.Registry) error {
	kube, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: RegistryPullSecret},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfig()},
	}
	if _, err := kube.CoreV1().Secrets(SystemNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the registry's pull Secret on %s: %w", c.Name, err)
	}
	return nil
}

// MergedKubeconfig writes one kubeconfig holding every cluster of the
// environment as a context named after it (manager, worker-1, ...), as a
// platform team's kubeconfig holds its clusters; the current context is
// the manager.
func MergedKubeconfig(env *localcluster.Environment, path string) error {
	merged := clientcmdapi.NewConfig()
	for _, c := range env.Clusters() {
		cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
		if err != nil {
			return err
		}
		kctx := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[c.Name] = cfg.Clusters[kctx.Cluster]
		merged.AuthInfos[c.Name] = cfg.AuthInfos[kctx.AuthInfo]
		merged.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	merged.CurrentContext = env.Manager.Name
	return clientcmd.WriteToFile(*merged, path)
}

// StartRelease starts a manager and workers, each cluster with a real
// node, and a local registry, all in dir; then installs the release there
// as pods (InstallRelease) and joins every worker: jobferry as a platform
// team runs it, on this machine.
func StartRelease(ctx context.Context, dir string, workers int, release Release, detached bool, out io.Writer) (*localcluster.Environment, *Installed, error) {
	binDir, err := localcluster.BinDir()
	if err != nil {
		return nil, nil, err
	}
	env, err := localcluster.StartEnvironment(ctx, localcluster.EnvironmentSpec{
		Manager: localcluster.Spec{Name: "manager", RealNode: true},
		Workers: RealNodeWorkers(workers),
	}, localcluster.EnvironmentOptions{Dir: dir, BinDir: binDir, Detached: detached, Progress: out, Registry: true})
	if err != nil {
		return nil, nil, err
	}
	inst, err := InstallRelease(ctx, env, binDir, InstallOptions{
		Release:      release,
		WorkerValues: []string{"--set", "managerIdentity.allowNamespaceCreation=true", "--set", "managerIdentity.allowInspection=true"},
		Join:         true,
		Out:          out,
	})
	if err != nil {
		return nil, nil, errors.Join(err, env.Stop())
	}
	return env, inst, nil
}
