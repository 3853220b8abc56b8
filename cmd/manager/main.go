// Command manager runs in the manager cluster: it serves the opt-in webhook,
// keeps a connection to every WorkerCluster, places manager Jobs, creates
// their mirrors and copies their status back.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	webhookadmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/buildinfo"
	"github.com/jobferry/jobferry/internal/installation"
	"github.com/jobferry/jobferry/internal/lazylog"
	"github.com/jobferry/jobferry/internal/memorylimit"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/election"
	"github.com/jobferry/jobferry/manager/inspection"
	"github.com/jobferry/jobferry/manager/jobs"
	jobpolicy "github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/metricsauth"
	"github.com/jobferry/jobferry/manager/orphans"
	"github.com/jobferry/jobferry/manager/queue"
	"github.com/jobferry/jobferry/manager/statekey"
	"github.com/jobferry/jobferry/manager/tenantlimits"
	"github.com/jobferry/jobferry/manager/warnings"
	"github.com/jobferry/jobferry/manager/workercluster"
	"github.com/jobferry/jobferry/manager/workers"
)

// The rights the manager uses in its own namespace (the chart's release
// namespace), for the manager chart (hack/generate.sh): the workers'
// kubeconfig Secrets (and the webhook certificate Secret) and the leader
// election lease (and its Event); updating a kubeconfig Secret when the
// manager renews a worker's token (manager/workers/credential.go); creating the
// Secret of the key that seals jobferry's state on manager Jobs, the first
// time (manager/statekey). Writing the certificate Secret and the webhook
// configurations' caBundle, when the manager rotates the certificate, is
// granted by the chart for exactly those objects.
// +kubebuilder:rbac:groups="",namespace=jobferry-system,resources=secrets,verbs=list;watch;create;update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=jobferry-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=jobferry-system,resources=events,verbs=create

func main() {
	if len(os.Args) > 1 && os.Args[1] == uninstallCheckCommand {
		os.Exit(uninstallCheck(os.Args[2:], os.Stdout, os.Stderr))
	}
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	c, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.RawZapOpts(lazylog.Option())))
	log := ctrl.Log.WithName("manager")
	softLimit, why, err := memorylimit.Apply(c.memoryLimitRatio)
	if err != nil {
		log.Error(err, "setting the soft memory limit")
		os.Exit(2)
	}
	log.Info("soft memory limit", "bytes", softLimit, "why", why)
	if c.deprecatedJobWorkers {
		log.Info("--job-workers is deprecated; use --concurrent-job-syncs", "concurrent-job-syncs", c.jobSyncs)
	}
	if err := run(ctrl.SetupSignalHandler(), c); err != nil {
		log.Error(err, "the manager stopped")
		os.Exit(1)
	}
}

// config is the manager's command line, parsed and checked.
type config struct {
	metricsAddr, probeAddr, pprofAddr         string
	leaderElect                               bool
	leaseDuration, renewDeadline, retryPeriod time.Duration
	warmUpTimeout                             time.Duration
	namespace, origin                         string
	kubeQPS, workerQPS, inspectionWorkerQPS   float64
	memoryLimitRatio                          float64
	kubeBurst, workerBurst, inspectionBurst   int
	healthInterval                            time.Duration
	jobSyncs                                  int
	deprecatedJobWorkers                      bool
	createNamespaces                          bool
	gcInterval, workerLost, statusBatch       time.Duration
	workerNamespaceGrace                      time.Duration
	deleteFinished                            bool
	capacitySettle                            time.Duration
	webhookHost                               string
	webhookPort                               int
	webhookCertDir, certSecret                string
	certRotation                              bool
	webhookService                            string
	certDNSNames                              []string
	mutatingName, validatingName              string
	metricsSecure, metricsAuthorize           bool
	dispatchNamespaces                        labels.Selector
	reserved                                  []string
	renewThreshold                            float64
	allowWeakerPSA                            bool
	stateKeySecret                            string
	kueue                                     bool
	requireQueueName                          bool
	inspectionAddr, apiService                string
	inspection                                inspection.Limits
}

