// Command worker runs in each worker cluster: it publishes the
// ClusterCapacity summary the manager places Jobs by, and runs the Jobs whose
// spec.managedBy is jobferry.dev/worker with its own Job controller.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/buildinfo"
	"github.com/jobferry/jobferry/internal/lazylog"
	"github.com/jobferry/jobferry/internal/memorylimit"
	"github.com/jobferry/jobferry/worker"
	"github.com/jobferry/jobferry/worker/jobcontroller"
)

// Leader election's rights in the lease namespace (the chart's release
// namespace), for the worker chart (hack/generate.sh).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=jobferry-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=jobferry-system,resources=events,verbs=create;patch

func main() {
	o := defineFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.RawZapOpts(lazylog.Option())))
	log := ctrl.Log.WithName("worker")
	if err := o.check(); err != nil {
		log.Error(nil, err.Error())
		os.Exit(2)
	}
	softLimit, why, err := memorylimit.Apply(o.memoryRatio)
	if err != nil {
		log.Error(err, "setting the soft memory limit")
		os.Exit(2)
	}
	log.Info("soft memory limit", "bytes", softLimit, "why", why)
	mgr, err := newManager(o)
	if err != nil {
		log.Error(err, "setting up the worker")
		os.Exit(1)
	}
	log.Info("starting", "poolLabel", o.poolLabel, "jobController", o.runJobs, "manageUnmanagedJobs", o.unmanaged)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the controller manager")
		os.Exit(1)
	}
}

// options are the worker's flags.
type options struct {
	metricsAddr, probeAddr, poolLabel, leaseNS string
	workerName                                 string
	minInterval, heartbeat                     time.Duration
	runJobs, unmanaged, leaderElect            bool
	jobWorkers, kubeBurst                      int
	kubeQPS, memoryRatio                       float64
	leaseDuration, renewDeadline, retryPeriod  time.Duration
}

// defineFlags defines the worker's flags on fs.
func defineFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	fs.StringVar(&o.workerName, "worker-name", "", "the name the manager knows this worker by (its WorkerCluster): a worker label on jobferry's own metrics, so dashboards need no relabelling; empty: none")
	fs.StringVar(&o.poolLabel, "pool-label", jobferryv1alpha1.DefaultPoolLabel, "node label whose values group nodes into pools")
	fs.DurationVar(&o.minInterval, "min-publish-interval", time.Second, "least time between two writes of the ClusterCapacity summary")
	fs.DurationVar(&o.heartbeat, "heartbeat-interval", 30*time.Second, "how often an unchanged summary is written again")
	fs.BoolVar(&o.runJobs, "job-controller", true, "run Jobs with spec.managedBy "+jobferryv1alpha1.WorkerManagedBy)
	fs.BoolVar(&o.unmanaged, "manage-unmanaged-jobs", false, "also run Jobs without spec.managedBy; only for control planes whose kube-controller-manager does not run its job-controller")
	fs.IntVar(&o.jobWorkers, "concurrent-job-syncs", 5, "Jobs synced in parallel")
	fs.Float64Var(&o.kubeQPS, "kube-api-qps", 500, "client QPS towards the worker cluster (the local clusters run kube-controller-manager at the same)")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", 1000, "client burst towards the worker cluster")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so only one replica runs Jobs and publishes capacity (two Job controllers on the same Jobs would over-create pods)")
	fs.StringVar(&o.leaseNS, "leader-election-namespace", "jobferry-system", "namespace of the leader election lease")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lost leader's lease holds before another replica takes over")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	fs.Float64Var(&o.memoryRatio, "memory-limit-ratio", memorylimit.DefaultRatio, "the Go runtime's soft memory limit as a part of the container's memory limit (env "+memorylimit.EnvVar+", which the chart sets from limits.memory); GOMEMLIMIT, when set, wins")
	return o
}

// check refuses flags that do not go together.
func (o *options) check() error {
	switch {
	case o.unmanaged && !o.runJobs:
		return errors.New("--manage-unmanaged-jobs needs --job-controller")
	case o.jobWorkers < 1:
		return fmt.Errorf("--concurrent-job-syncs must be at least 1, not %d", o.jobWorkers)
	}
	return nil
}

// newManager makes the controller manager and adds the worker's parts: the
// capacity publisher and, unless told not to, the Job controller.
func newManager(o *options) (ctrl.Manager, error) {
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(o.kubeQPS), o.kubeBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  jobferryv1alpha1.NewScheme(),
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		Cache:                   worker.CacheOptions(),
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "jobferry-worker",
		LeaderElectionNamespace: o.leaseNS,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		// A replica that stops cleanly hands over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	registry := workerMetrics(o.workerName)
	registry.MustRegister(buildinfo.Collector("worker"))
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the readiness check: %w", err)
	}
	publisher := &worker.Publisher{
		Client: mgr.GetClient(), PoolLabel: o.poolLabel,
		MinInterval: o.minInterval, Heartbeat: o.heartbeat, Clock: clock.RealClock{},
	}
	if err := publisher.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the capacity publisher: %w", err)
	}
	if o.runJobs {
		// core/v1 Events, as kube-controller-manager writes them (see
		// jobcontroller.Reconciler.Recorder).
		recorder := mgr.GetEventRecorderFor("jobferry-worker") //nolint:staticcheck
		jobs := &jobcontroller.Reconciler{
			Client: mgr.GetClient(), Recorder: recorder, Clock: clock.RealClock{},
			ManageUnmanaged: o.unmanaged, Workers: o.jobWorkers, Metrics: registry,
		}
		if err := jobs.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the Job controller: %w", err)
		}
	}
	return mgr, nil
}

// workerMetrics is where jobferry's own metrics of the worker are
// registered: controller-runtime's registry, each series labelled
// worker=<name> when the worker knows its name (the dashboards select by it).
func workerMetrics(name string) prometheus.Registerer {
	if name == "" {
		return metrics.Registry
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"worker": name}, metrics.Registry)
}
