package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// writeStatus writes status as the status of the Job read as job, locked to
// its resourceVersion (a Conflict if it changed since), and returns the Job
// as the API server then holds it. The write is a merge patch of the status
// alone, never an update of the whole Job: an update of the status
// subresource carries the Job's metadata too, so it would write back the
// cached Job's (managercache leaves out of it the labels the API server
// derives from the Job's UID and name).
func (r *JobReconciler) writeStatus(ctx context.Context, job *batchv1.Job, status batchv1.JobStatus) (*batchv1.Job, error) {
	patch, err := statusPatch(job, status)
	if err != nil {
		return nil, err
	}
	// The answer replaces all of it.
	written := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}
	if err := r.Client.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, err
	}
	r.memory.replaced.wrote(job, written, r.Clock.Now())
	return written, nil
}

// statusPatch is the merge patch that takes the Job before's status to
// status, locked to before's resourceVersion: what changed, with null for
// what is gone.
func statusPatch(before *batchv1.Job, status batchv1.JobStatus) ([]byte, error) {
	from, err := json.Marshal(before.Status)
	if err != nil {
		return nil, fmt.Errorf("marshalling the status of Job %s/%s: %w", before.Namespace, before.Name, err)
	}
	to, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("marshalling the new status of Job %s/%s: %w", before.Namespace, before.Name, err)
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("computing the status patch of Job %s/%s: %w", before.Namespace, before.Name, err)
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": before.ResourceVersion},
		"status":   json.RawMessage(diff),
	})
}

// showWaiting writes why the Job waits onto its status, unless it is finished
// or already says so. The Job object is updated with what was written.
func (r *JobReconciler) showWaiting(ctx context.Context, job *batchv1.Job, w policy.Waiting) error {
	_, err := r.updateWaiting(ctx, job, w)
	return err
}

// updateWaiting is showWaiting, reporting whether it wrote.
func (r *JobReconciler) updateWaiting(ctx context.Context, job *batchv1.Job, w policy.Waiting) (bool, error) {
	if policy.IsFinished(job) {
		return false, nil
	}
	status, changed := policy.PendingStatus(job.Status, w, r.Clock.Now())
	if !changed {
		return false, nil
	}
	updated, err := r.writeStatus(ctx, job, status)
	if err != nil {
		return false, fmt.Errorf("writing why the Job waits (%s): %w", w.Reason, err)
	}
	r.memory.refusals.followOwnWrite(job, updated.ResourceVersion)
	job.Status, job.ResourceVersion = updated.Status, updated.ResourceVersion
	return true, nil
}