// parseFlags parses the command line into a config, or says which flag is
// wrong and why.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	raw := defineFlags(fs, &c)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	err := finishFlags(&c, raw)
	return c, err
}

// rawFlags are the flags that become a config's fields only once parsed and
// checked (finishFlags).
type rawFlags struct {
	dispatchNS, reservedNS, extraDNSNames *string
}

// defineFlags defines the manager's flags on fs, each writing into c.
func defineFlags(fs *flag.FlagSet, c *config) rawFlags {
	var raw rawFlags
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to; 0 disables them")
	fs.StringVar(&c.pprofAddr, "pprof-bind-address", "0", "address the Go profiler (/debug/pprof/) binds to, for profiling under load; 0 disables it")
	fs.BoolVar(&c.leaderElect, "leader-elect", false, "elect a leader so only one replica dispatches and copies status (all replicas serve the webhooks)")
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lost leader's lease holds before another replica takes over")
	fs.DurationVar(&c.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
	fs.DurationVar(&c.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	fs.DurationVar(&c.warmUpTimeout, "leader-elect-warm-up-timeout", 2*time.Minute, "how long a replica whose caches of the workers' mirrors are still listing waits before it stands for the lease anyway (a warm replica stands at once, so a cold one restarted beside it does not take over first)")
	fs.StringVar(&c.namespace, "namespace", "jobferry-system", "namespace holding the worker kubeconfig Secrets and the leader election lease")
	fs.StringVar(&c.origin, "origin", "jobferry", "name of this installation, put on every mirror (label jobferry.dev/origin) so several managers can share a worker")
	fs.Float64Var(&c.kubeQPS, "kube-api-qps", 500, "client QPS towards the manager cluster")
	fs.Float64Var(&c.memoryLimitRatio, "memory-limit-ratio", memorylimit.DefaultRatio, "the Go runtime's soft memory limit as a part of the container's memory limit (env "+memorylimit.EnvVar+", which the chart sets from limits.memory); GOMEMLIMIT, when set, wins")
	fs.IntVar(&c.kubeBurst, "kube-api-burst", 1000, "client burst towards the manager cluster")
	fs.Float64Var(&c.workerQPS, "worker-api-qps", 500, "client QPS towards each worker (its own limiter per worker)")
	fs.IntVar(&c.workerBurst, "worker-api-burst", 1000, "client burst towards each worker")
	fs.Float64Var(&c.inspectionWorkerQPS, "inspection-worker-api-qps", 20, "client QPS of the inspection API towards each worker, all users' inspections together (apart from --worker-api-qps, dispatch's)")
	fs.IntVar(&c.inspectionBurst, "inspection-worker-api-burst", 40, "client burst of the inspection API towards each worker")
	fs.DurationVar(&c.healthInterval, "worker-health-interval", 10*time.Second, "how often each worker's API server is probed while connected")
	fs.IntVar(&c.jobSyncs, "concurrent-job-syncs", 8, "manager Jobs reconciled at once")
	// The flag's first name, kept so existing installations start.
	fs.Func("job-workers", "deprecated: use --concurrent-job-syncs", func(v string) error {
		c.deprecatedJobWorkers = true
		return fs.Set("concurrent-job-syncs", v)
	})
	fs.BoolVar(&c.createNamespaces, "create-worker-namespaces", true, "create a mirror's namespace on the worker when it is missing, where the worker credential may (the Authorized condition says whether it may)")
	fs.DurationVar(&c.gcInterval, "gc-interval", time.Minute, "how often every connected worker is scanned for mirrors whose manager Job is gone, and for namespaces the manager created there that are no longer needed; it also runs at start and on every reconnect, and only then when 0")
	fs.DurationVar(&c.workerNamespaceGrace, "worker-namespace-grace", 10*time.Minute, "how long the manager's namespace must have been gone before the namespace of that name the manager created on a worker is deleted (with no Job left in it, and where the worker credential may list and delete namespaces: the worker chart's managerIdentity.allowNamespaceDeletion)")
	fs.DurationVar(&c.workerLost, "worker-lost-timeout", 15*time.Minute, "how long a worker may stay disconnected before its unfinished Jobs are dispatched elsewhere")
	fs.DurationVar(&c.statusBatch, "status-batch-period", time.Second, "how long changes of a running mirror are gathered into one status copy to the manager Job while other Jobs' changes wait to be copied (on a quiet manager, and for a final status, the copy goes at once)")
	fs.BoolVar(&c.deleteFinished, "delete-finished-mirrors", false, "delete a finished mirror, its pods and their logs from the worker once its final status is copied, rather than when the manager Job is deleted (by its user, its ttlSecondsAfterFinished or its CronJob)")
	fs.DurationVar(&c.capacitySettle, "capacity-settle-time", 2*time.Second, "how long after a mirror's pods run a worker's capacity summary is trusted to include them")
	fs.StringVar(&c.webhookHost, "webhook-bind-host", "", "host the webhook server binds to (empty: all interfaces)")
	fs.IntVar(&c.webhookPort, "webhook-port", 9443, "port of the webhook server; 0 disables the webhooks")
	fs.StringVar(&c.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding tls.crt and tls.key for the webhook server (with --webhook-cert-secret, where the manager copies them)")
	fs.StringVar(&c.certSecret, "webhook-cert-secret", "", "Secret in --namespace holding the serving certificate of the webhooks (and of the metrics endpoint with --metrics-secure); empty: the files in --webhook-cert-dir")
	fs.BoolVar(&c.certRotation, "webhook-cert-rotation", false, "issue and rotate the certificate in --webhook-cert-secret, and put its CA into the webhook configurations; false: cert-manager (or someone) writes the Secret")
	fs.StringVar(&c.webhookService, "webhook-service", "", "DNS name of the Service in front of the webhooks (name.namespace.svc), for the rotated certificate")
	raw.extraDNSNames = fs.String("webhook-cert-extra-dns-names", "", "comma-separated further DNS names for the rotated certificate (the metrics Service)")
	fs.StringVar(&c.mutatingName, "mutating-webhook-configuration", "jobferry-opt-in", "MutatingWebhookConfiguration whose caBundle the rotation keeps")
	fs.StringVar(&c.validatingName, "validating-webhook-configuration", "jobferry-validate", "ValidatingWebhookConfiguration whose caBundle the rotation keeps")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", false, "serve metrics over HTTPS with the certificate of --webhook-cert-secret")
	fs.BoolVar(&c.metricsAuthorize, "metrics-authorize", false, "serve metrics only to callers whose bearer token this cluster's API server authenticates and allows to get the non-resource URL /metrics (TokenReview, SubjectAccessReview); needs --metrics-secure")
	raw.dispatchNS = fs.String("dispatch-namespace-selector", admission.DefaultDispatchNamespaceSelector, "label selector of the namespaces whose Jobs are dispatched (the opt-in webhook's registration must select the same namespaces)")
	raw.reservedNS = fs.String("reserved-namespaces", admission.DefaultReservedNamespaces, "comma-separated namespaces never dispatched from or to, besides kube-system, kube-public, kube-node-lease and --namespace (default: the workers' jobferry namespace)")
	fs.Float64Var(&c.renewThreshold, "credential-renewal-threshold", workers.DefaultRenewalThreshold, "fraction of a worker token's lifetime after which the manager renews it (TokenRequest for its ServiceAccount on the worker) and writes the new token into the kubeconfig Secret; between 0 and 1")
	fs.BoolVar(&c.allowWeakerPSA, "allow-weaker-worker-pod-security", false, "let Jobs go to a worker whose namespace of the same name enforces a weaker Pod Security level than the manager's")
	fs.StringVar(&c.stateKeySecret, "state-key-secret", statekey.DefaultSecret, "Secret in --namespace holding the key that seals jobferry's state on manager Jobs; the leader creates it when missing (never change or share it: Jobs created after it whose state does not match their seal are not acted on)")
	fs.BoolVar(&c.kueue, "kueue", false, "Kueue on this cluster queues the Jobs that name a LocalQueue (label kueue.x-k8s.io/queue-name): they run when Kueue admits them, where jobferry places them, as the controller of the AdmissionChecks whose controllerName is "+queue.ControllerName+" (Kueue's CRDs must be installed)")
	fs.BoolVar(&c.requireQueueName, "kueue-require-queue-name", false, "with --kueue, refuse Jobs that name no LocalQueue (label kueue.x-k8s.io/queue-name) in the namespaces that dispatch, at creation and before dispatch, so every dispatched Job goes through Kueue's quota (the manager chart sets it with kueue.enabled unless kueue.requireQueueName is false)")
	fs.StringVar(&c.inspectionAddr, "inspection-bind-address", ":8444", "address the inspection API (inspection.jobferry.dev: the worker side of a manager Job, for users who may read it) binds to, behind an APIService, served with the webhooks' certificate (--webhook-cert-secret, or the files in --webhook-cert-dir); 0 disables it")
	fs.StringVar(&c.apiService, "inspection-apiservice", "v1alpha1.inspection.jobferry.dev", "APIService of the inspection API whose caBundle the certificate rotation keeps")
	c.inspection = inspection.DefaultLimits
	fs.Float64Var(&c.inspection.RequestsPerSecond, "inspection-requests-per-second", c.inspection.RequestsPerSecond, "inspection requests a second one user may make (a token bucket per user)")
	fs.IntVar(&c.inspection.Burst, "inspection-burst", c.inspection.Burst, "inspection requests one user may make at once")
	fs.IntVar(&c.inspection.StreamsPerCaller, "inspection-log-streams-per-user", c.inspection.StreamsPerCaller, "worker log streams one user may have open at once (a followed log of every pod of a Job takes one per pod and container; those past the limit are left out, and the log says so)")
	fs.IntVar(&c.inspection.MaxStreams, "inspection-log-streams", c.inspection.MaxStreams, "worker log streams one manager replica has open at once, for all users together")
	fs.IntVar(&c.inspection.MaxDescribes, "inspection-concurrent-describes", c.inspection.MaxDescribes, "inspections (kubectl jobferry describe) one manager replica answers at once, for all users together")
	fs.IntVar(&c.inspection.MaxLineBytes, "inspection-log-max-line-bytes", c.inspection.MaxLineBytes, "the longest log line passed on whole; a longer one is cut, and marked")
	fs.DurationVar(&c.inspection.FollowFor, "inspection-log-follow-limit", c.inspection.FollowFor, "how long a followed log streams at most (it ends sooner when its pods end)")
	fs.Int64Var(&c.inspection.MaxLogBytes, "inspection-log-max-bytes", c.inspection.MaxLogBytes, "the most bytes one log request returns")
	return raw
}

// finishFlags checks the parsed flags and derives the config's fields that
// need more than a flag's value.
func finishFlags(c *config, raw rawFlags) error {
	var err error
	switch {
	case c.jobSyncs < 1:
		return fmt.Errorf("--concurrent-job-syncs must be at least 1, not %d", c.jobSyncs)
	case c.workerNamespaceGrace < 0:
		return fmt.Errorf("--worker-namespace-grace must not be negative, got %s", c.workerNamespaceGrace)
	case c.renewThreshold <= 0 || c.renewThreshold >= 1:
		return fmt.Errorf("--credential-renewal-threshold must be between 0 and 1 (a fraction of the token's lifetime), got %v", c.renewThreshold)
	case (c.certRotation || c.metricsSecure) && c.certSecret == "":
		return errors.New("--webhook-cert-rotation and --metrics-secure need --webhook-cert-secret")
	case c.metricsAuthorize && !c.metricsSecure:
		return errors.New("--metrics-authorize needs --metrics-secure: a bearer token is not sent in the clear")
	case c.inspection.RequestsPerSecond <= 0 || c.inspection.Burst < 1 || c.inspection.StreamsPerCaller < 1 || c.inspection.FollowFor <= 0 || c.inspection.MaxLogBytes < 1 ||
		c.inspection.MaxStreams < 1 || c.inspection.MaxDescribes < 1 || c.inspection.MaxLineBytes < 64 || c.inspectionWorkerQPS <= 0 || c.inspectionBurst < 1:
		return errors.New("the --inspection-* limits must be positive (--inspection-log-max-line-bytes at least 64)")
	}
	if c.dispatchNamespaces, err = labels.Parse(*raw.dispatchNS); err != nil {
		return fmt.Errorf("--dispatch-namespace-selector %q: %w", *raw.dispatchNS, err)
	}
	if c.dispatchNamespaces.Empty() {
		return errors.New("--dispatch-namespace-selector must select something: an empty selector would dispatch from every namespace")
	}
	for _, name := range append(strings.Split(*raw.reservedNS, ","), c.namespace) {
		if name = strings.TrimSpace(name); name != "" {
			c.reserved = append(c.reserved, name)
		}
	}
	for _, name := range append([]string{c.webhookService}, strings.Split(*raw.extraDNSNames, ",")...) {
		if name = strings.TrimSpace(name); name != "" {
			c.certDNSNames = append(c.certDNSNames, name)
		}
	}
	return nil
}

// run wires the manager's parts together and runs them until ctx ends: the
// controller manager (leader election, caches, metrics, probes), the
// pool of worker connections with the WorkerCluster controller, the Job controller and the orphan collector on
// the leader, and, on every replica, the webhooks with their certificate.
func run(ctx context.Context, c config) error {
	policy, err := admission.NewDispatchPolicy(c.dispatchNamespaces, c.reserved, c.allowWeakerPSA)
	if err != nil {
		return fmt.Errorf("building the dispatch policy: %w", err)
	}
	policy.RequireQueueName = c.kueue && c.requireQueueName
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(c.kubeQPS), c.kubeBurst
	scheme := jobferryv1alpha1.NewScheme()
	if c.kueue {
		if err := kueue.AddToScheme(scheme); err != nil {
			return fmt.Errorf("registering Kueue's API: %w", err)
		}
	}
	// With a certificate Secret, both servers serve it from memory as it
	// changes (admission.CertSource): no handshake succeeds before it exists.
	certs := &admission.CertSource{}
	opts, webhookServer := managerOptions(c, scheme, certs)
	var candidacy *election.Candidacy
	if c.leaderElect {
		lock, lockEvents, err := election.Lock(rest.CopyConfig(restConfig), scheme, leaderelection.Options{
			LeaderElection: true, LeaderElectionID: leaderElectionID, LeaderElectionNamespace: c.namespace, RenewDeadline: c.renewDeadline,
		})
		if err != nil {
			return err
		}
		defer lockEvents.Shutdown()
		candidacy = election.NewCandidacy(lock, clock.RealClock{}, c.warmUpTimeout)
		opts.LeaderElectionResourceLockInterface = candidacy
	}
	mgr, err := ctrl.NewManager(restConfig, opts)
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	metrics.Registry.MustRegister(buildinfo.Collector("manager"))
	managerID, err := installation.ID(ctx, mgr.GetAPIReader(), c.namespace)
	if err != nil {
		return fmt.Errorf("identifying this manager installation: %w", err)
	}
	keys := &statekey.Keys{Reader: mgr.GetClient(), Writer: mgr.GetClient(), Namespace: c.namespace, Name: c.stateKeySecret}
	placements, err := addControllers(mgr, c, scheme, managerID, policy, keys, candidacy)
	if err != nil {
		return err
	}
	if err := addInspection(mgr, c, certs, keys, placements); err != nil {
		return err
	}
	if c.webhookPort != 0 {
		admission.RegisterWebhooks(mgr.GetWebhookServer(), webhookadmission.NewDecoder(scheme), mgr.GetClient(), mgr.GetAPIReader(), policy)
	}
	if err := addReadiness(mgr, c, certs, webhookServer); err != nil {
		return err
	}
	ctrl.Log.WithName("manager").Info("starting", "namespace", c.namespace, "origin", c.origin, "installation", managerID,
		"dispatchNamespaces", c.dispatchNamespaces.String(), "reservedNamespaces", sets.List(policy.Reserved))
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the controller manager: %w", err)
	}
	return nil
}

// leaderElectionID names the leader election lease.
const leaderElectionID = "jobferry-manager"

// managerOptions are the controller manager's options, and the webhook
// server (nil without webhooks).
func managerOptions(c config, scheme *runtime.Scheme, certs *admission.CertSource) (ctrl.Options, webhook.Server) {
	opts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: c.metricsAddr},
		HealthProbeBindAddress:  c.probeAddr,
		PprofBindAddress:        c.pprofAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: c.namespace,
		LeaseDuration:           &c.leaseDuration,
		RenewDeadline:           &c.renewDeadline,
		RetryPeriod:             &c.retryPeriod,
		// A replica that stops cleanly hands over at once instead of after
		// the lease expires.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         managercache.CacheOptions(c.namespace),
	}
	var webhookServer webhook.Server
	if c.webhookPort != 0 {
		webhookOpts := webhook.Options{Host: c.webhookHost, Port: c.webhookPort, CertDir: c.webhookCertDir}
		if c.certSecret != "" {
			webhookOpts.TLSOpts = []func(*tls.Config){certs.TLSConfig}
		}
		webhookServer = webhook.NewServer(webhookOpts)
		opts.WebhookServer = webhookServer
	}
	if c.metricsSecure {
		opts.Metrics.SecureServing = true
		opts.Metrics.TLSOpts = []func(*tls.Config){certs.TLSConfig}
	}
	if c.metricsAuthorize {
		opts.Metrics.FilterProvider = metricsauth.Authorized
	}
	return opts, webhookServer
}

