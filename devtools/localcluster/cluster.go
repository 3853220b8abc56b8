package localcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
)

//go:embed stages.yaml
var kwokStages []byte

// Controllers run by kube-controller-manager: what Jobs need (job, CronJob,
// garbage collection, TTL), namespaces and service accounts work as in a real
// cluster (with the kube-root-ca.crt ConfigMap in every namespace), and
// node-lifecycle clears the not-ready taint of fake nodes.
var Controllers = []string{
	"job-controller",
	"cronjob-controller",
	"root-ca-certificate-publisher-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"ttl-after-finished-controller",
	"pod-garbage-collector-controller",
	"node-lifecycle-controller",
	// Fills in the aggregated ClusterRoles (view, edit, admin) from the
	// roles that aggregate into them, the manager chart's among them.
	"clusterrole-aggregation-controller",
	// Fills in ResourceQuotas' status.used, as every real cluster does: a
	// quota that never shows its usage is not one a tenant would meet.
	"resourcequota-controller",
}

// nodeLeaseSeconds is the lease duration of fake nodes: a kubelet's default.
const nodeLeaseSeconds = "40"

// Client QPS of the controller-manager and scheduler: at the default 20 QPS
// the Job controller caps a cluster at about 3 Jobs/s.
const (
	componentQPS   = "500"
	componentBurst = "1000"
)

// Spec describes one cluster.
type Spec struct {
	Name string
	// Pools of fake nodes. A cluster without pools runs no scheduler and no
	// KWOK: a control plane only, like the manager cluster.
	Pools []Pool
	// PoolLabel is the node label carrying the pool name (default jobferry.dev/pool).
	PoolLabel string
	// Controllers run by kube-controller-manager; Controllers when empty.
	// Leaving out job-controller makes a cluster whose Jobs only jobferry's
	// worker runs.
	Controllers []string
	// Audit makes the API server log every request's metadata (user, verb,
	// resource, namespace, name, response code) as JSON lines to
	// AuditLogPath, for tests that check which rights were used.
	Audit bool
	// CPUs, when set, pins every process of the cluster (and every component
	// started alongside it) to these CPUs, a taskset list such as "0" or
	// "2-3": benchmarks model separate machines on one host this way.
	CPUs string
	// NodesNice, when above 0, runs KWOK — the nodes' kubelets, which
	// serve the pods' logs — at that nice value: on CPUs it shares with the
	// cluster's control plane, it gets the cycles the control plane leaves,
	// as kubelets on machines of their own take none of the control
	// plane's.
	NodesNice int
	// APIServerOnly runs etcd and the API server and nothing else: no
	// controller acts on the cluster's objects but its clients. The bench's
	// simulated workers are such clusters, their mirrors moved through
	// their statuses by the bench's simulator. Fifty of them share one CPU,
	// so their API server is a lean one (apiServerOnlyArgs).
	APIServerOnly bool
	// EtcdOf names another cluster of the same environment whose etcd this
	// one uses, keeping its objects under its own prefix (/<Name>); it runs
	// no etcd of its own. StartEnvironment starts it once that cluster is up.
	EtcdOf string
	// Profiling serves the API server's /debug/pprof/ to its admin (off
	// otherwise): the bench profiles the manager cluster's API server,
	// which shares the manager's CPU.
	Profiling bool
	// Kubernetes, when set, is another minor for the control plane
	// (kube-apiserver, kube-controller-manager, kube-scheduler) than the
	// pinned one: "1.32" runs bin/kubernetes-1.32/ (hack/tools). etcd and
	// KWOK stay the pinned ones; a real node's kubelet would be newer than
	// its API server, which Kubernetes does not allow, so it takes none.
	Kubernetes string
	// RealNode adds a real node to the cluster (realnode.go): a kubelet,
	// kube-proxy and containerd whose pods run real containers. It needs
	// root and `make nodes` (RealNodesUnavailable says what is missing),
	// and a HostNetwork (Options.Network; StartEnvironment makes one).
	RealNode bool
}

