package localcluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A real node: containerd, runc, the CNI bridge plugin, a kubelet and
// kube-proxy, in a network namespace of their own plugged into the
// environment's HostNetwork, their processes in cgroups of their own, every
// file under nodesDir/<network index>-<cluster> (a short path: the
// kubelet and containerd make unix sockets there, whose paths may not
// exceed 108 bytes) but their logs, in the cluster's. Pods on it run real
// containers from images imported into its containerd (the pause and
// busybox images hack/nodes.sh builds, and whatever Options.NodeImages adds:
// jobferry's own, from `make images`) or pulled from the environment's
// local registry (EnvironmentOptions.Registry). Requirements and costs:
// ../../shared/research/real-nodes.md and README.md.

// Images every real node has (hack/nodes.sh builds them as OCI archives).
const (
	PauseImage   = "localhost/jobferry/pause:3.10.2"
	BusyboxImage = "localhost/jobferry/busybox:1.35.0"
)

// NodeImageArchive is the file name of the archive of a node image under
// <bin>/nodes/images: pause.oci.tar for PauseImage.
func NodeImageArchive(ref string) string {
	name := ref[strings.LastIndex(ref, "/")+1:]
	name, _, _ = strings.Cut(name, ":")
	return name + ".oci.tar"
}

// nodesDir holds the real nodes' files.
var nodesDir = "/var/lib/jobferry-nodes"

// nodeBinaries are what a real node runs besides the control plane's
// binaries: kubelet, kube-proxy and CoreDNS in bin/ (hack/tools), the rest
// in bin/nodes (hack/nodes.sh).
var nodeBinaries = []string{"kubelet", "kube-proxy", "coredns", "nodes/bin/containerd", "nodes/bin/containerd-shim-runc-v2", "nodes/bin/ctr", "nodes/bin/runc",
	"nodes/cni/bridge", "nodes/cni/host-local", "nodes/cni/loopback"}

// RealNodesUnavailable says why real nodes cannot run here (nil if they
// can): they need root, a cgroup v1 host, iptables for kube-proxy and what
// `make nodes` installs.
func RealNodesUnavailable(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (network namespaces, cgroups, mounts)")
	}
	if _, err := cgroupHierarchies(); err != nil {
		return err
	}
	if err := checkBinaries(binDir, nodeBinaries...); err != nil {
		return fmt.Errorf("%w (real nodes: `make nodes`)", err)
	}
	for _, archive := range []string{PauseImage, BusyboxImage} {
		if _, err := os.Stat(filepath.Join(binDir, "nodes", "images", NodeImageArchive(archive))); err != nil {
			return fmt.Errorf("the image %s is missing: run `make nodes`", archive)
		}
	}
	for _, tool := range []string{"ip", "nsenter", "iptables-restore", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("real nodes need %s on the PATH (kube-proxy runs iptables: `make nodes` installs Debian's iptables and conntrack)", tool)
		}
	}
	return nil
}

// realNode is what a cluster's real node is made of, recorded in
// <cluster>/node.json before any of it is made, so a teardown (also after
// a crash, by `jobferry-dev down`) knows what to remove.
type realNode struct {
	// Name of the Node.
	Name string `json:"name"`
	// Dir holds everything of the node: containerd's and the kubelet's
	// state, its network namespace file, its pods' logs. Removed with it.
	Dir string `json:"dir"`
	// IP on the host network; PodCIDR is its pods' subnet, routed on the
	// host to IP.
	IP      string `json:"ip"`
	PodCIDR string `json:"podCIDR"`
	// Cgroup is the node's cgroup in every hierarchy (the kubelet's
	// cgroupRoot).
	Cgroup string `json:"cgroup"`
	// CNINetwork names the pods' network (libcni's caches are named after it).
	CNINetwork string `json:"cniNetwork"`
}

func nodeFile(clusterDir string) string { return filepath.Join(clusterDir, "node.json") }

func (n realNode) netns() string  { return filepath.Join(n.Dir, "netns") }
func (n realNode) socket() string { return filepath.Join(n.Dir, "containerd.sock") }
func (n realNode) path(p ...string) string {
	return filepath.Join(append([]string{n.Dir}, p...)...)
}

// nodeStartTimeout bounds the wait for the node to be Ready.
const nodeStartTimeout = 2 * time.Minute

