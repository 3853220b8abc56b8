// Package devenv starts jobferry for real on local clusters: a manager
// cluster running the jobferry manager binary (webhooks registered with a
// certificate from the environment's CA) and worker clusters running the
// jobferry worker binary, each registered with the manager through a
// kubeconfig Secret and a WorkerCluster. `jobferry-dev up`, the demo and the
// e2e tests use it.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/admission"
)

// SystemNamespace holds the worker kubeconfig Secrets on the manager.
const SystemNamespace = "jobferry-system"

// ManagerUser is the identity the jobferry manager runs as on the manager
// cluster (a client certificate in system:masters): the state policy lets
// it alone write jobferry's state on Jobs.
const ManagerUser = "jobferry-manager"

// StatePolicyName names the state policy and its binding on the manager.
const StatePolicyName = "jobferry-state"

// GPUResource is the extended resource the fake gpu nodes offer.
const GPUResource = corev1.ResourceName("example.com/gpu")

// GPUTaint keeps ordinary pods off gpu pools.
var GPUTaint = corev1.Taint{Key: "jobferry.dev/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// GeneralPool is a pool of ordinary nodes.
func GeneralPool(nodes int) localcluster.Pool {
	return localcluster.Pool{Name: "general", Nodes: nodes, Allocatable: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}}
}

// GPUPool is a pool of tainted nodes offering GPUResource.
func GPUPool(nodes int) localcluster.Pool {
	return localcluster.Pool{
		Name: "gpu", Nodes: nodes,
		Labels: map[string]string{"accelerator": "example-gpu"},
		Taints: []corev1.Taint{GPUTaint},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
			GPUResource:           resource.MustParse("8"),
		},
	}
}

// DevJobControllers is the development choice of Job controllers: worker-2
// runs its mirrors with the jobferry worker's own Job controller, the others
// with kube-controller-manager's.
var DevJobControllers = map[string]v1alpha1.JobControllerMode{"worker-2": v1alpha1.JobControllerWorker}

// DevWorkers is the development topology: worker-1 with a general and a
// tainted gpu pool, further workers with a general pool only.
func DevWorkers(n int) []localcluster.Spec {
	var workers []localcluster.Spec
	for i := 1; i <= n; i++ {
		w := localcluster.Spec{Name: fmt.Sprintf("worker-%d", i), Pools: []localcluster.Pool{GeneralPool(2)}}
		if i == 1 {
			w.Pools = append(w.Pools, GPUPool(2))
		}
		workers = append(workers, w)
	}
	return workers
}

// RealNodeWorkers is the topology on real nodes: each worker one real node
// (localcluster.Spec.RealNode), whose pods run real containers, and no fake
// ones.
func RealNodeWorkers(n int) []localcluster.Spec {
	var workers []localcluster.Spec
	for i := 1; i <= n; i++ {
		workers = append(workers, localcluster.Spec{Name: fmt.Sprintf("worker-%d", i), RealNode: true})
	}
	return workers
}

// Options configure an environment.
type Options struct {
	Dir      string
	Workers  []localcluster.Spec
	Detached bool
	Progress io.Writer
	// ManagerArgs are extra flags for the manager binary.
	ManagerArgs []string
	// ManagerEnv are extra variables of the manager's environment, NAME=value
	// (GOMEMLIMIT, GOGC).
	ManagerEnv []string
	// ManagerReplicas runs that many manager processes with leader election
	// (default 1, without). The webhooks are registered at the first one.
	ManagerReplicas int
	// ManagerCPUs pins the manager cluster's processes, the jobferry manager
	// included, to these CPUs (a taskset list); Workers carry their own.
	ManagerCPUs string
	// ManagerKubernetes is the manager cluster's Kubernetes minor when not
	// the pinned one (localcluster.Spec.Kubernetes).
	ManagerKubernetes string
	// ManagerClusterProfiling serves the manager cluster's API server's
	// /debug/pprof/ (the bench profiles it); ManagerProfiling serves each
	// manager replica's (Replica.PprofURL).
	ManagerClusterProfiling, ManagerProfiling bool
	// JobControllers sets spec.jobController of a worker's WorkerCluster
	// (by worker name; Builtin when absent).
	JobControllers map[string]v1alpha1.JobControllerMode
	// Kueue, when set, runs Kueue (bin/kueue, with its CRDs) on the manager
	// cluster with these options, and the manager with --kueue.
	Kueue *localcluster.KueueOptions
	// ChartIdentity registers each worker (with nodes) with the worker
	// chart's identity for the manager (its ServiceAccount's token, its
	// rights, its inspection FlowSchema) instead of an administrator's
	// credential: API Priority and Fairness then applies to the manager as
	// on an installation's worker.
	ChartIdentity bool
	// FollowedLogs is how many pod logs the environment's users will follow
	// at once (localcluster.EnvironmentSpec.FollowedLogs).
	FollowedLogs int
	// Simulate starts what publishes the capacity of simulated workers
	// (APIServerOnly), once they are registered: a worker counts as
	// connected only with a summary.
	Simulate func(ctx context.Context, e *Env) error
}

