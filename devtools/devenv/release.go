package devenv

import (
	"archive/tar"
	"bytes"
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

	"github.com/jobferry/jobferry/devtools/localcluster"
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

// Installed is what InstallRelease made, and what upgrades it.
type Installed struct {
	// Registry is where the release was published (host:port/jobferry).
	Registry string
	// Plugin is the release's kubectl-jobferry.
	Plugin string
	// Kubeconfig holds every cluster of the environment as a context named
	// after it, the manager current: a platform team's kubeconfig.
	Kubeconfig string

	env    *localcluster.Environment
	binDir string
	// cmdEnv is the environment of every command: the registry's
	// credentials as `docker login` writes them, helm's own directories.
	cmdEnv []string
	root   string
	out    io.Writer
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
	inst := &Installed{Registry: reg.Host + "/jobferry", Kubeconfig: filepath.Join(env.Dir, "kubeconfig"), env: env, binDir: binDir, out: out}
	docker := filepath.Join(env.Dir, "docker")
	if err := os.MkdirAll(docker, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(docker, "config.json"), reg.DockerConfig(), 0o600); err != nil {
		return nil, err
	}
	// helm keeps its cache and configuration apart from the user's.
	helmHome := filepath.Join(env.Dir, "helm")
	inst.cmdEnv = append(os.Environ(), "DOCKER_CONFIG="+docker, "HELM_CACHE_HOME="+helmHome, "HELM_CONFIG_HOME="+helmHome, "HELM_DATA_HOME="+helmHome)
	var err error
	if inst.root, err = localcluster.RepoRoot(); err != nil {
		return nil, err
	}
	if err := inst.Publish(ctx, opts.Release); err != nil {
		return nil, err
	}
	for i, w := range env.Workers {
		helm := "helm"
		if opts.WorkerHelm != nil {
			helm = opts.WorkerHelm(i)
		}
		if err := pullSecret(ctx, w, reg); err != nil {
			return nil, err
		}
		if err := inst.Helm(ctx, w, helm, "install", WorkerRelease, opts.Release, opts.WorkerValues); err != nil {
			return nil, err
		}
	}
	if err := pullSecret(ctx, env.Manager, reg); err != nil {
		return nil, err
	}
	if err := inst.Helm(ctx, env.Manager, "helm", "install", ManagerRelease, opts.Release, opts.ManagerValues); err != nil {
		return nil, err
	}
	if inst.Plugin, err = opts.Release.ExtractPlugin(filepath.Join(env.Dir, "release-bin", opts.Release.Version)); err != nil {
		return nil, err
	}
	if err := MergedKubeconfig(env, inst.Kubeconfig); err != nil {
		return nil, err
	}
	if !opts.Join {
		return inst, nil
	}
	for _, w := range env.Workers {
		if err := inst.run(ctx, nil, inst.Plugin, "join", w.Name, "--worker-context", w.Name, "--kubeconfig", inst.Kubeconfig); err != nil {
			return nil, err
		}
	}
	return inst, nil
}

// Publish pushes a release to the environment's registry with `make
// publish`, as its install commands expect it.
func (inst *Installed) Publish(ctx context.Context, release Release) error {
	return inst.run(ctx, nil, "make", "--no-print-directory", "publish", "VERSION="+release.Version, "RELEASE_DIR="+release.Dir,
		"REGISTRY="+inst.Registry, "REGISTRY_CA_FILE="+inst.env.Registry.CAFile())
}

// Helm installs or upgrades (verb) a chart of the release on cluster c
// from the registry, as the release's install commands say, with the
// images from the registry and values; it waits until its pods are ready.
func (inst *Installed) Helm(ctx context.Context, c *localcluster.Cluster, helm, verb, chart string, release Release, values []string) error {
	args := append([]string{"--kubeconfig", c.KubeconfigPath, verb, chart, "oci://" + inst.Registry + "/charts/" + chart, "--version", release.Version,
		"-n", SystemNamespace, "--create-namespace", "--ca-file", inst.env.Registry.CAFile(),
		"--set", "image.repository=" + inst.Registry + "/" + chart, "--set", "imagePullSecrets[0].name=" + RegistryPullSecret,
		"--wait", "--timeout", "3m"}, values...)
	if err := localcluster.RequireBinaries(inst.binDir, helm); err != nil {
		return err
	}
	return inst.run(ctx, nil, filepath.Join(inst.binDir, helm), args...)
}

// ApplyCRDs applies the CRDs of a chart of the release, from the registry,
// on cluster c, as an upgrade starts (helm upgrades no chart's CRDs):
// `helm show crds … | kubectl apply --server-side -f -`.
func (inst *Installed) ApplyCRDs(ctx context.Context, c *localcluster.Cluster, chart string, release Release) error {
	var crds bytes.Buffer
	show := exec.CommandContext(ctx, filepath.Join(inst.binDir, "helm"), "show", "crds", "oci://"+inst.Registry+"/charts/"+chart,
		"--version", release.Version, "--ca-file", inst.env.Registry.CAFile())
	show.Dir, show.Env, show.Stdout = inst.root, inst.cmdEnv, &crds
	if err := show.Run(); err != nil {
		return fmt.Errorf("helm show crds %s %s: %w", chart, release.Version, err)
	}
	return inst.run(ctx, &crds, filepath.Join(inst.binDir, "kubectl"), "--kubeconfig", c.KubeconfigPath, "apply", "--server-side", "--force-conflicts", "-f", "-")
}

// run runs a command from the repository's root with the environment's
// registry credentials and helm directories, stdin its input (nil: none),
// and writes it and its output to the installation's Out.
func (inst *Installed) run(ctx context.Context, stdin io.Reader, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = inst.root, inst.cmdEnv, stdin
	output, err := cmd.CombinedOutput()
	fmt.Fprintf(inst.out, "$ %s %s\n%s", filepath.Base(name), strings.Join(args, " "), output)
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, output)
	}
	return nil
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