// addControllers wires what runs on the leader: the pool of worker
// connections, kept by the WorkerCluster controller; the Job controller and
// the orphan collector, told of the workers by the pool; and the index of
// manager Jobs by placement the Job and WorkerCluster controllers read.
// With --kueue, the Job controller reads queued Jobs' Workloads (indexed by
// their Job) and the AdmissionCheck controller keeps jobferry's checks
// Active. What it gives back explains placements to the inspection API, on
// every replica: the Job controller's views of the workers, which the
// standby keeps connected too.
func addControllers(mgr ctrl.Manager, c config, scheme *runtime.Scheme, managerID string, policy *admission.DispatchPolicy, keys *statekey.Keys, candidacy *election.Candidacy) (explainPlacements, error) {
	if err := managercache.IndexJobs(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return explainPlacements{}, fmt.Errorf("indexing manager Jobs by placement: %w", err)
	}
	recorder := mgr.GetEventRecorder("jobferry-manager")
	pool := workers.NewPool(&workers.Pool{
		Client: mgr.GetClient(), Scheme: scheme, Namespace: c.namespace, Origin: c.origin, ManagerID: managerID,
		QPS: float32(c.workerQPS), Burst: c.workerBurst, Clock: clock.RealClock{},
		CreateNamespaces: c.createNamespaces, Recorder: recorder, RenewalThreshold: c.renewThreshold,
		Leading: mgr.Elected(), HeldBackFor: heldBackFor(c.leaseDuration, c.retryPeriod),
	})
	// A replica that does not lead keeps the workers connected, so its
	// caches hold their mirrors when it takes over.
	standby := &workers.Standby{Pool: pool, Reader: mgr.GetClient(), Interval: c.healthInterval, Clock: clock.RealClock{}}
	if err := mgr.Add(standby); err != nil {
		return explainPlacements{}, fmt.Errorf("adding the standby's worker connections: %w", err)
	}
	if candidacy != nil {
		// The replica stands for election once its caches hold the
		// workers' mirrors.
		candidacy.SetReady(standby.Warm)
	}
	workerClusters := &workercluster.Reconciler{Client: mgr.GetClient(), Pool: pool, HealthInterval: c.healthInterval}
	if err := workerClusters.SetupWithManager(mgr); err != nil {
		return explainPlacements{}, fmt.Errorf("setting up the WorkerCluster controller: %w", err)
	}
	jobReconciler := &jobs.JobReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Workers: pool,
		Policy: policy, Clock: clock.RealClock{}, Keys: keys,
		Config: jobpolicy.Config{Origin: c.origin, ManagerID: managerID, WorkerLostTimeout: c.workerLost, StatusBatchPeriod: c.statusBatch,
			DeleteFinishedMirrors: c.deleteFinished},
		Concurrency: c.jobSyncs, CapacitySettle: c.capacitySettle,
		PodAdmission: tenantlimits.NewPodAdmission(mgr.GetAPIReader(), mgr.GetClient(), clock.RealClock{}),
	}
	if c.kueue {
		if err := queue.IndexWorkloads(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return explainPlacements{}, err
		}
		jobReconciler.Queue = &queue.Queue{Client: mgr.GetClient(), Clock: clock.RealClock{}}
		if err := (&queue.CheckReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return explainPlacements{}, fmt.Errorf("setting up the AdmissionCheck controller: %w", err)
		}
		quota := &queue.QuotaReconciler{Client: mgr.GetClient(), Workers: pool, Recorder: recorder}
		if err := quota.SetupWithManager(mgr, pool.Subscribe); err != nil {
			return explainPlacements{}, fmt.Errorf("setting up the ClusterQueue quota controller: %w", err)
		}
	}
	if err := jobReconciler.SetupWithManager(mgr); err != nil {
		return explainPlacements{}, fmt.Errorf("setting up the Job controller: %w", err)
	}
	// The Job informer the controllers share; made now, started with the
	// cache.
	jobInformer, err := mgr.GetCache().GetInformer(context.Background(), &batchv1.Job{}, cache.BlockUntilSynced(false))
	if err != nil {
		return explainPlacements{}, fmt.Errorf("getting the manager Job informer for the orphan mirror collector and the Warning forwarder: %w", err)
	}
	collector := &orphans.Collector{Jobs: jobInformer, Client: mgr.GetClient(), Workers: pool, ManagerID: managerID, Keys: keys, Interval: c.gcInterval,
		ManagerNamespaces:      admission.NamespaceReader{Cache: mgr.GetClient(), API: mgr.GetAPIReader()},
		ManagerNamespacesFresh: admission.NamespaceReader{API: mgr.GetAPIReader()}, NamespaceGrace: c.workerNamespaceGrace,
		Connected: pool.SubscribeConnected(64)}
	if err := collector.SetupWithManager(mgr); err != nil {
		return explainPlacements{}, fmt.Errorf("adding the orphan mirror collector: %w", err)
	}
	forwarder := &warnings.Forwarder{Client: mgr.GetClient(), Recorder: recorder, Workers: pool, Keys: keys, Jobs: jobInformer, Clock: clock.RealClock{}}
	if err := forwarder.SetupWithManager(mgr); err != nil {
		return explainPlacements{}, fmt.Errorf("adding the forwarder of the workers' Warning Events: %w", err)
	}
	return explainPlacements{explainer: jobReconciler, leading: pool.Leads}, nil
}