// controlPlaneBinary is where under the bin directory the cluster's
// component name is: the pinned one, or the one of its Kubernetes minor.
func (s Spec) controlPlaneBinary(name string) string {
	switch name {
	case "kube-apiserver", "kube-controller-manager", "kube-scheduler":
		if s.Kubernetes != "" {
			return filepath.Join("kubernetes-"+s.Kubernetes, name)
		}
	}
	return name
}

// minorBefore says whether the cluster runs a Kubernetes minor (1.x)
// before minor: only one of another minor can (Spec.Kubernetes).
func (s Spec) minorBefore(minor int) bool {
	if s.Kubernetes == "" {
		return false
	}
	var major, m int
	if _, err := fmt.Sscanf(s.Kubernetes, "%d.%d", &major, &m); err != nil {
		return false
	}
	return major == 1 && m < minor
}

// realNodeControllers are what a cluster with a real node runs besides
// Controllers: Deployments and their ReplicaSets, PodDisruptionBudgets, and
// the endpoints of Services (kube-proxy and the API server's webhook and
// aggregator routing read them).
var realNodeControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"disruption-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
}

// apiServerOnlyArgs make the API server of an API-server-only cluster
// lighter: measured on one CPU, an idle default API server used 0.86
// CPU-s a minute and 2.5 s to start, this one 0.40 and 2.0 (and 230 MiB of
// RSS instead of 270). It serves the groups a Job, its dispatch and the
// API server's own admission plugins need; it keeps no watch cache (whose
// per-resource timers are most of the idle cost: its few watchers are
// served by etcd) and no priority-and-fairness (nobody to protect from).
var apiServerOnlyArgs = []string{
	"--runtime-config=api/all=false,api/v1=true,batch/v1=true," +
		"authentication.k8s.io/v1=true,authorization.k8s.io/v1=true,rbac.authorization.k8s.io/v1=true," +
		"apiextensions.k8s.io/v1=true,apiregistration.k8s.io/v1=true,admissionregistration.k8s.io/v1=true," +
		"coordination.k8s.io/v1=true,events.k8s.io/v1=true,discovery.k8s.io/v1=true,networking.k8s.io/v1=true," +
		"node.k8s.io/v1=true,scheduling.k8s.io/v1=true,storage.k8s.io/v1=true",
	"--watch-cache=false",
	"--enable-priority-and-fairness=false",
}

// auditPolicy logs the metadata of every request once, when it completes
// (or, for a watch, when its response starts).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// AuditLogPath is where the API server of a cluster started with Spec.Audit
// writes its audit log.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.Dir, "audit.log") }

// Options say where and how a cluster runs.
type Options struct {
	// Dir holds the cluster's certificates, kubeconfig, etcd data and logs.
	Dir string
	// BinDir holds the binaries; BinDir() when empty.
	BinDir string
	// CA signs the cluster's certificates; a new one when nil.
	CA *CA
	// Detached clusters keep running after the starting process exits; stop
	// them with StopEnvironment or Cluster.Stop.
	Detached bool
	// Progress receives one line per step; nil for quiet.
	Progress io.Writer
	// StartTimeout bounds each readiness wait (default 90s).
	StartTimeout time.Duration
	// Etcd is the client URL of the etcd of the cluster Spec.EtcdOf names.
	Etcd string
	// Network, when set, is where the API server serves (its host address)
	// and where a real node (Spec.RealNode) is plugged in, in slot NodeSlot
	// (distinct per cluster of the network).
	Network  *HostNetwork
	NodeSlot int
	// NodeImages are OCI archives a real node imports besides the pause and
	// busybox images (jobferry's, from `make images`).
	NodeImages []string
}

// Cluster is a running local cluster.
type Cluster struct {
	Name string
	Dir  string
	// KubeconfigPath is an admin kubeconfig (client certificate, CA data).
	KubeconfigPath string
	Server         string
	// EtcdURL is the client URL of the etcd holding the cluster's objects:
	// its own, or the one of the cluster Spec.EtcdOf names.
	EtcdURL   string
	Processes []*Process
	// APIServerOnly: the cluster runs no controller, scheduler or node
	// (Spec.APIServerOnly).
	APIServerOnly bool

	config   *rest.Config
	detached bool
	// cpus pins the cluster's processes (Spec.CPUs).
	cpus string
	// etcdOf is Spec.EtcdOf: such a cluster stops before the etcd it uses.
	etcdOf   string
	mu       sync.Mutex // guards Processes while starting and stopping
	stopOnce sync.Once
	stopErr  error
}

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// LogDir is where every component writes its log.
func (c *Cluster) LogDir() string { return filepath.Join(c.Dir, "logs") }

