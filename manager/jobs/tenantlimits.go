package jobs

import (
	"context"
	"encoding/json"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/tenantlimits"
	"github.com/jobferry/jobferry/mirror"
)

// What placement asks of a Job's namespace on the manager cluster before
// its first mirror (package tenantlimits): whether it admits the Job's pods
// (a dry-run of one), and, for a Job Kueue does not queue, whether its
// ResourceQuotas have room for them beside the namespace's dispatched,
// unfinished Jobs. Kueue's quota bounds a queued Job instead.

// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=list;watch

// quotaRecheck is how soon a Job a full quota held back is looked at again
// when no Job of its namespace finishing wakes it first (quotaWaiters).
const quotaRecheck = 30 * time.Second

// quotaRefuses says whether a ResourceQuota of the Job's namespace has no
// room for what its pods charge (adding), beside what the namespace's other
// dispatched Jobs charge (chargedIn) and, when set, what the Job itself
// charges already (its own: a Job whose parallelism grows). Placement runs
// it under placing.mu, so placements in the namespace see each other's
// charges (chargesInFlight until the cache shows them); Explain runs it
// without, its answer need not agree with a placement of the same moment.
func (r *JobReconciler) quotaRefuses(ctx context.Context, job *batchv1.Job, adding tenantlimits.Charged, own *tenantlimits.Charged) (*tenantlimits.QuotaRefusal, error) {
	var quotas corev1.ResourceQuotaList
	if err := r.Client.List(ctx, &quotas, client.InNamespace(job.Namespace)); err != nil {
		return nil, err
	}
	if len(quotas.Items) == 0 {
		return nil, nil
	}
	charged, err := r.chargedIn(ctx, job)
	if err != nil {
		return nil, err
	}
	if own != nil {
		charged = append(charged, *own)
	}
	return tenantlimits.QuotaRefuses(job.Namespace, quotas.Items, charged, adding), nil
}

// chargedIn is what the Job's namespace's other dispatched Jobs charge to
// its quotas while their mirrors run (chargeEnded), each with its
// parallelism now: the charge sealed on each when it was placed, and the
// ones placed moments ago that the cache does not show placed yet.
func (r *JobReconciler) chargedIn(ctx context.Context, job *batchv1.Job) ([]tenantlimits.Charged, error) {
	key, err := r.Keys.Key(ctx)
	if err != nil {
		return nil, err
	}
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(job.Namespace)); err != nil {
		return nil, err
	}
	var charged []tenantlimits.Charged
	placed := map[types.UID]bool{}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.UID == job.UID || !v1alpha1.IsManagerJob(j) {
			continue
		}
		if _, over := managercache.OverBudgetOf(j); over {
			// The cache keeps its identity only (it grew past what jobferry
			// keeps of a Job after it was placed): read whole.
			whole := &batchv1.Job{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(j), whole); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			j = whole
		}
		if j.Annotations[v1alpha1.WorkerAnnotation] == "" {
			continue
		}
		placed[j.UID] = true
		verdict, _ := jobstate.Verify(j, key)
		trusted := verdict == jobstate.Trusted
		if kueueBound(r.Queue != nil, j, trusted) || r.chargeEnded(ctx, j) {
			continue
		}
		charged = append(charged, tenantlimits.ChargedNow(j, sealedCharge(j, trusted)))
	}
	for uid, c := range r.placing.charging.in(job.Namespace, r.Clock.Now()) {
		if !placed[uid] && uid != job.UID {
			charged = append(charged, c)
		}
	}
	return charged, nil
}

// kueueBound: with Kueue, the Job is Kueue's to bound (its quota, not the
// namespace's ResourceQuota): it names a LocalQueue, or was seen queued (a
// Job that left the queue is held: queueHolds). The record counts only
// on a Job whose state verifies (trusted): a forged one would take the Job
// out of the namespace's quota.
func kueueBound(kueueMode bool, job *batchv1.Job, trusted bool) bool {
	return kueueMode && (workload.QueueName(job) != "" || (trusted && job.Annotations[v1alpha1.QueuedAnnotation] != ""))
}

// chargeEnded: the placed Job's pods charge its namespace's quotas no more.
// Its status is its tenant's to write (jobs/status), so its mirror says:
// finished on its worker, or gone with the Job finished. Only while the
// worker is not connected does the Job's own status decide.
func (r *JobReconciler) chargeEnded(ctx context.Context, job *batchv1.Job) bool {
	if policy.NothingToRun(job) {
		return true
	}
	conn := r.conn(job.Annotations[v1alpha1.WorkerAnnotation])
	if conn == nil || !conn.Connected() {
		return policy.IsFinished(job)
	}
	m, err := conn.Mirror(ctx, client.ObjectKeyFromObject(job))
	switch {
	case err != nil:
		return false
	case m != nil && mirror.IsMirrorOf(m, r.Config.Origin, job.UID):
		return jobstatus.Finished(m.Status)
	}
	return policy.IsFinished(job)
}

// sealedCharge is what a placed Job's pods charge: what was sealed on it
// when it was placed; for a Job whose state does not verify, or placed
// before jobferry sealed charges, what its template requests (no scope but
// Terminating and BestEffort is known of it then: it counts against every
// quota those do not rule out).
func sealedCharge(job *batchv1.Job, trusted bool) v1alpha1.QuotaCharge {
	if raw, ok := job.Annotations[v1alpha1.AdmittedPodsAnnotation]; ok {
		if trusted {
			var admitted v1alpha1.AdmittedPods
			if json.Unmarshal([]byte(raw), &admitted) == nil {
				return admitted.Charge
			}
		}
	}
	return tenantlimits.Admitted(job, &corev1.Pod{Spec: job.Spec.Template.Spec}).Charge
}

// quotaFreedHandler wakes a namespace's quota waiters when one of its
// placed manager Jobs finishes or is deleted (from the cache's events).
func (r *JobReconciler) quotaFreedHandler() toolscache.ResourceEventHandler {
	freed := func(obj any) {
		job, ok := managercache.JobWithoutTemplate(obj)
		if !ok || !v1alpha1.IsManagerJob(&job) || job.Annotations[v1alpha1.WorkerAnnotation] == "" {
			return
		}
		// A finish the Job's tenant wrote frees nothing (chargeEnded reads
		// the mirror); the waiters woken find that out and wait again.
		if names := r.placing.quotaWaiting.take(job.Namespace); len(names) > 0 {
			// Not on the informer's goroutine: the work queue's channel
			// may be full.
			go func() {
				for _, name := range names {
					r.enqueue(job.Namespace, name)
				}
			}()
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			before, ok1 := managercache.JobWithoutTemplate(old)
			after, ok2 := managercache.JobWithoutTemplate(obj)
			if ok1 && ok2 && !policy.IsFinished(&before) && policy.IsFinished(&after) {
				freed(obj)
			}
		},
		DeleteFunc: func(obj any) {
			if job, ok := managercache.JobWithoutTemplate(obj); ok {
				// A waiter deleted waits no more.
				r.placing.quotaWaiting.remove(types.NamespacedName{Namespace: job.Namespace, Name: job.Name})
			}
			freed(obj)
		},
	}
}
