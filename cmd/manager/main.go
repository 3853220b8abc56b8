// Command manager runs in the manager cluster: it serves the opt-in webhook,
// keeps a connection to every WorkerCluster, places manager Jobs, creates
// their mirrors and copies their status back.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	webhookadmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/buildinfo"
	"github.com/jobferry/jobferry/manager"
	"github.com/jobferry/jobferry/manager/admission"
)

// The rights the manager uses in its own namespace (the chart's release
// namespace), for the manager chart (hack/generate.sh): the workers'
// kubeconfig Secrets (and the webhook certificate Secret) and the leader
// election lease (and its Event); updating a kubeconfig Secret when the
// manager renews a worker's token (manager/credentials.go); creating the
// Secret of the key that seals jobferry's state on manager Jobs, the first
// time (manager/statekey.go). Writing the certificate Secret and the webhook
// configurations' caBundle, when the manager rotates the certificate, is
// granted by the chart for exactly those objects.
// +kubebuilder:rbac:groups="",namespace=jobferry-system,resources=secrets,verbs=list;watch;create;update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=jobferry-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=jobferry-system,resources=events,verbs=create

func main() {
	var (
		metricsAddr      = flag.String("metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
		probeAddr        = flag.String("health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to; 0 disables them")
		pprofAddr        = flag.String("pprof-bind-address", "0", "address the Go profiler (/debug/pprof/) binds to, for profiling under load; 0 disables it")
		leaderElect      = flag.Bool("leader-elect", false, "elect a leader so only one replica dispatches and copies status (all replicas serve the webhooks)")
		leaseDuration    = flag.Duration("leader-elect-lease-duration", 15*time.Second, "how long a lost leader's lease holds before another replica takes over")
		renewDeadline    = flag.Duration("leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
		retryPeriod      = flag.Duration("leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
		namespace        = flag.String("namespace", "jobferry-system", "namespace holding the worker kubeconfig Secrets and the leader election lease")
		origin           = flag.String("origin", "jobferry", "name of this installation, put on every mirror (label jobferry.dev/origin) so several managers can share a worker")
		kubeQPS          = flag.Float64("kube-api-qps", 500, "client QPS towards the manager cluster")
		kubeBurst        = flag.Int("kube-api-burst", 1000, "client burst towards the manager cluster")
		workerQPS        = flag.Float64("worker-api-qps", 500, "client QPS towards each worker (its own limiter per worker)")
		workerBurst      = flag.Int("worker-api-burst", 1000, "client burst towards each worker")
		healthInterval   = flag.Duration("worker-health-interval", 10*time.Second, "how often each worker's API server is probed while connected")
		jobSyncs         = flag.Int("concurrent-job-syncs", 8, "manager Jobs reconciled at once")
		createNamespaces = flag.Bool("create-worker-namespaces", true, "create a mirror's namespace on the worker when it is missing, where the worker credential may (the Authorized condition says whether it may)")
		gcInterval       = flag.Duration("gc-interval", time.Minute, "how often every connected worker is scanned for mirrors whose manager Job is gone; it also runs at start and on every reconnect, and only then when 0")
		workerLost       = flag.Duration("worker-lost-timeout", 15*time.Minute, "how long a worker may stay disconnected before its unfinished Jobs are dispatched elsewhere")
		statusBatch      = flag.Duration("status-batch-period", time.Second, "how long changes of a running mirror are gathered into one status copy to the manager Job (a final status is copied at once)")
		deleteFinished   = flag.Bool("delete-finished-mirrors", false, "delete a finished mirror, its pods and their logs from the worker once its final status is copied, rather than when the manager Job is deleted (by its user, its ttlSecondsAfterFinished or its CronJob)")
		capacitySettle   = flag.Duration("capacity-settle-time", 2*time.Second, "how long after a mirror's pods run a worker's capacity summary is trusted to include them")
		webhookHost      = flag.String("webhook-bind-host", "", "host the webhook server binds to (empty: all interfaces)")
		webhookPort      = flag.Int("webhook-port", 9443, "port of the webhook server; 0 disables the webhooks")
		webhookCertDir   = flag.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding tls.crt and tls.key for the webhook server (with --webhook-cert-secret, where the manager copies them)")
		certSecret       = flag.String("webhook-cert-secret", "", "Secret in --namespace holding the serving certificate of the webhooks (and of the metrics endpoint with --metrics-secure); empty: the files in --webhook-cert-dir")
		certRotation     = flag.Bool("webhook-cert-rotation", false, "issue and rotate the certificate in --webhook-cert-secret, and put its CA into the webhook configurations; false: cert-manager (or someone) writes the Secret")
		webhookService   = flag.String("webhook-service", "", "DNS name of the Service in front of the webhooks (name.namespace.svc), for the rotated certificate")
		extraDNSNames    = flag.String("webhook-cert-extra-dns-names", "", "comma-separated further DNS names for the rotated certificate (the metrics Service)")
		mutatingName     = flag.String("mutating-webhook-configuration", "jobferry-opt-in", "MutatingWebhookConfiguration whose caBundle the rotation keeps")
		validatingName   = flag.String("validating-webhook-configuration", "jobferry-validate", "ValidatingWebhookConfiguration whose caBundle the rotation keeps")
		metricsSecure    = flag.Bool("metrics-secure", false, "serve metrics over HTTPS with the certificate of --webhook-cert-secret")
		dispatchNS       = flag.String("dispatch-namespace-selector", admission.DefaultDispatchNamespaceSelector, "label selector of the namespaces whose Jobs are dispatched (the opt-in webhook's registration must select the same namespaces)")
		reservedNS       = flag.String("reserved-namespaces", admission.DefaultReservedNamespaces, "comma-separated namespaces never dispatched from or to, besides kube-system, kube-public, kube-node-lease and --namespace (default: the workers' jobferry namespace)")
		renewThreshold   = flag.Float64("credential-renewal-threshold", manager.DefaultRenewalThreshold, "fraction of a worker token's lifetime after which the manager renews it (TokenRequest for its ServiceAccount on the worker) and writes the new token into the kubeconfig Secret; between 0 and 1")
		allowWeakerPSA   = flag.Bool("allow-weaker-worker-pod-security", false, "let Jobs go to a worker whose namespace of the same name enforces a weaker Pod Security level than the manager's")
		stateKeySecret   = flag.String("state-key-secret", manager.DefaultStateKeySecret, "Secret in --namespace holding the key that seals jobferry's state on manager Jobs; the leader creates it when missing (never change or share it: Jobs created after it whose state does not match their seal are not acted on)")
	)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	// The flag's first name, kept so existing installations start.
	deprecatedJobWorkers := false
	flag.Func("job-workers", "deprecated: use --concurrent-job-syncs", func(v string) error {
		deprecatedJobWorkers = true
		return flag.Set("concurrent-job-syncs", v)
	})
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("manager")
	if deprecatedJobWorkers {
		log.Info("--job-workers is deprecated; use --concurrent-job-syncs", "concurrent-job-syncs", *jobSyncs)
	}
	if *jobSyncs < 1 {
		fmt.Fprintf(os.Stderr, "--concurrent-job-syncs must be at least 1, not %d\n", *jobSyncs)
		os.Exit(2)
	}
	fail := func(err error, msg string) {
		log.Error(err, msg)
		os.Exit(1)
	}

	dispatchSelector, err := labels.Parse(*dispatchNS)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--dispatch-namespace-selector %q: %v\n", *dispatchNS, err)
		os.Exit(2)
	}
	if dispatchSelector.Empty() {
		fmt.Fprintln(os.Stderr, "--dispatch-namespace-selector must select something: an empty selector would dispatch from every namespace")
		os.Exit(2)
	}
	reserved := append(strings.Split(*reservedNS, ","), *namespace)
	reserved = slices.DeleteFunc(reserved, func(s string) bool { return strings.TrimSpace(s) == "" })
	policy, err := admission.NewDispatchPolicy(dispatchSelector, reserved, *allowWeakerPSA)
	if err != nil {
		fail(err, "building the dispatch policy")
	}

	if *renewThreshold <= 0 || *renewThreshold >= 1 {
		fmt.Fprintf(os.Stderr, "--credential-renewal-threshold must be between 0 and 1 (a fraction of the token's lifetime), got %v\n", *renewThreshold)
		os.Exit(2)
	}
	if (*certRotation || *metricsSecure) && *certSecret == "" {
		fmt.Fprintln(os.Stderr, "--webhook-cert-rotation and --metrics-secure need --webhook-cert-secret")
		os.Exit(2)
	}

	ctx := ctrl.SetupSignalHandler()
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(*kubeQPS), *kubeBurst
	scheme := jobferryv1alpha1.NewScheme()
	opts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		PprofBindAddress:        *pprofAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "jobferry-manager",
		LeaderElectionNamespace: *namespace,
		LeaseDuration:           leaseDuration,
		RenewDeadline:           renewDeadline,
		RetryPeriod:             retryPeriod,
		// A replica that stops cleanly hands over at once instead of after
		// the lease expires.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         manager.CacheOptions(*namespace),
	}
	// With a certificate Secret, both servers serve it from memory as it
	// changes (admission.CertSource): no handshake succeeds before it exists.
	certs := &admission.CertSource{}
	var webhookServer webhook.Server
	if *webhookPort != 0 {
		webhookOpts := webhook.Options{Host: *webhookHost, Port: *webhookPort, CertDir: *webhookCertDir}
		if *certSecret != "" {
			webhookOpts.TLSOpts = []func(*tls.Config){certs.TLSConfig}
		}
		webhookServer = webhook.NewServer(webhookOpts)
		opts.WebhookServer = webhookServer
	}
	if *metricsSecure {
		opts.Metrics.SecureServing = true
		opts.Metrics.TLSOpts = []func(*tls.Config){certs.TLSConfig}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		fail(err, "creating the controller manager")
	}
	metrics.Registry.MustRegister(buildinfo.Collector("manager"))
	installation, err := manager.InstallationID(ctx, mgr.GetAPIReader(), *namespace)
	if err != nil {
		fail(err, "identifying this manager installation")
	}
	registry := manager.NewRegistry(&manager.Registry{
		Client: mgr.GetClient(), Scheme: scheme, Namespace: *namespace, Origin: *origin, ManagerID: installation,
		QPS: float32(*workerQPS), Burst: *workerBurst, HealthInterval: *healthInterval, Clock: clock.RealClock{},
		CreateNamespaces: *createNamespaces,
		Recorder:         mgr.GetEventRecorder("jobferry-manager"), RenewalThreshold: *renewThreshold,
		CapacitySettle: *capacitySettle,
	})
	if err := registry.SetupWithManager(mgr); err != nil {
		fail(err, "setting up the WorkerCluster controller")
	}
	jobs := &manager.JobReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("jobferry-manager"), Registry: registry,
		Origin: *origin, ManagerID: installation, Policy: policy, Clock: clock.RealClock{},
		APIReader:   mgr.GetAPIReader(),
		Keys:        &manager.StateKeys{Reader: mgr.GetClient(), Writer: mgr.GetClient(), Namespace: *namespace, Name: *stateKeySecret},
		Concurrency: *jobSyncs, WorkerLostTimeout: *workerLost, StatusBatchPeriod: *statusBatch, DeleteFinishedMirrors: *deleteFinished,
	}
	if err := jobs.SetupWithManager(mgr); err != nil {
		fail(err, "setting up the Job controller")
	}
	gc := &manager.OrphanCollector{Client: mgr.GetClient(), Registry: registry, Interval: *gcInterval}
	if err := gc.SetupWithManager(mgr); err != nil {
		fail(err, "adding the orphan mirror collector")
	}
	if *webhookPort != 0 {
		admission.RegisterWebhooks(mgr.GetWebhookServer(), webhookadmission.NewDecoder(scheme), mgr.GetClient(), mgr.GetAPIReader(), policy)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		fail(err, "adding the health check")
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		fail(err, "adding the readiness check")
	}
	if *certSecret != "" {
		certsReady := make(chan struct{})
		var dnsNames []string
		for _, name := range append([]string{*webhookService}, strings.Split(*extraDNSNames, ",")...) {
			if name = strings.TrimSpace(name); name != "" {
				dnsNames = append(dnsNames, name)
			}
		}
		if err := admission.SetupWebhookCerts(mgr, admission.WebhookCerts{
			Namespace: *namespace, Secret: *certSecret, Dir: *webhookCertDir, Rotate: *certRotation, DNSNames: dnsNames,
			MutatingWebhook: *mutatingName, ValidatingWebhook: *validatingName,
		}, certs, certsReady); err != nil {
			fail(err, "setting up the webhook certificate")
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
			fail(err, "adding the certificate readiness check")
		}
	}
	if webhookServer != nil {
		// Ready only once the webhook server answers a TLS handshake.
		if err := mgr.AddReadyzCheck("webhook-server", webhookServer.StartedChecker()); err != nil {
			fail(err, "adding the webhook readiness check")
		}
	}
	log.Info("starting", "namespace", *namespace, "origin", *origin, "installation", installation, "dispatchNamespaces", dispatchSelector.String(), "reservedNamespaces", sets.List(policy.Reserved))
	if err := mgr.Start(ctx); err != nil {
		fail(err, "running the controller manager")
	}
}
