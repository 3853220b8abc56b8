package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// A cluster starts in phases, each a method of starting, in the style of
// cluster-api's phased reconcilers: the PKI and kubeconfig, etcd, the API
// server, the controllers, the nodes, and the readiness that ends it. Each
// phase reads what the ones before it left in starting; the controllers'
// health is awaited with the nodes' (KWOK's), before the nodes register.
func (c *Cluster) start(ctx context.Context, spec Spec, opts Options) error {
	s := &starting{Cluster: c, ctx: ctx, spec: spec, opts: opts, files: layout{dir: opts.Dir}}
	phases := []struct {
		name string
		run  func() error
	}{
		{"PKI", s.pki},
		{"etcd", s.etcd},
		{"API server", s.apiServer},
		{"controllers", s.controllers},
		{"nodes", s.nodes},
		{"readiness", s.readiness},
	}
	for _, phase := range phases {
		if err := phase.run(); err != nil {
			return fmt.Errorf("%s: %w", phase.name, err)
		}
		if s.apiServerOnly() && phase.name == "API server" {
			s.progress("ready, an API server only (kubeconfig %s)", c.KubeconfigPath)
			return nil
		}
	}
	s.progress("ready (kubeconfig %s)", c.KubeconfigPath)
	return nil
}

// starting is one cluster's start in progress: what its phases share.
type starting struct {
	*Cluster
	ctx   context.Context
	spec  Spec
	opts  Options
	files layout
	ca    *CA
	ports struct{ etcd, etcdPeer, api, kcm, sched, kwok int }
	// client is the admin's, once the API server is up.
	client kubernetes.Interface
	// probes are the components started whose health is awaited before
	// the nodes register (KWOK's among them).
	probes []healthProbe
}

func (s *starting) apiServerOnly() bool { return s.spec.APIServerOnly }

func (s *starting) progress(format string, args ...any) {
	fmt.Fprintf(s.opts.Progress, "%s: "+format+"\n", append([]any{s.Name}, args...)...)
}

// run starts a control-plane component. Each process is recorded at once,
// so `jobferry-dev down` finds every process even if the starting program
// dies before the cluster is complete.
func (s *starting) run(name string, args ...string) (*Process, error) {
	return s.StartComponent(name, filepath.Join(s.opts.BinDir, s.spec.controlPlaneBinary(name)), args...)
}

func (s *starting) waitReady(p *Process, check func(context.Context) error) error {
	return waitFor(s.ctx, s.opts.StartTimeout, p, check)
}

