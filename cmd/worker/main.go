// Command worker runs in each worker cluster: it publishes the
// ClusterCapacity summary the manager places Jobs by, and runs the Jobs whose
// spec.managedBy is jobferry.dev/worker with its own Job controller.
package main

import (
	"flag"
	"os"
	"time"

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
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
		poolLabel   = flag.String("pool-label", jobferryv1alpha1.DefaultPoolLabel, "node label whose values group nodes into pools")
		minInterval = flag.Duration("min-publish-interval", time.Second, "least time between two writes of the ClusterCapacity summary")
		heartbeat   = flag.Duration("heartbeat-interval", 30*time.Second, "how often an unchanged summary is written again")
		runJobs     = flag.Bool("job-controller", true, "run Jobs with spec.managedBy "+jobferryv1alpha1.WorkerManagedBy)
		unmanaged   = flag.Bool("manage-unmanaged-jobs", false, "also run Jobs without spec.managedBy; only for control planes whose kube-controller-manager does not run its job-controller")
		jobWorkers  = flag.Int("concurrent-job-syncs", 5, "Jobs synced in parallel")
		kubeQPS     = flag.Float64("kube-api-qps", 500, "client QPS towards the worker cluster (the local clusters run kube-controller-manager at the same)")
		kubeBurst   = flag.Int("kube-api-burst", 1000, "client burst towards the worker cluster")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader so only one replica runs Jobs and publishes capacity (two Job controllers on the same Jobs would over-create pods)")
		leaseNS     = flag.String("leader-election-namespace", "jobferry-system", "namespace of the leader election lease")
		leaseDur    = flag.Duration("leader-elect-lease-duration", 15*time.Second, "how long a lost leader's lease holds before another replica takes over")
		renewDl     = flag.Duration("leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
		retryPeriod = flag.Duration("leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
		memoryRatio = flag.Float64("memory-limit-ratio", memorylimit.DefaultRatio, "the Go runtime's soft memory limit as a part of the container's memory limit (env "+memorylimit.EnvVar+", which the chart sets from limits.memory); GOMEMLIMIT, when set, wins")
	)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.RawZapOpts(lazylog.Option())))
	log := ctrl.Log.WithName("worker")
	switch {
	case *unmanaged && !*runJobs:
		log.Error(nil, "--manage-unmanaged-jobs needs --job-controller")
		os.Exit(2)
	case *jobWorkers < 1:
		log.Error(nil, "--concurrent-job-syncs must be at least 1", "value", *jobWorkers)
		os.Exit(2)
	}
	softLimit, why, err := memorylimit.Apply(*memoryRatio)
	if err != nil {
		log.Error(err, "setting the soft memory limit")
		os.Exit(2)
	}
	log.Info("soft memory limit", "bytes", softLimit, "why", why)

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(*kubeQPS), *kubeBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  jobferryv1alpha1.NewScheme(),
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		Cache:                   worker.CacheOptions(),
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "jobferry-worker",
		LeaderElectionNamespace: *leaseNS,
		LeaseDuration:           leaseDur,
		RenewDeadline:           renewDl,
		RetryPeriod:             retryPeriod,
		// A replica that stops cleanly hands over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "creating the controller manager")
		os.Exit(1)
	}
	metrics.Registry.MustRegister(buildinfo.Collector("worker"))
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	publisher := &worker.Publisher{
		Client: mgr.GetClient(), PoolLabel: *poolLabel,
		MinInterval: *minInterval, Heartbeat: *heartbeat, Clock: clock.RealClock{},
	}
	if err := publisher.SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the capacity publisher")
		os.Exit(1)
	}
	if *runJobs {
		// core/v1 Events, as kube-controller-manager writes them (see
		// jobcontroller.Reconciler.Recorder).
		recorder := mgr.GetEventRecorderFor("jobferry-worker") //nolint:staticcheck
		jobs := &jobcontroller.Reconciler{
			Client: mgr.GetClient(), Recorder: recorder, Clock: clock.RealClock{},
			ManageUnmanaged: *unmanaged, Workers: *jobWorkers,
		}
		if err := jobs.SetupWithManager(mgr); err != nil {
			log.Error(err, "setting up the Job controller")
			os.Exit(1)
		}
	}
	log.Info("starting", "poolLabel", *poolLabel, "jobController", *runJobs, "manageUnmanagedJobs", *unmanaged)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the controller manager")
		os.Exit(1)
	}
}