// Stop stops every component in reverse start order (KWOK, scheduler,
// controller-manager, apiserver, etcd), by PID.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		procs := append([]*Process(nil), c.Processes...)
		c.mu.Unlock()
		c.stopErr = stopAll(procs)
		if err := stopRealNode(c.Dir); err != nil {
			c.stopErr = errors.Join(c.stopErr, err)
		}
		untrack(c)
		if c.stopErr == nil {
			_ = os.Remove(processesFile(c.Dir))
		}
	})
	if c.stopErr != nil {
		return fmt.Errorf("stopping cluster %s: %w", c.Name, c.stopErr)
	}
	return nil
}

// StartComponent runs another program alongside the cluster's control plane
// (a jobferry manager or worker, say), with its log in LogDir. It is stopped
// with the cluster, first, and recorded like every component.
func (c *Cluster) StartComponent(name, binary string, args ...string) (*Process, error) {
	return c.startComponent(name, nil, binary, args)
}

// StartComponentWithEnv is StartComponent with variables added to the
// program's environment (GOMEMLIMIT=900MiB, say): env(1) sets them and
// execs binary in the same process, so its PID is the program's, and a
// restart keeps them (Process.Launcher).
func (c *Cluster) StartComponentWithEnv(name string, env []string, binary string, args ...string) (*Process, error) {
	var launcher []string
	if len(env) > 0 {
		launcher = append([]string{"env"}, env...)
	}
	return c.startComponent(name, launcher, binary, args)
}

// startComponent is StartComponent with a launcher that sets the process up
// and execs binary (see Process.Launcher).
func (c *Cluster) startComponent(name string, launcher []string, binary string, args []string) (*Process, error) {
	p, err := startProcess(name, binary, args, filepath.Join(c.LogDir(), name+".log"), c.detached, c.cpus, launcher)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.Processes = append(c.Processes, p)
	procs := append([]*Process(nil), c.Processes...)
	c.mu.Unlock()
	return p, writeJSON(processesFile(c.Dir), procs)
}

// StopComponent stops one component by name (the apiserver, to make the
// cluster unreachable, say); RestartComponent brings it back.
func (c *Cluster) StopComponent(name string) error {
	p, err := c.component(name)
	if err != nil {
		return err
	}
	return p.Stop()
}

// RestartComponent starts a stopped component again with the same arguments
// (so on the same ports, with the same data).
func (c *Cluster) RestartComponent(name string) (*Process, error) {
	old, err := c.component(name)
	if err != nil {
		return nil, err
	}
	if err := old.Stop(); err != nil {
		return nil, err
	}
	p, err := startProcess(name, old.Binary, old.Args, old.Log, c.detached, old.CPUs, old.Launcher)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	for i := range c.Processes {
		if c.Processes[i] == old {
			c.Processes[i] = p
		}
	}
	procs := append([]*Process(nil), c.Processes...)
	c.mu.Unlock()
	return p, writeJSON(processesFile(c.Dir), procs)
}

// Component is the running component of that name.
func (c *Cluster) Component(name string) (*Process, error) { return c.component(name) }

