package bench

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// The Kueue-alone arm is the Kueue arm's baseline: what Kueue itself costs
// a cluster per Job when nothing but Kueue stands between a Job and its
// pods. Kueue on each worker admits the same Jobs, submitted there as in
// the direct arm, from a ClusterQueue kueueAloneQueue that names no
// admission check and has quota for all of them at once (as the Kueue
// arm's does). Against the direct arm of the same run it gives Kueue's own
// work per Job; against the Kueue arm and the jobferry arm, the split of
// the Kueue arm's manager cluster (kueueSplit in report.go).
//
// As in the MultiKueue arm, the bench creates the Jobs as Kueue's webhook
// (served, not registered) would leave them: suspended, queued.

// kueueAloneQueue names the workers' ClusterQueue of the Kueue-alone arm.
const kueueAloneQueue = "bench-alone"

// kueueAloneJob queues a bench Job in benchQueue as Kueue's webhook would
// leave it.
func kueueAloneJob(job *batchv1.Job) {
	queuedIn(benchQueue)(job)
	job.Spec.Suspend = ptr.To(true)
}

// startWorkerKueue starts Kueue on every worker, once, with what both arms
// that use it need there: the flavor, the ClusterQueue benchQueue with the
// quota of the worker's nodes (the MultiKueue arm's) and kueueAloneQueue
// with quota for maxN Jobs (the Kueue-alone arm's).
func (b *bencher) startWorkerKueue(ctx context.Context, maxN int) error {
	if b.workerQueues != nil {
		return nil
	}
	if err := b.env.StartWorkerKueue(ctx, localcluster.KueueOptions{ClientQPS: b.cfg.KueueClientQPS, ClientBurst: b.cfg.KueueClientQPS}, b.cfg.Progress); err != nil {
		return err
	}
	var queues []client.Client
	for _, w := range b.env.Workers {
		c, err := devenv.NewKueueClient(benchConfig(w))
		if err != nil {
			return err
		}
		if err := devenv.CreateUnlessExists(ctx, c,
			&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: devenv.KueueFlavor}},
			devenv.ClusterQueueWithChecks(benchQueue, ampleQuota(b.room[w.Name])),
			devenv.ClusterQueueWithChecks(kueueAloneQueue, ampleQuota(maxN)),
		); err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		queues = append(queues, c)
	}
	b.workerQueues = queues
	return nil
}

// workerLocalQueues makes namespace ns and its LocalQueue benchQueue of
// clusterQueue on every worker.
func (b *bencher) workerLocalQueues(ctx context.Context, ns, clusterQueue string) error {
	for i, w := range b.workers {
		if err := createNamespace(ctx, w, ns, nil); err != nil {
			return fmt.Errorf("%s: %w", b.env.Workers[i].Name, err)
		}
		if err := localQueue(ctx, b.workerQueues[i], ns, clusterQueue); err != nil {
			return fmt.Errorf("%s: %w", b.env.Workers[i].Name, err)
		}
	}
	return nil
}

// kueueAlone runs the Kueue-alone arm: Kueue on the workers, started
// before it if it is not yet.
func (b *bencher) kueueAlone(ctx context.Context, n int) (Arm, error) {
	if err := b.startWorkerKueue(ctx, slices.Max(b.cfg.Ns)); err != nil {
		return Arm{}, err
	}
	ns := kueueAloneNamespace(n)
	if err := b.workerLocalQueues(ctx, ns, kueueAloneQueue); err != nil {
		return Arm{}, err
	}
	return b.onWorkers(ctx, n, kueueAloneArm, ns, fmt.Sprintf("Kueue-alone arm, N=%d", n), kueueAloneJob)
}
