package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KueueNamespace is where Kueue keeps its own objects.
const KueueNamespace = "kueue-system"

// KueueOptions say how StartKueue runs Kueue.
type KueueOptions struct {
	// BinDir holds the kueue binary and kueue-files/, its CRDs (hack/tools builds
	// both); BinDir() when empty.
	BinDir string
	// Timeout bounds the wait for Kueue to be ready (default 90s).
	Timeout time.Duration
	// FairSharing turns Kueue's fair sharing on: in a cohort, admission
	// (and preemption) favours the ClusterQueue using the least of its share.
	FairSharing bool
	// ClientQPS and ClientBurst are Kueue's clientConnection to its own
	// cluster (default 50 and 100). They do not reach MultiKueue's clients
	// of the workers: Kueue v0.17 builds those from the kubeconfig alone,
	// at client-go's defaults of 5 and 10.
	ClientQPS, ClientBurst int
}

// Kueue is the Kueue controller running beside a cluster's control plane.
type Kueue struct {
	Process *Process
	// ConfigPath is the configuration Kueue runs with.
	ConfigPath string
}

// StartKueue installs Kueue's CRDs on the cluster and runs its controller
// (the version hack/tools/kueue pins) beside the control plane, as Kueue runs
// on a manager cluster: the batch/v1 Job integration only, Jobs without a
// queue name left alone, no leader election, the visibility API off, and
// its webhooks served but not registered (a test creates Jobs suspended, as
// jobferry's webhook does). It is stopped with the cluster, by PID.
//
// Kueue reads its metrics certificate from a fixed path,
// /etc/kueue/metrics/certs, when it does not manage certificates itself
// (which needs a Service in front of it). So it runs in a private mount
// namespace (unshare, as root) whose /etc is an overlay of the host's: the
// certificate, issued by the cluster's CA, is written into the overlay's
// upper layer on a tmpfs that ends with the process. The host's /etc is
// never written.
func (c *Cluster) StartKueue(ctx context.Context, opts KueueOptions) (*Kueue, error) {
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	if err := checkBinaries(binDir, "kueue"); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = 90 * time.Second
	}
	if opts.ClientQPS == 0 {
		opts.ClientQPS, opts.ClientBurst = 50, 100
	}
	if err := InstallCRDs(ctx, c.RESTConfig(), os.DirFS(filepath.Join(binDir, "kueue-files")), "*.yaml"); err != nil {
		return nil, fmt.Errorf("installing Kueue's CRDs: %w", err)
	}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", KueueNamespace, err)
	}

	dir := filepath.Join(c.Dir, "kueue")
	ca, err := LoadCA(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	for _, server := range []string{"metrics", "webhook"} {
		if err := os.MkdirAll(filepath.Join(dir, server), 0o755); err != nil {
			return nil, err
		}
		certPEM, keyPEM, err := ca.IssueServing("kueue-" + server)
		if err != nil {
			return nil, err
		}
		if err := (keyPair{CertPEM: certPEM, KeyPEM: keyPEM}).write(filepath.Join(dir, server, "tls.crt"), filepath.Join(dir, server, "tls.key")); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	health, metrics, webhook := ports[0], ports[1], ports[2]
	config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
clientConnection:
  qps: %d
  burst: %d
integrations:
  frameworks:
  - batch/job
`, KueueNamespace, health, metrics, webhook, filepath.Join(dir, "webhook"), opts.ClientQPS, max(opts.ClientBurst, opts.ClientQPS))
	if opts.FairSharing {
		config += `fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
`
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := ca.WriteClientKubeconfig(kubeconfig, c.Server, "kueue", "system:masters"); err != nil {
		return nil, err
	}
	// The mounts live in the namespace unshare makes and end with Kueue,
	// whose PID is the one started here (taskset, unshare and sh exec).
	etc := filepath.Join(dir, "etc")
	setup := strings.Join([]string{
		"set -e",
		"mount -t tmpfs jobferry-kueue-etc " + quote(etc),
		"mkdir -p " + quote(etc+"/upper/kueue/metrics/certs") + " " + quote(etc+"/work"),
		"cp " + quote(filepath.Join(dir, "metrics", "tls.crt")) + " " + quote(filepath.Join(dir, "metrics", "tls.key")) + " " + quote(etc+"/upper/kueue/metrics/certs/"),
		"mount -t overlay jobferry-kueue-etc -o " + quote("lowerdir=/etc,upperdir="+etc+"/upper,workdir="+etc+"/work") + " /etc",
		`exec "$@"`,
	}, "\n")
	p, err := c.startComponent("kueue", []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", setup, "sh"},
		filepath.Join(binDir, "kueue"), []string{"--config=" + configPath, "--kubeconfig=" + kubeconfig, "--feature-gates=VisibilityOnDemand=false"})
	if err != nil {
		return nil, err
	}
	if err := WaitHealthy(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/readyz", health), opts.Timeout); err != nil {
		return nil, fmt.Errorf("waiting for Kueue (log %s): %w\n%s", p.Log, err, tail(p.Log, 20))
	}
	return &Kueue{Process: p, ConfigPath: configPath}, nil
}

// quote is s as one single-quoted shell word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
