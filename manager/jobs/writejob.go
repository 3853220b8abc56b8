package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// WriteJob writes a manager Job changed from original (as read) to job,
// with its jobferry state sealed: every write of the Job's metadata and
// spec by the manager goes through here, so what it leaves is always what
// Verify trusts. It sends a merge patch of what changed, on the condition
// that the Job is still at original's resourceVersion (a Conflict
// otherwise, as an update would get): only the fields the manager changes
// travel, so the Job need not be held whole to write it.
func (r *JobReconciler) writeJob(ctx context.Context, original, job *batchv1.Job) error {
	key, err := r.Keys.Key(ctx)
	if err != nil {
		return err
	}
	sealed := jobstate.Sealed(job, key)
	patch, err := jobPatch(original, sealed)
	if err != nil {
		return fmt.Errorf("computing the patch of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if err := r.Client.Patch(ctx, sealed, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	r.memory.replaced.wrote(original, sealed, r.Clock.Now())
	*job = *sealed
	return nil
}

// jobPatch is the merge patch of a write of a Job's metadata and spec from
// before to after, locked to before's resourceVersion. A write that changes
// only annotations and labels (the record of a mirror's UID, the seal of
// the state) gets it from those maps; any other from the Jobs' JSON
// (withoutWhatBothHold): marshalling and diffing two Jobs' JSON was 8 % of
// the leader's CPU while it dispatched. Both compare with reflect.DeepEqual
// rather than the semantic equality: it is stricter (a quantity written two
// ways differs) and takes half the time and a sixth of the allocations; a
// false difference only sends them the longer, still exact, way.
func jobPatch(before, after *batchv1.Job) ([]byte, error) {
	from, to := withoutWhatBothHold(before, after)
	// The rest, without the maps: the template is left only if it changed.
	b, a := *from, *to
	b.Labels, b.Annotations, a.Labels, a.Annotations = nil, nil, nil, nil
	if !reflect.DeepEqual(&b, &a) {
		return client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}).Data(to)
	}
	metadata := map[string]any{"resourceVersion": before.ResourceVersion}
	if d, changed := mapPatch(before.Labels, after.Labels); changed {
		metadata["labels"] = d
	}
	if d, changed := mapPatch(before.Annotations, after.Annotations); changed {
		metadata["annotations"] = d
	}
	return json.Marshal(map[string]any{"metadata": metadata})
}

// mapPatch is the merge patch of a string map, and whether it changed: the
// keys added or changed with their values, those removed with null; null
// when none is left (as the JSON of the Jobs, which leaves out an empty
// map, would have it).
func mapPatch(before, after map[string]string) (any, bool) {
	if len(after) == 0 {
		return nil, len(before) > 0
	}
	d := map[string]any{}
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			d[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d[k] = nil
		}
	}
	return d, len(d) > 0
}

// withoutWhatBothHold are shallow copies of a Job before and after a write
// of its metadata and spec, without what the merge patch between them would
// leave out anyway: the status (not written through the Job itself) and the
// pod template when it did not change. The patch is computed from the two
// Jobs' JSON; marshalling and diffing whole Jobs was 6 % of the manager's
// CPU while it dispatched 100,000.
func withoutWhatBothHold(before, after *batchv1.Job) (*batchv1.Job, *batchv1.Job) {
	b, a := *before, *after
	b.Status, a.Status = batchv1.JobStatus{}, batchv1.JobStatus{}
	if reflect.DeepEqual(b.Spec.Template, a.Spec.Template) {
		b.Spec.Template, a.Spec.Template = corev1.PodTemplateSpec{}, corev1.PodTemplateSpec{}
	}
	return &b, &a
}

// finalize deletes the mirror of a manager Job that is gone or being
// deleted, and removes the finalizer an earlier version put on it. The
// mirror of a Job deleted while its worker was unreachable is left to the
// orphan collector, which deletes it once the worker is back.
func (r *JobReconciler) finalize(ctx context.Context, key types.NamespacedName, job *batchv1.Job) error {
	r.memory.refusals.forget(key)
	r.memory.finished.forget(key)
	r.memory.checks.forget(key)
	r.memory.attempts.forget(key)
	r.memory.highest.forget(key)
	r.memory.replaced.forget(key)
	r.placing.waiting.remove(key)
	r.memory.observed.take(key)
	if job == nil {
		r.placing.assume.forgetJob(key)
	}
	for _, worker := range r.Workers.Names() {
		conn := r.conn(worker)
		if conn == nil || !conn.Connected() {
			continue
		}
		m, err := conn.Mirror(ctx, key)
		if err != nil {
			return err
		}
		// Every mirror of this installation with the Job's name is one of a
		// Job that no longer exists, or of this one while it is deleted.
		if m == nil || m.DeletionTimestamp != nil || (job != nil && !mirror.IsMirrorOf(m, r.Config.Origin, job.UID)) ||
			(job == nil && !workers.MayDelete(m, r.Config.ManagerID, conn.OriginShared())) {
			continue
		}
		if _, err := workers.DeleteMirror(ctx, conn, worker, m); err != nil {
			return err
		}
	}
	if job == nil {
		return nil
	}
	r.placing.assume.forget(job.UID)
	return r.removeFinalizer(ctx, job)
}

func (r *JobReconciler) removeFinalizer(ctx context.Context, job *batchv1.Job) error {
	if !controllerutil.ContainsFinalizer(job, v1alpha1.MirrorFinalizer) {
		return nil
	}
	if _, over := managercache.OverBudgetOf(job); over {
		// The cache keeps jobferry's finalizer of it only; the patch
		// must keep the others the Job holds.
		stored := &batchv1.Job{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), stored); err != nil {
			return client.IgnoreNotFound(err)
		}
		job = stored
	}
	updated := job.DeepCopy()
	controllerutil.RemoveFinalizer(updated, v1alpha1.MirrorFinalizer)
	if err := r.writeJob(ctx, job, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}