// Env is a running jobferry environment.
type Env struct {
	*localcluster.Environment
	// ManagerProcess is the (first) jobferry manager process: with
	// several, the one that leads when Start returns.
	ManagerProcess *localcluster.Process
	// MetricsURL serves the (first) manager's Prometheus metrics.
	MetricsURL string
	// Replicas are all manager processes, with their metrics URLs.
	Replicas []Replica
	// WorkerMetricsURLs serve each worker binary's Prometheus metrics, by
	// worker name.
	WorkerMetricsURLs map[string]string
}

// Replica is one manager process.
type Replica struct {
	Process    *localcluster.Process
	MetricsURL string
	// ReadyURL is its readiness endpoint.
	ReadyURL string
	// PprofURL serves its /debug/pprof/ (Options.ManagerProfiling).
	PprofURL string
}

// KillManager SIGKILLs the manager binary (no clean-up of any kind, as a
// crash or an OOM kill) and starts it again, returning once it is ready.
func (e *Env) KillManager(ctx context.Context) error {
	if err := syscall.Kill(e.ManagerProcess.PID, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing the manager: %w", err)
	}
	return e.RestartManager(ctx)
}

// RestartManager starts the (first) manager binary again with the same
// arguments, once it was stopped or killed, and returns once it is ready.
func (e *Env) RestartManager(ctx context.Context) error { return e.RestartReplica(ctx, 0) }

// RestartReplica starts manager replica i again with the same arguments,
// once it was stopped or killed, and returns once it is ready.
func (e *Env) RestartReplica(ctx context.Context, i int) error {
	r := &e.Replicas[i]
	p, err := e.Manager.RestartComponent(r.Process.Name)
	if err != nil {
		return err
	}
	r.Process = p
	if i == 0 {
		e.ManagerProcess = p
	}
	return localcluster.WaitHealthy(ctx, p, r.ReadyURL, time.Minute)
}

// Start brings up the clusters, jobferry's binaries and the registrations
// between them, and returns once every WorkerCluster is Connected.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	binDir, err := localcluster.BinDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"manager", "worker"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make build` first", b, binDir)
		}
	}
	environment, err := localcluster.StartEnvironment(ctx, localcluster.EnvironmentSpec{
		Manager: localcluster.Spec{Name: "manager", CPUs: opts.ManagerCPUs, Profiling: opts.ManagerClusterProfiling, Kubernetes: opts.ManagerKubernetes}, Workers: opts.Workers,
		FollowedLogs: opts.FollowedLogs,
	}, localcluster.EnvironmentOptions{Dir: opts.Dir, Detached: opts.Detached, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	env := &Env{Environment: environment}
	if err := env.start(ctx, binDir, opts); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return env, nil
}

func (e *Env) start(ctx context.Context, binDir string, opts Options) error {
	managerClient, err := client.New(e.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		return err
	}
	if err := localcluster.InstallCRDs(ctx, e.Manager.RESTConfig(), v1alpha1.CRDs, "crds/jobferry.dev_workerclusters.yaml"); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}
	if err := managerClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", SystemNamespace, err)
	}
	for _, w := range e.Workers {
		if err := localcluster.InstallCRDs(ctx, w.RESTConfig(), v1alpha1.CRDs, "crds/jobferry.dev_clustercapacities.yaml"); err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		if w.APIServerOnly {
			// A simulated worker: no nodes for the worker binary to
			// summarise; whoever simulates it publishes its capacity.
			if err := Register(ctx, managerClient, w.Name, w.KubeconfigPath, opts.JobControllers[w.Name]); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(opts.Progress, "%s: starting the jobferry worker\n", w.Name)
		ports, err := localcluster.FreePorts(2)
		if err != nil {
			return err
		}
		p, err := w.StartComponent("jobferry-worker", filepath.Join(binDir, "worker"),
			"--kubeconfig="+w.KubeconfigPath, "--worker-name="+w.Name, "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
			"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]))
		if err != nil {
			return err
		}
		if e.WorkerMetricsURLs == nil {
			e.WorkerMetricsURLs = map[string]string{}
		}
		e.WorkerMetricsURLs[w.Name] = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
		if err := localcluster.WaitHealthy(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), time.Minute); err != nil {
			return err
		}
		kubeconfig := w.KubeconfigPath
		if opts.ChartIdentity {
			fmt.Fprintf(opts.Progress, "%s: applying the worker chart's identity for the manager\n", w.Name)
			if kubeconfig, err = chartIdentityKubeconfig(ctx, w, binDir); err != nil {
				return err
			}
		}
		if err := Register(ctx, managerClient, w.Name, kubeconfig, opts.JobControllers[w.Name]); err != nil {
			return err
		}
	}
	if opts.Kueue != nil {
		fmt.Fprintln(opts.Progress, "manager: starting Kueue")
		kueueOpts := *opts.Kueue
		kueueOpts.BinDir = binDir
		if _, err := e.Manager.StartKueue(ctx, kueueOpts); err != nil {
			return fmt.Errorf("starting Kueue: %w", err)
		}
		opts.ManagerArgs = append([]string{"--kueue"}, opts.ManagerArgs...)
	}
	if err := e.startManager(ctx, binDir, opts); err != nil {
		return err
	}
	if opts.Simulate != nil {
		if err := opts.Simulate(ctx, e); err != nil {
			return err
		}
	}
	fmt.Fprintln(opts.Progress, "manager: waiting for every worker to be Connected")
	return WaitConnected(ctx, managerClient, len(e.Workers), time.Minute)
}