// startRealNode makes the node and starts its daemons; the cluster's
// control plane is up. The daemons are the cluster's components (stopped
// with it, by PID); stopRealNode removes the rest.
func (c *Cluster) startRealNode(ctx context.Context, ca *CA, network *HostNetwork, slot int, opts Options, progress func(string, ...any)) error {
	n := realNode{
		Name:       c.Name + "-node",
		Dir:        filepath.Join(nodesDir, fmt.Sprintf("%d-%s", network.Index, c.Name)),
		IP:         network.nodeIP(slot),
		PodCIDR:    network.podCIDR(slot),
		Cgroup:     fmt.Sprintf("/jobferry/%d-%s", network.Index, c.Name),
		CNINetwork: fmt.Sprintf("jobferry-%d-%s", network.Index, c.Name),
	}
	if err := os.MkdirAll(n.path("cni", "conf"), 0o755); err != nil {
		return err
	}
	if err := writeJSON(nodeFile(c.Dir), n); err != nil {
		return err
	}
	progress("making a real node %s (%s, pods %s)", n.Name, n.IP, n.PodCIDR)
	if err := n.makeNetwork(network); err != nil {
		return err
	}
	if err := makeCgroup(n.Cgroup + "/daemons"); err != nil {
		return fmt.Errorf("cgroups of node %s: %w", n.Name, err)
	}
	if err := n.writeFiles(ca, c, network, slot, opts.BinDir); err != nil {
		return err
	}
	daemon := func(name, binary string, args ...string) (*Process, error) {
		path := filepath.Join(opts.BinDir, "nodes", "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
		launcher := []string{"env", "PATH=" + path, "nsenter", "--net=" + n.netns(), "--",
			"sh", "-c", joinCgroupScript(n.Cgroup+"/daemons") + `; exec "$0" "$@"`}
		return c.startComponent(name, launcher, binary, args)
	}
	progress("starting containerd")
	containerd, err := daemon("containerd", filepath.Join(opts.BinDir, "nodes", "bin", "containerd"), "--config", n.path("containerd.toml"))
	if err != nil {
		return err
	}
	ctr := func(args ...string) error {
		return command(filepath.Join(opts.BinDir, "nodes", "bin", "ctr"), append([]string{"--address", n.socket(), "--namespace", "k8s.io"}, args...)...)
	}
	if err := waitFor(ctx, opts.StartTimeout, containerd, func(context.Context) error { return ctr("version") }); err != nil {
		return err
	}
	images := []string{
		filepath.Join(opts.BinDir, "nodes", "images", NodeImageArchive(PauseImage)),
		filepath.Join(opts.BinDir, "nodes", "images", NodeImageArchive(BusyboxImage)),
	}
	progress("importing %d images into its containerd", len(images)+len(opts.NodeImages))
	for _, archive := range append(images, opts.NodeImages...) {
		if err := ctr("images", "import", archive); err != nil {
			return fmt.Errorf("importing %s into node %s: %w", archive, n.Name, err)
		}
	}
	progress("starting its cluster DNS")
	if err := grantClusterDNS(ctx, c.config); err != nil {
		return err
	}
	dns, err := daemon("coredns", filepath.Join(opts.BinDir, "coredns"), "-conf", n.path("Corefile"))
	if err != nil {
		return err
	}
	if err := waitFor(ctx, opts.StartTimeout, dns, httpOK("http://"+net.JoinHostPort(n.IP, strconv.Itoa(dnsReadyPort))+"/ready", nil)); err != nil {
		return err
	}
	progress("starting the kubelet and kube-proxy")
	kubelet, err := daemon("kubelet", filepath.Join(opts.BinDir, "kubelet"),
		"--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+n.path("kubelet.kubeconfig"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.IP,
		"--root-dir="+n.path("kubelet"),
		"--node-labels="+RealNodeLabel+"=true",
		"--v=1")
	if err != nil {
		return err
	}
	if _, err := daemon("kube-proxy", filepath.Join(opts.BinDir, "kube-proxy"), "--config="+n.path("kube-proxy.yaml"), "--v=1"); err != nil {
		return err
	}
	return waitFor(ctx, nodeStartTimeout, kubelet, nodeReady(c.config, n.Name))
}

// nodeReady holds once the Node named is Ready and schedulable.
func nodeReady(cfg *rest.Config, name string) func(context.Context) error {
	client, err := kubernetes.NewForConfig(cfg)
	return func(ctx context.Context) error {
		if err != nil {
			return err
		}
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeSchedulable(node) {
			return fmt.Errorf("node %s is not Ready yet", name)
		}
		return nil
	}
}

// RealNodeLabel marks real nodes (KWOK's carry type=kwok).
const RealNodeLabel = "jobferry.dev/real-node"

// makeNetwork creates the node's network namespace (a file under its
// directory, bind-mounted: unmounting it is deleting it), a veth pair from
// it to the host bridge, its addresses and routes, and the host route to
// its pods.
func (n realNode) makeNetwork(network *HostNetwork) error {
	f, err := os.Create(n.netns())
	if err != nil {
		return err
	}
	f.Close()
	hostVeth := fmt.Sprintf("jf%dv%s", network.Index, strings.TrimPrefix(n.IP, fmt.Sprintf("10.250.%d.", network.Index)))
	in := func(args ...string) []string { return append([]string{"--net=" + n.netns(), "--"}, args...) }
	steps := [][]string{
		{"unshare", "--net=" + n.netns(), "true"},
		// Made inside, its host end moved out to this process's namespace.
		append([]string{"nsenter"}, in("ip", "link", "add", "eth0", "type", "veth", "peer", "name", hostVeth, "netns", strconv.Itoa(os.Getpid()))...),
		{"ip", "link", "set", hostVeth, "master", network.Bridge, "up"},
		append([]string{"nsenter"}, in("ip", "addr", "add", n.IP+"/24", "dev", "eth0")...),
		append([]string{"nsenter"}, in("ip", "link", "set", "eth0", "up")...),
		append([]string{"nsenter"}, in("ip", "link", "set", "lo", "up")...),
		append([]string{"nsenter"}, in("ip", "route", "add", "default", "via", network.HostIP())...),
		// Routing between its pods' bridge and eth0; Services to the API
		// server (kube-proxy's DNAT) for traffic bridged among pods too.
		append([]string{"nsenter"}, in("sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.route_localnet=1", "net.bridge.bridge-nf-call-iptables=1")...),
		{"ip", "route", "add", n.PodCIDR, "via", n.IP},
	}
	for _, step := range steps {
		if err := command(step[0], step[1:]...); err != nil {
			return fmt.Errorf("network of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// writeFiles writes the node's certificates, kubeconfigs and the
// configuration of containerd, CNI, the kubelet and kube-proxy.
func (n realNode) writeFiles(ca *CA, c *Cluster, network *HostNetwork, slot int, binDir string) error {
	kubelet, err := ca.issue("system:node:"+n.Name, []string{"system:nodes"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if err := writeKubeconfig(ca.Kubeconfig(c.Name, c.Server, kubelet), n.path("kubelet.kubeconfig")); err != nil {
		return err
	}
	serving, err := ca.issue(n.Name, nil, []string{n.Name}, []net.IP{net.ParseIP(n.IP)}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	if err := serving.write(n.path("kubelet.crt"), n.path("kubelet.key")); err != nil {
		return err
	}
	dns, err := ca.issue(clusterDNSUser, nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if err := writeKubeconfig(ca.Kubeconfig(c.Name, c.Server, dns), n.path("coredns.kubeconfig")); err != nil {
		return err
	}
	proxy, err := ca.issue("system:kube-proxy", nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if err := writeKubeconfig(ca.Kubeconfig(c.Name, c.Server, proxy), n.path("kube-proxy.kubeconfig")); err != nil {
		return err
	}
	cni, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       n.CNINetwork,
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "cni0", "isGateway": true, "hairpinMode": true,
			// Pods keep their address towards the host, which routes the
			// node's pod subnet back to it.
			"ipMasq": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": n.path("cni", "ipam"),
				"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR, "gateway": network.podGateway(slot)}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}},
	}, "", "  ")
	if err != nil {
		return err
	}
	files := map[string]string{
		"cni/conf/10-jobferry.conflist": string(cni),
		"containerd.toml": fmt.Sprintf(containerdConfig, n.path("containerd", "root"), n.path("containerd", "state"), n.socket(),
			PauseImage, filepath.Join(binDir, "nodes", "bin", "runc"), n.path("runc"), filepath.Join(binDir, "nodes", "cni"), n.path("cni", "conf"), n.path("certs.d")),
		"kubelet.yaml": fmt.Sprintf(kubeletConfig, n.IP, filepath.Join(c.Dir, "pki", "ca.crt"), n.path("kubelet.crt"), n.path("kubelet.key"),
			n.Cgroup, n.socket(), n.path("pod-logs"), n.IP, ClusterDomain),
		"Corefile":        fmt.Sprintf(corefile, dnsReadyPort, ClusterDomain, n.path("coredns.kubeconfig")),
		"kube-proxy.yaml": fmt.Sprintf(kubeProxyConfig, n.path("kube-proxy.kubeconfig"), n.Name, n.PodCIDR),
	}
	for name, content := range files {
		if err := os.WriteFile(n.path(name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig: everything under the node's directory (no socket,
// state or runc root shared with another node or a system containerd),
// oom_score_adj within what this process may set (no CAP_SYS_RESOURCE
// here: runc fails to lower it otherwise), pods' network namespaces under
// its state directory (so unmounting the node's directory frees them), the
// registries it trusts in a directory of the node's (Cluster.TrustRegistry).
const containerdConfig = `version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = "%[3]s.ttrpc"

[debug]
  level = "warn"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = %[5]q
        Root = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[9]q
`

// kubeletConfig: cgroupfs driver under the node's own cgroup on this
// cgroup v1 host; its own pod log directory; no image garbage collection
// (the images are imported, nothing could pull them back) and eviction
// thresholds that a shared disk does not reach.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
tlsCertFile: %s
tlsPrivateKeyFile: %s
cgroupDriver: cgroupfs
cgroupRoot: %s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
serializeImagePulls: false
maxPods: 110
clusterDNS: [%s]
clusterDomain: %s
`

// ClusterDomain is the DNS domain of every cluster with a real node.
const ClusterDomain = "cluster.local"

// dnsReadyPort is where a node's CoreDNS says it is ready.
const dnsReadyPort = 8181

// corefile: the node's cluster DNS, in the node's network namespace on port
// 53 of every address it has (the kubelet gives pods the node's address as
// their nameserver), answering for the cluster's Services and pods from
// the API server. Nothing is forwarded: names outside the cluster are not
// its to answer (the node has no resolver of its own to forward to).
const corefile = `.:53 {
    errors
    ready :%d
    cache 5
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        ttl 5
    }
}
`

// clusterDNSUser is the identity of the nodes' CoreDNS (a client
// certificate of the cluster's CA); grantClusterDNS gives it what its
// kubernetes plugin watches, as kubeadm's system:coredns role does.
const clusterDNSUser = "jobferry:coredns"

// grantClusterDNS creates (or keeps) the ClusterRole and binding of
// clusterDNSUser.
func grantClusterDNS(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: clusterDNSUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces", "pods"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the cluster DNS's ClusterRole: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: clusterDNSUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterDNSUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: clusterDNSUser}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the cluster DNS's ClusterRoleBinding: %w", err)
	}
	return nil
}

// kubeProxyConfig: iptables in the node's namespace; no host-wide
// conntrack setting (a zero leaves each as it is).
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// stopRealNode removes what the node left once its daemons are stopped:
// every process still in its cgroups (containers, shims), its mounts
// (container filesystems, volumes, network namespaces, its own), its
// cgroups, the host route to its pods, its entries in the host's fixed
// paths. It works from node.json alone, so also after a crash.
func stopRealNode(clusterDir string) error {
	data, err := os.ReadFile(nodeFile(clusterDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var n realNode
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("reading %s: %w", nodeFile(clusterDir), err)
	}
	var errs []error
	if err := killCgroupTree(n.Cgroup, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(n.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroupTree(n.Cgroup); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		// Nothing mounted below it any more.
		if err := os.RemoveAll(n.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := command("ip", "route", "del", n.PodCIDR, "via", n.IP); err != nil && !strings.Contains(err.Error(), "No such process") && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	errs = append(errs, removeHostEntries(n))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tearing down node %s: %w", n.Name, err)
	}
	return os.Remove(nodeFile(clusterDir))
}

// removeHostEntries removes what the node left in the host's fixed paths:
// its containers' log links in /var/log/containers, libcni's cached
// results of its pods' network.
func removeHostEntries(n realNode) error {
	var errs []error
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, n.Dir+"/") {
			if err := os.Remove(l); err != nil {
				errs = append(errs, err)
			}
		}
	}
	results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.CNINetwork+"-*"))
	for _, r := range results {
		if err := os.Remove(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