func (c *Cluster) component(name string) (*Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.Processes {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("cluster %s has no component %s", c.Name, name)
}

// WaitHealthy polls url until it answers 200 OK, p exits, or timeout passes.
func WaitHealthy(ctx context.Context, p *Process, url string, timeout time.Duration) error {
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // health probe only
	return waitFor(ctx, timeout, p, httpOK(url, insecure))
}

// FreePorts returns n free loopback ports.
func FreePorts(n int) ([]int, error) { return freePorts(n) }

// Release forgets a detached cluster's processes in this program, so an
// interrupt no longer stops them; they keep running until StopEnvironment.
func (c *Cluster) Release() { untrack(c) }

func processesFile(dir string) string { return filepath.Join(dir, "processes.json") }

// Start starts a cluster and returns once its API server answers, its
// controllers are healthy and its nodes are Ready. On failure, whatever was
// started is stopped again.
func Start(ctx context.Context, spec Spec, opts Options) (*Cluster, error) {
	if err := validate(spec, &opts); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c := &Cluster{Name: spec.Name, Dir: opts.Dir, detached: opts.Detached, cpus: spec.CPUs, APIServerOnly: spec.APIServerOnly, etcdOf: spec.EtcdOf}
		// Tracked from the first process on, so an interrupt during start-up
		// stops what is already running.
		track(c)
		err := c.start(ctx, spec, opts)
		if err == nil {
			return c, nil
		}
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		// A free port can be taken between the moment it is found and the
		// moment a component binds it (by another process's outgoing
		// connection, say): start again, on other ports, from scratch.
		if attempt < startAttempts && strings.Contains(err.Error(), "address already in use") {
			fmt.Fprintf(opts.Progress, "%s: a port was taken while starting; starting again (%v)\n", spec.Name, err)
			if rmErr := os.RemoveAll(opts.Dir); rmErr != nil {
				return nil, errors.Join(err, rmErr)
			}
			continue
		}
		return nil, fmt.Errorf("starting cluster %s: %w", spec.Name, err)
	}
}

// startAttempts bounds the starts of a cluster whose port was taken.
const startAttempts = 3

func validate(spec Spec, opts *Options) error {
	if spec.Name == "" {
		return errors.New("cluster spec needs a name")
	}
	if opts.Dir == "" {
		return fmt.Errorf("cluster %s: Options.Dir is required", spec.Name)
	}
	if opts.BinDir == "" {
		dir, err := BinDir()
		if err != nil {
			return err
		}
		opts.BinDir = dir
	}
	if spec.APIServerOnly && (len(spec.Pools) > 0 || spec.RealNode) {
		return fmt.Errorf("cluster %s: an API server only has no nodes: pools need KWOK and a scheduler, a real node a scheduler", spec.Name)
	}
	if spec.RealNode {
		if opts.Network == nil {
			return fmt.Errorf("cluster %s: a real node needs Options.Network (StartEnvironment makes one)", spec.Name)
		}
		if err := RealNodesUnavailable(opts.BinDir); err != nil {
			return fmt.Errorf("cluster %s: %w", spec.Name, err)
		}
	}
	if (spec.EtcdOf == "") != (opts.Etcd == "") {
		return fmt.Errorf("cluster %s: Spec.EtcdOf (%q) and Options.Etcd (%q) come together", spec.Name, spec.EtcdOf, opts.Etcd)
	}
	if spec.Kubernetes != "" && spec.RealNode {
		return fmt.Errorf("cluster %s: a real node's kubelet is the pinned Kubernetes, newer than a control plane of %s", spec.Name, spec.Kubernetes)
	}
	binaries := []string{"etcd", spec.controlPlaneBinary("kube-apiserver")}
	if !spec.APIServerOnly {
		binaries = append(binaries, spec.controlPlaneBinary("kube-controller-manager"))
	}
	if len(spec.Pools) > 0 {
		binaries = append(binaries, spec.controlPlaneBinary("kube-scheduler"), "kwok")
	}
	if spec.RealNode {
		binaries = append(binaries, spec.controlPlaneBinary("kube-scheduler"))
	}
	if err := checkBinaries(opts.BinDir, binaries...); err != nil {
		return err
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	return nil
}

// healthProbe is the health endpoint of a component.
type healthProbe struct {
	process *Process
	url     string
}

// layout is where a cluster keeps its files.
type layout struct{ dir string }

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}

func (s Spec) controllers() []string {
	controllers := s.Controllers
	if len(controllers) == 0 {
		controllers = Controllers
	}
	if s.RealNode {
		controllers = append(append([]string(nil), controllers...), realNodeControllers...)
	}
	return controllers
}