// explainPlacements is what the inspection API's placements are answered
// with: the Job controller, and whether this replica leads.
type explainPlacements struct {
	explainer inspection.Explainer
	leading   func() bool
}

// addInspection adds the inspection API's server, on every replica, ready
// once it listens.
func addInspection(mgr ctrl.Manager, c config, certs *admission.CertSource, keys *statekey.Keys, placements explainPlacements) error {
	if c.inspectionAddr == "0" {
		return nil
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	// The webhooks' certificate: from its Secret, as it changes, or from
	// the files of --webhook-cert-dir, watched.
	serving := certs.TLSConfig
	if c.certSecret == "" {
		watcher, err := certwatcher.New(filepath.Join(c.webhookCertDir, "tls.crt"), filepath.Join(c.webhookCertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("reading the inspection API's certificate from %s: %w", c.webhookCertDir, err)
		}
		if err := mgr.Add(everyReplica{watcher}); err != nil {
			return err
		}
		serving = func(cfg *tls.Config) { cfg.GetCertificate = watcher.GetCertificate }
	}
	server, err := inspection.New(&inspection.Server{
		Addr: c.inspectionAddr, TLS: serving, Reader: mgr.GetClient(), Kube: kube,
		Namespace: c.namespace, Origin: c.origin, Keys: keys, WorkerQPS: float32(c.inspectionWorkerQPS), WorkerBurst: c.inspectionBurst,
		Limits: c.inspection, Clock: clock.RealClock{}, Explainer: placements.explainer, Leading: placements.leading,
	})
	if err != nil {
		return fmt.Errorf("setting up the inspection API: %w", err)
	}
	if err := mgr.Add(server); err != nil {
		return fmt.Errorf("adding the inspection API: %w", err)
	}
	if err := mgr.AddReadyzCheck("inspection-server", server.Started); err != nil {
		return fmt.Errorf("adding the inspection readiness check: %w", err)
	}
	return nil
}

// everyReplica runs a runnable on every replica, leader or not.
type everyReplica struct{ ctrlmanager.Runnable }

func (everyReplica) NeedLeaderElection() bool { return false }

// inspectionAPIService is the APIService whose caBundle the rotation keeps,
// when the inspection API is served.
func (c config) inspectionAPIService() string {
	if c.inspectionAddr == "0" {
		return ""
	}
	return c.apiService
}

// addReadiness adds the health checks, and the webhook certificate (issued
// and rotated, or read) with the checks that hold readiness until it is
// served and the webhook server answers.
func addReadiness(mgr ctrl.Manager, c config, certs *admission.CertSource, webhookServer webhook.Server) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if c.certSecret != "" {
		certsReady := make(chan struct{})
		if err := admission.SetupWebhookCerts(mgr, admission.WebhookCerts{
			Namespace: c.namespace, Secret: c.certSecret, Dir: c.webhookCertDir, Rotate: c.certRotation, DNSNames: c.certDNSNames,
			MutatingWebhook: c.mutatingName, ValidatingWebhook: c.validatingName, APIService: c.inspectionAPIService(),
		}, certs, certsReady); err != nil {
			return fmt.Errorf("setting up the webhook certificate: %w", err)
		}
		// Ready only once the certificate is served and, when the manager
		// rotates it, its CA is in the webhook configurations.
		if err := mgr.AddReadyzCheck("webhook-certificate", func(*http.Request) error {
			select {
			case <-certsReady:
				return nil
			default:
				return errors.New("the webhook certificate is not served yet")
			}
		}); err != nil {
			return fmt.Errorf("adding the certificate readiness check: %w", err)
		}
	}
	if webhookServer != nil {
		// Ready only once the webhook server answers a TLS handshake.
		if err := mgr.AddReadyzCheck("webhook-server", webhookServer.StartedChecker()); err != nil {
			return fmt.Errorf("adding the webhook readiness check: %w", err)
		}
	}
	return nil
}

// heldBackFor is how long before its election a new leader is told the
// mirror changes its standby saw (workers.Pool.HeldBackFor): the old
// leader renewed its lease within a lease and a retry of the election, so
// it saw every change until then; as much again allows for the copies it
// had not made yet when it died. Older changes reach the new leader
// through its Job controller's first list.
func heldBackFor(leaseDuration, retryPeriod time.Duration) time.Duration {
	return 2 * (leaseDuration + retryPeriod)
}
