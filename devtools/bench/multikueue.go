package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/devtools/devenv"
)

// The MultiKueue arm runs the peer our users compare jobferry with, as
// Kueue v0.17 documents it, beside the other arms on the same clusters:
// Kueue on the manager cluster dispatches the Jobs through its MultiKueue
// admission check to Kueue on each worker. On each worker, a ClusterQueue
// benchQueue has the quota of the worker's nodes (the room for bench Jobs
// the other arms' placement figures use), so a worker's Kueue admits what
// its nodes hold; on the manager, a ClusterQueue multiKueueQueue naming
// the check has the workers' quota together, as Kueue's MultiKueue guide
// sets it up (quota for all N at once would have MultiKueue copy every
// Workload to every worker at once, through clients of 5 requests a
// second).
// Every arm namespace holds a LocalQueue benchQueue on the manager and on
// every worker: MultiKueue copies the Workload, queue name included.
//
// What the bench does for Kueue's webhook: localcluster serves Kueue's
// webhooks without registering them, so the arm creates each Job as the
// webhook would leave it, suspended with spec.managedBy
// kueue.x-k8s.io/multikueue (the Kueue arm's Jobs get theirs from
// jobferry's webhook, whose work that arm's figures include).
//
// Kueue v0.17's remote clients have no rate-limit knob: MultiKueue builds
// them from the kubeconfig alone (clientcmd.RESTConfigFromKubeConfig), so
// client-go's defaults of 5 QPS and burst 10 bind every worker; v0.20
// raised them to 1000 and 1000. Its clientConnection (Config.KueueClientQPS)
// covers only each Kueue's client of its own cluster.

// multiKueueQueue names the manager's ClusterQueue of the MultiKueue arm.
const multiKueueQueue = "bench-multikueue"

// multiKueueTimeout bounds the MultiKueue arm, whose remote clients run at
// 5 requests a second per worker: generous (0.5 Jobs/s), as it only stops
// a stuck run.
func multiKueueTimeout(n int) time.Duration {
	return max(10*time.Minute, time.Duration(n)*2*time.Second)
}

// multiKueueJob queues a bench Job in benchQueue as Kueue's webhook would
// leave it for a ClusterQueue with MultiKueue's check.
func multiKueueJob(job *batchv1.Job) {
	queuedIn(benchQueue)(job)
	job.Spec.Suspend = ptr.To(true)
	job.Spec.ManagedBy = ptr.To(kueue.MultiKueueControllerName)
}

// setUpMultiKueue makes what an administrator would for the MultiKueue
// arm: Kueue on the workers with their ClusterQueues (startWorkerKueue),
// MultiKueue's check (devenv.SetUpMultiKueue), and the manager's
// ClusterQueue multiKueueQueue naming the check with the workers' quota
// together.
func (b *bencher) setUpMultiKueue(ctx context.Context) error {
	if err := b.startWorkerKueue(ctx, slices.Max(b.cfg.Ns)); err != nil {
		return err
	}
	if err := devenv.SetUpMultiKueue(ctx, b.queues, b.env.Workers, 2*time.Minute); err != nil {
		return err
	}
	room := 0
	for _, w := range b.env.Workers {
		room += b.room[w.Name]
	}
	if err := b.queues.Create(ctx, devenv.ClusterQueueWithChecks(multiKueueQueue, ampleQuota(room), devenv.MultiKueueCheck)); err != nil {
		return fmt.Errorf("creating the ClusterQueue %s: %w", multiKueueQueue, err)
	}
	return nil
}