// pki makes the cluster's directories, its certificates (under the shared
// CA, or one of its own) and its admin kubeconfig, on free ports.
func (s *starting) pki() error {
	for _, d := range []string{s.files.path("pki"), s.files.path("logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	s.ca = s.opts.CA
	if s.ca == nil {
		var err error
		if s.ca, err = NewCA("jobferry-local-ca"); err != nil {
			return err
		}
	}
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	s.ports.etcd, s.ports.etcdPeer, s.ports.api, s.ports.kcm, s.ports.sched, s.ports.kwok = ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	s.Server = "https://" + net.JoinHostPort(s.apiAddress(), strconv.Itoa(s.ports.api))
	s.KubeconfigPath = s.files.path("kubeconfig")
	if err := writePKI(s.ca, s.files, s.Name, s.Server, s.KubeconfigPath, s.apiAddress()); err != nil {
		return err
	}
	if s.config, err = clientcmd.BuildConfigFromFlags("", s.KubeconfigPath); err != nil {
		return fmt.Errorf("reading kubeconfig: %w", err)
	}
	s.config.QPS, s.config.Burst = 200, 400
	return nil
}

// apiAddress is where the API server serves: on a host network the host's
// address there, where the nodes' pods reach it.
func (s *starting) apiAddress() string {
	if s.opts.Network != nil {
		return s.opts.Network.HostIP()
	}
	return "127.0.0.1"
}

// etcd starts the cluster's own etcd, unless it shares another's.
func (s *starting) etcd() error {
	s.EtcdURL = s.opts.Etcd
	if s.spec.EtcdOf != "" {
		return nil
	}
	s.progress("starting etcd")
	s.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(s.ports.etcd)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(s.ports.etcdPeer)
	etcd, err := s.run("etcd",
		"--name=etcd", "--data-dir="+s.files.path("etcd"),
		"--listen-client-urls="+s.EtcdURL, "--advertise-client-urls="+s.EtcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=etcd="+peerURL,
		// Throwaway data: durability buys nothing here and fsync costs a lot.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn")
	if err != nil {
		return err
	}
	return s.waitReady(etcd, httpOK(s.EtcdURL+"/health", nil))
}

// apiServer starts kube-apiserver and waits until it is ready.
func (s *starting) apiServer() error {
	s.progress("starting kube-apiserver on %s", s.Server)
	args, err := s.apiServerArgs()
	if err != nil {
		return err
	}
	apiserver, err := s.run("kube-apiserver", args...)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(s.config)
	if err != nil {
		return err
	}
	s.client = client
	return s.waitReady(apiserver, func(ctx context.Context) error {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("readyz: %w: %s", err, body)
		}
		return nil
	})
}

// apiServerArgs are kube-apiserver's flags for the cluster's spec.
func (s *starting) apiServerArgs() ([]string, error) {
	spec, files, apiAddress := s.spec, s.files, s.apiAddress()
	var args []string
	if spec.Audit {
		if err := os.WriteFile(files.path("audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
			return nil, err
		}
		args = []string{"--audit-policy-file=" + files.path("audit-policy.yaml"), "--audit-log-path=" + s.AuditLogPath(),
			"--audit-log-format=json", "--audit-log-maxsize=0"}
	}
	if spec.APIServerOnly {
		args = append(args, apiServerOnlyArgs...)
	}
	// The "kubernetes" Service's endpoints cannot point at loopback: on a
	// host network they point at the host's address there (pods reach their
	// API server through it); otherwise there are none.
	endpointReconciler := "none"
	authorization := "RBAC"
	if s.opts.Network != nil {
		endpointReconciler = "lease"
	}
	if spec.RealNode {
		// Kubelets as nodes (the Node authorizer and NodeRestriction), the
		// API server as their client (pod logs, exec), and webhooks and
		// aggregated APIs reached at their pods' addresses (no kube-proxy
		// on the host).
		authorization = "Node,RBAC"
		args = append(args,
			"--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+files.path("pki", "apiserver-kubelet-client.crt"),
			"--kubelet-client-key="+files.path("pki", "apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority="+files.path("pki", "ca.crt"),
			"--enable-aggregator-routing=true")
	}
	if !spec.minorBefore(33) {
		// The user's UID to aggregated APIs: a v1.33 flag (feature gate
		// RemoteRequestHeaderUID, alpha before).
		args = append(args, "--requestheader-uid-headers=X-Remote-Uid")
	}
	args = append(args, "--etcd-servers="+s.EtcdURL)
	if spec.EtcdOf != "" {
		args = append(args, "--etcd-prefix=/"+spec.Name)
	}
	return append(args,
		"--bind-address="+apiAddress, "--advertise-address="+apiAddress,
		"--secure-port="+strconv.Itoa(s.ports.api),
		"--cert-dir="+files.path("pki"),
		"--tls-cert-file="+files.path("pki", "apiserver.crt"),
		"--tls-private-key-file="+files.path("pki", "apiserver.key"),
		"--client-ca-file="+files.path("pki", "ca.crt"),
		"--service-account-key-file="+files.path("pki", "sa.pub"),
		"--service-account-signing-key-file="+files.path("pki", "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode="+authorization,
		"--allow-privileged=true",
		"--endpoint-reconciler-type="+endpointReconciler,
		// Nodes are reached at their InternalIP (KWOK's 127.0.0.1, where it
		// serves pod logs; a real node's on the host network); their
		// Hostname does not resolve.
		"--kubelet-preferred-address-types=InternalIP",
		"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
		// Aggregated APIs (the manager's inspection API): the front proxy's
		// certificate and the headers naming the user.
		"--proxy-client-cert-file="+files.path("pki", "front-proxy-client.crt"),
		"--proxy-client-key-file="+files.path("pki", "front-proxy-client.key"),
		"--requestheader-client-ca-file="+files.path("pki", "front-proxy-ca.crt"),
		"--requestheader-allowed-names="+frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--profiling="+strconv.FormatBool(spec.Profiling)), nil
}

// authn are the admin kubeconfig flags of the controllers.
func (s *starting) authn() []string {
	return []string{"--kubeconfig=" + s.KubeconfigPath, "--authentication-kubeconfig=" + s.KubeconfigPath, "--authorization-kubeconfig=" + s.KubeconfigPath}
}

// controllers starts kube-controller-manager, and kube-scheduler where pods
// are scheduled (fake nodes, a real one); their health is awaited with the
// nodes'.
func (s *starting) controllers() error {
	s.progress("starting kube-controller-manager")
	kcm, err := s.run("kube-controller-manager", append(s.authn(),
		"--controllers="+strings.Join(s.spec.controllers(), ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.ports.kcm),
		"--cert-dir="+s.files.path("pki", "kube-controller-manager"),
		"--service-account-private-key-file="+s.files.path("pki", "sa.key"),
		"--root-ca-file="+s.files.path("pki", "ca.crt"),
		"--use-service-account-credentials=false",
		"--kube-api-qps="+componentQPS, "--kube-api-burst="+componentBurst)...)
	if err != nil {
		return err
	}
	s.probes = append(s.probes, healthProbe{kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", s.ports.kcm)})
	if len(s.spec.Pools) == 0 && !s.spec.RealNode {
		return nil
	}
	s.progress("starting kube-scheduler")
	sched, err := s.run("kube-scheduler", append(s.authn(),
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.ports.sched),
		"--cert-dir="+s.files.path("pki", "kube-scheduler"),
		"--kube-api-qps="+componentQPS, "--kube-api-burst="+componentBurst)...)
	if err != nil {
		return err
	}
	s.probes = append(s.probes, healthProbe{sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", s.ports.sched)})
	return nil
}

// nodes starts KWOK for the fake nodes, waits for every component started
// so far, registers the fake nodes and starts the real one.
func (s *starting) nodes() error {
	if len(s.spec.Pools) > 0 {
		if err := s.kwok(); err != nil {
			return err
		}
	}
	// The probes target the components' own self-signed serving certificates.
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // health probe only
	for _, probe := range s.probes {
		if err := s.waitReady(probe.process, httpOK(probe.url, insecure)); err != nil {
			return err
		}
	}
	if len(s.spec.Pools) > 0 {
		nodes := nodesFor(s.spec.Pools, s.spec.poolLabel())
		s.progress("registering %d fake nodes", len(nodes))
		for _, node := range nodes {
			if _, err := s.client.CoreV1().Nodes().Create(s.ctx, node, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating node %s: %w", node.Name, err)
			}
		}
		if err := s.waitReady(nil, nodesReady(s.client, len(nodes))); err != nil {
			return err
		}
	}
	if s.spec.RealNode {
		return s.startRealNode(s.ctx, s.ca, s.opts.Network, s.opts.NodeSlot, s.opts, s.progress)
	}
	return nil
}

// kwok starts KWOK, which runs the fake nodes' pods.
func (s *starting) kwok() error {
	s.progress("starting KWOK")
	files := s.files
	if err := os.WriteFile(files.path("kwok.yaml"), kwokConfig(containerLogPath(files.dir)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(containerLogPath(files.dir), []byte(containerLogFile(s.Name)), 0o644); err != nil {
		return err
	}
	start := s.run
	if s.spec.NodesNice > 0 {
		start = func(name string, args ...string) (*Process, error) {
			// nice(1) execs KWOK: its PID, and every thread it makes, are KWOK's.
			return s.startComponent(name, []string{"nice", "-n", strconv.Itoa(s.spec.NodesNice)}, filepath.Join(s.opts.BinDir, name), args)
		}
	}
	kwok, err := start("kwok", "--kubeconfig="+s.KubeconfigPath,
		"--config="+files.path("kwok.yaml"),
		// KWOK renews a Lease per node, as a kubelet does: without one,
		// the node-lifecycle controller sees no heartbeat for
		// --node-monitor-grace-period and marks the nodes NotReady about
		// once a minute (the node-heartbeat-with-lease stage then only
		// refreshes the status every ten minutes, like a kubelet).
		"--node-lease-duration-seconds="+nodeLeaseSeconds,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
		"--server-address=127.0.0.1:"+strconv.Itoa(s.ports.kwok),
		// Nodes name KWOK's server as their kubelet, so the API server
		// asks it for pod logs (pods/log).
		"--node-ip=127.0.0.1", "--node-port="+strconv.Itoa(s.ports.kwok),
		"--tls-cert-file="+files.path("pki", "kwok.crt"), "--tls-private-key-file="+files.path("pki", "kwok.key"))
	if err != nil {
		return err
	}
	s.probes = append(s.probes, healthProbe{kwok, fmt.Sprintf("https://127.0.0.1:%d/healthz", s.ports.kwok)})
	return nil
}

// readiness waits for what every workload needs: the default
// ServiceAccount.
func (s *starting) readiness() error {
	return s.waitReady(nil, defaultServiceAccount(s.client))
}