func (s Spec) poolLabel() string {
	if s.PoolLabel != "" {
		return s.PoolLabel
	}
	return "jobferry.dev/pool"
}

// frontProxyClient is the name of the aggregator's client certificate.
const frontProxyClient = "front-proxy-client"

func writePKI(ca *CA, files layout, name, server, kubeconfigPath, apiAddress string) error {
	if err := ca.WriteFiles(files.path("pki")); err != nil {
		return err
	}
	serving, err := ca.issue("kube-apiserver", nil,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(apiAddress), net.ParseIP("10.96.0.1")}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	if err := serving.write(files.path("pki", "apiserver.crt"), files.path("pki", "apiserver.key")); err != nil {
		return err
	}
	// The API server's client certificate towards kubelets (pod logs).
	kubeletClient, err := ca.issue("kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if err := kubeletClient.write(files.path("pki", "apiserver-kubelet-client.crt"), files.path("pki", "apiserver-kubelet-client.key")); err != nil {
		return err
	}
	adminCert, err := ca.issue("jobferry-admin", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if err := writeKubeconfig(ca.Kubeconfig(name, server, adminCert), kubeconfigPath); err != nil {
		return err
	}
	// KWOK serves pod logs as a kubelet does, over HTTPS; the API server
	// does not verify a kubelet's certificate unless told a CA, but the
	// certificate is a real one for 127.0.0.1 all the same.
	kwokServing, err := ca.issue("kwok", nil, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	if err := kwokServing.write(files.path("pki", "kwok.crt"), files.path("pki", "kwok.key")); err != nil {
		return err
	}
	// The aggregator's client certificate towards extension API servers
	// (the manager's inspection API), from a CA of its own, as kubeadm
	// does: a client certificate of the cluster's CA must not pass for the
	// front proxy.
	frontProxyCA, err := NewCA("jobferry-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := os.WriteFile(files.path("pki", "front-proxy-ca.crt"), encodeCertPEM(frontProxyCA.Cert), 0o644); err != nil {
		return err
	}
	proxyClient, err := frontProxyCA.issue(frontProxyClient, nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if err := proxyClient.write(files.path("pki", "front-proxy-client.crt"), files.path("pki", "front-proxy-client.key")); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	saPubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER})
	return keyPair{CertPEM: saPubPEM, KeyPEM: saKeyPEM}.write(files.path("pki", "sa.pub"), files.path("pki", "sa.key"))
}

// freePorts asks the kernel for n distinct free loopback ports.
// It never returns a port it returned before in this process, so clusters
// started at once do not get the same one.
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] {
			continue
		}
		handedOut.ports[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// handedOut holds the ports freePorts returned in this process.
var handedOut = struct {
	mu    sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// waitFor polls check until it succeeds, the timeout passes, or p exits.
// The error names the component and ends with the tail of its log.
func waitFor(ctx context.Context, timeout time.Duration, p *Process, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p != nil && p.Exited() {
			return false, fmt.Errorf("%s exited: %v", p.Name, p.exitErr)
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err == nil {
		return nil
	}
	if last != nil && !strings.Contains(err.Error(), last.Error()) {
		err = fmt.Errorf("%w (last check: %v)", err, last)
	}
	if p != nil {
		return fmt.Errorf("waiting for %s: %w\n--- last lines of %s:\n%s", p.Name, err, p.Log, tail(p.Log, 15))
	}
	return err
}

func httpOK(url string, tlsConfig *tls.Config) func(context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
		}
		return nil
	}
}

// nodesReady holds once every fake node is Ready and carries no not-ready or
// unreachable taint, so pods can be scheduled on all of them.
func nodesReady(client kubernetes.Interface, want int) func(context.Context) error {
	return func(ctx context.Context) error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes.Items {
			if nodeSchedulable(&n) {
				ready++
			}
		}
		if ready < want {
			return fmt.Errorf("%d of %d nodes ready", ready, want)
		}
		return nil
	}
}

func nodeSchedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// defaultServiceAccount holds once the service account controller works:
// pods are only admitted in a namespace with a "default" service account.
func defaultServiceAccount(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errors.New("no default service account yet")
		}
		return err
	}
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
