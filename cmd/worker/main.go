// Command worker runs in each worker cluster: it publishes the
// ClusterCapacity summary the manager places Jobs by. Its own Job controller
// (for mirrors with managedBy jobferry.dev/worker) is not built yet.
package main

import (
	"flag"
	"os"
	"time"

	"k8s.io/utils/clock"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/worker"
)

func main() {
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
		poolLabel   = flag.String("pool-label", jobferryv1alpha1.DefaultPoolLabel, "node label whose values group nodes into pools")
		minInterval = flag.Duration("min-publish-interval", time.Second, "least time between two writes of the ClusterCapacity summary")
		heartbeat   = flag.Duration("heartbeat-interval", 30*time.Second, "how often an unchanged summary is written again")
	)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("worker")

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 jobferryv1alpha1.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		Cache:                  worker.CacheOptions(),
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
	publisher := &worker.Publisher{
		Client: mgr.GetClient(), PoolLabel: *poolLabel,
		MinInterval: *minInterval, Heartbeat: *heartbeat, Clock: clock.RealClock{},
	}
	if err := publisher.SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the capacity publisher")
		os.Exit(1)
	}
	log.Info("starting", "poolLabel", *poolLabel)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the controller manager")
		os.Exit(1)
	}
}