func (e *Env) startManager(ctx context.Context, binDir string, opts Options) error {
	fmt.Fprintln(opts.Progress, "manager: starting the jobferry manager")
	certDir := filepath.Join(e.Manager.Dir, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return err
	}
	certPEM, keyPEM, err := e.CA.IssueServing("jobferry-webhook", InspectionServiceDNSName)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), certPEM, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), keyPEM, 0o600); err != nil {
		return err
	}
	kubeconfig := filepath.Join(e.Manager.Dir, "jobferry-manager.kubeconfig")
	if err := e.CA.WriteClientKubeconfig(kubeconfig, e.Manager.Server, ManagerUser, "system:masters"); err != nil {
		return err
	}
	replicas := max(opts.ManagerReplicas, 1)
	var webhookPort, inspectionPort int
	for i := range replicas {
		ports, err := localcluster.FreePorts(5)
		if err != nil {
			return err
		}
		metricsPort, probePort := ports[0], ports[1]
		if i == 0 {
			webhookPort, inspectionPort = ports[2], ports[3]
		}
		args := []string{
			"--kubeconfig=" + kubeconfig,
			"--namespace=" + SystemNamespace,
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort),
			"--webhook-bind-host=127.0.0.1",
			"--webhook-port=" + strconv.Itoa(ports[2]),
			"--webhook-cert-dir=" + certDir,
			"--inspection-bind-address=127.0.0.1:" + strconv.Itoa(ports[3]),
		}
		if replicas > 1 {
			args = append(args, "--leader-elect")
		}
		var pprofURL string
		if opts.ManagerProfiling {
			args = append(args, "--pprof-bind-address=127.0.0.1:"+strconv.Itoa(ports[4]))
			pprofURL = fmt.Sprintf("http://127.0.0.1:%d", ports[4])
		}
		name := "jobferry-manager"
		if i > 0 {
			name = fmt.Sprintf("jobferry-manager-%d", i+1)
		}
		p, err := e.Manager.StartComponentWithEnv(name, opts.ManagerEnv, filepath.Join(binDir, "manager"), append(args, opts.ManagerArgs...)...)
		if err != nil {
			return err
		}
		readyURL := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
		if err := localcluster.WaitHealthy(ctx, p, readyURL, time.Minute); err != nil {
			return err
		}
		metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
		e.Replicas = append(e.Replicas, Replica{Process: p, MetricsURL: metricsURL, ReadyURL: readyURL, PprofURL: pprofURL})
		if i == 0 {
			e.ManagerProcess, e.MetricsURL = p, metricsURL
			if replicas > 1 {
				if err := waitLeading(ctx, metricsURL, 3*time.Minute); err != nil {
					return err
				}
			}
		}
	}
	managerClient, err := client.New(e.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		return err
	}
	dispatch, err := metav1.ParseToLabelSelector(admission.DefaultDispatchNamespaceSelector)
	if err != nil {
		return err
	}
	reserved := append(append(slices.Clone(admission.AlwaysReserved), admission.DefaultReservedNamespaces), SystemNamespace)
	mutating, validating := admission.WebhookConfigurations(fmt.Sprintf("https://127.0.0.1:%d", webhookPort), e.CA.CertPEM, dispatch, reserved, ManagerUser)
	policy, binding := admission.StatePolicy(StatePolicyName, ManagerUser)
	// The manager's pods are dry-runs only, as the chart has it.
	podsPolicy, podsBinding := admission.DryRunPodsPolicy("jobferry-dry-run-pods", ManagerUser)
	for _, obj := range []client.Object{mutating, validating, policy, binding, podsPolicy, podsBinding} {
		if err := managerClient.Create(ctx, obj); err != nil {
			return fmt.Errorf("registering %s: %w", obj.GetName(), err)
		}
	}
	// The first replica's inspection API (an ExternalName Service reaches
	// one process only).
	return RegisterInspectionAPI(ctx, managerClient, inspectionPort, e.CA.CertPEM)
}
