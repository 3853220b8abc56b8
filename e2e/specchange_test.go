//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// What a user may change on a running Job (upstream ValidateJobSpecUpdate)
// reaches its mirror, and the status that follows comes back: parallelism of
// a running Job; completions and parallelism of an elastic Indexed Job, up
// and down; backoffLimit and activeDeadlineSeconds (the deadline then fails
// the Job on the worker, and the manager shows it). A change the worker's API
// server refuses gives a Warning Event with its message, and the next change
// goes through. On each worker: under kube-controller-manager and under the
// jobferry worker's Job controller.
func TestSpecChangesOfRunningJobReachTheMirror(t *testing.T) {
	d := startDispatchEnv(t)
	d.onEachWorker(t, func(t *testing.T, worker string) { specChangesReachTheMirror(t, d, worker) })
}

func specChangesReachTheMirror(t *testing.T, d *dispatchEnv, workerName string) {
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)

	scaled := sleepJob(ns, "scaled", time.Hour)
	scaled.Spec.Parallelism, scaled.Spec.Completions = ptr.To[int32](1), ptr.To[int32](10)
	worker := d.dispatchTo(ctx, t, scaled, workerName)
	pollJob(ctx, t, d.manager, ns, scaled.Name, time.Minute, "one pod running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
	mergePatchJob(ctx, t, d.manager, ns, scaled.Name, `{"spec":{"parallelism":3}}`)
	pollJob(ctx, t, worker, ns, scaled.Name, 30*time.Second, "parallelism 3 on the mirror", func(j *batchv1.Job) bool {
		return ptr.Deref(j.Spec.Parallelism, 0) == 3
	})
	pollJob(ctx, t, d.manager, ns, scaled.Name, time.Minute, "3 ready pods on the manager", func(j *batchv1.Job) bool {
		return j.Status.Active == 3 && ptr.Deref(j.Status.Ready, 0) == 3
	})
	waitEvent(ctx, t, d.manager, ns, scaled.Name, "MirrorUpdated", 10*time.Second, "parallelism", workerName)

	mergePatchJob(ctx, t, d.manager, ns, scaled.Name, `{"spec":{"backoffLimit":2,"activeDeadlineSeconds":1}}`)
	pollJob(ctx, t, worker, ns, scaled.Name, 30*time.Second, "backoffLimit and deadline on the mirror", func(j *batchv1.Job) bool {
		return ptr.Deref(j.Spec.BackoffLimit, 0) == 2 && ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0) == 1
	})
	failed := pollJob(ctx, t, d.manager, ns, scaled.Name, time.Minute, "Failed on the manager", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobFailed) != nil
	})
	if c := hasCondition(failed, batchv1.JobFailed); c.Reason != batchv1.JobReasonDeadlineExceeded {
		t.Errorf("the manager Job failed with %s (%s), want %s: the deadline set on the manager ran out on the worker", c.Reason, c.Message, batchv1.JobReasonDeadlineExceeded)
	}

	elastic := sleepJob(ns, "elastic", time.Hour)
	elastic.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	elastic.Spec.Parallelism, elastic.Spec.Completions = ptr.To[int32](2), ptr.To[int32](2)
	worker = d.dispatchTo(ctx, t, elastic, workerName)
	pollJob(ctx, t, d.manager, ns, elastic.Name, time.Minute, "2 pods running", func(j *batchv1.Job) bool { return j.Status.Active == 2 })
	for _, n := range []int32{4, 1} {
		mergePatchJob(ctx, t, d.manager, ns, elastic.Name, fmt.Sprintf(`{"spec":{"completions":%d,"parallelism":%d}}`, n, n))
		pollJob(ctx, t, worker, ns, elastic.Name, 30*time.Second, fmt.Sprintf("completions and parallelism %d on the mirror", n), func(j *batchv1.Job) bool {
			return ptr.Deref(j.Spec.Completions, 0) == n && ptr.Deref(j.Spec.Parallelism, 0) == n
		})
		pollJob(ctx, t, d.manager, ns, elastic.Name, time.Minute, fmt.Sprintf("%d active on the manager", n), func(j *batchv1.Job) bool {
			return j.Status.Active == n && ptr.Deref(j.Status.Terminating, 0) == 0
		})
		var indexes []string
		for _, p := range jobPods(ctx, t, worker, ns, elastic.Name) {
			if p.DeletionTimestamp == nil {
				indexes = append(indexes, p.Annotations[batchv1.JobCompletionIndexAnnotation])
			}
		}
		if len(indexes) != int(n) {
			t.Errorf("after scaling to %d the worker runs pods with indexes %v", n, indexes)
		}
	}

	// The worker's own policy refuses more than 5 pods at once in this
	// namespace; the manager cluster has no such rule.
	const refusal = "e2e: this worker runs at most 5 pods of a Job at once"
	refuseOnWorker(ctx, t, worker, ns, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		"!has(object.spec.parallelism) || object.spec.parallelism <= 5", refusal, func(ctx context.Context) error {
			probe := sleepJob(ns, "probe", time.Second)
			probe.Spec.Parallelism = ptr.To[int32](6)
			_, err := worker.BatchV1().Jobs(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
	mergePatchJob(ctx, t, d.manager, ns, elastic.Name, `{"spec":{"parallelism":6}}`)
	waitEvent(ctx, t, d.manager, ns, elastic.Name, "MirrorUpdateRejected", 30*time.Second, refusal, "parallelism")
	if m, err := worker.BatchV1().Jobs(ns).Get(ctx, elastic.Name, metav1.GetOptions{}); err != nil || ptr.Deref(m.Spec.Parallelism, 0) != 1 {
		t.Errorf("the mirror's parallelism after a refused change: %v (%v), want 1", m.Spec.Parallelism, err)
	}
	mergePatchJob(ctx, t, d.manager, ns, elastic.Name, `{"spec":{"parallelism":3}}`)
	pollJob(ctx, t, worker, ns, elastic.Name, 30*time.Second, "the next change carried after a refused one", func(j *batchv1.Job) bool {
		return ptr.Deref(j.Spec.Parallelism, 0) == 3
	})
	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, elastic.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	d.assertNoRejectedStatusWrites(t)
}
