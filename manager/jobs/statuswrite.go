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
)

// writeStatus writes status as the status of the Job read as job, locked to
// its resourceVersion (a Conflict if it changed since), and returns what the
// API server then holds. The write is a merge patch of the status alone,
// never an update of the whole Job: an update of the status subresource
// carries the Job's metadata too, so it would write back the cached Job's
// (managercache leaves out of it the labels the API server derives from the
// Job's UID and name).
//
// The API server answers with the Job's metadata only (its new
// resourceVersion): the lock makes the status it then holds the one sent,
// as its JSON reads back, and decoding the whole Job it would send back was
// a tenth of what the manager allocated while it dispatched 100,000 Jobs.
func (r *JobReconciler) writeStatus(ctx context.Context, job *batchv1.Job, status batchv1.JobStatus) (writtenStatus, error) {
	patch, sent, err := statusPatch(job, status)
	if err != nil {
		return writtenStatus{}, err
	}
	answer := jobMetadata(job)
	if err := r.Client.Status().Patch(ctx, answer, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return writtenStatus{}, err
	}
	written := writtenStatus{ResourceVersion: answer.ResourceVersion}
	if err := json.Unmarshal(sent, &written.Status); err != nil {
		return writtenStatus{}, fmt.Errorf("reading back the status written to Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return written, nil
}

// writtenStatus is what the API server holds after a status write.
type writtenStatus struct {
	ResourceVersion string
	Status          batchv1.JobStatus
}

// jobMetadata is the target of a write whose answer is the Job's metadata
// alone (controller-runtime sends it through its metadata client, which
// asks the API server for PartialObjectMetadata).
func jobMetadata(job *batchv1.Job) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name},
	}
}

// statusPatch is the merge patch that takes the Job before's status to
// status, locked to before's resourceVersion: what changed, with null for
// what is gone; and status's JSON.
func statusPatch(before *batchv1.Job, status batchv1.JobStatus) (patch, to []byte, err error) {
	from, err := json.Marshal(before.Status)
	if err != nil {
		return nil, nil, fmt.Errorf("marshalling the status of Job %s/%s: %w", before.Namespace, before.Name, err)
	}
	if to, err = json.Marshal(status); err != nil {
		return nil, nil, fmt.Errorf("marshalling the new status of Job %s/%s: %w", before.Namespace, before.Name, err)
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, nil, fmt.Errorf("computing the status patch of Job %s/%s: %w", before.Namespace, before.Name, err)
	}
	patch, err = json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": before.ResourceVersion},
		"status":   json.RawMessage(diff),
	})
	return patch, to, err
}
