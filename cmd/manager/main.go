// Command manager runs in the manager cluster: it will serve the opt-in
// webhook and dispatch Jobs to workers. Today it starts, elects a leader when
// asked, and serves health and metrics; the controllers come with the
// dispatch issue.
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func main() {
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader so only one replica dispatches")
		namespace   = flag.String("namespace", "jobferry-system", "namespace holding the worker kubeconfig Secrets and the leader election lease")
	)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("manager")

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  jobferryv1alpha1.NewScheme(),
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "jobferry-manager",
		LeaderElectionNamespace: *namespace,
	})
	if err != nil {
		log.Error(err, "creating the controller manager")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	log.Info("starting", "namespace", *namespace)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the controller manager")
		os.Exit(1)
	}
}
