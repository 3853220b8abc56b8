package manager

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A Job with jobferry's labels costs the manager what it reads of it, not
// what its author put in it.
func TestSlimMirror(t *testing.T) {
	job := mirrorOf(t, stepJob(placed, running), running)
	job.Labels["team"] = strings.Repeat("x", 63)
	job.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PAYLOAD", Value: strings.Repeat("p", 1<<20)}}
	job.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "general"}
	job.Spec.Template.Annotations = map[string]string{"big": strings.Repeat("a", maxCachedTemplateMetadata)}
	obj, err := SlimMirror(job)
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*batchv1.Job)
	if len(slim.Spec.Template.Spec.Containers) != 0 || slim.Labels["team"] != "" || slim.Spec.Template.Annotations != nil {
		t.Errorf("kept what the manager does not read: containers %d, labels %v, template annotations of %d keys",
			len(slim.Spec.Template.Spec.Containers), slim.Labels, len(slim.Spec.Template.Annotations))
	}
	if slim.UID != job.UID || slim.Labels[v1alpha1.OriginUIDLabel] != job.Labels[v1alpha1.OriginUIDLabel] || slim.Status.Active != 1 ||
		*slim.Spec.Parallelism != *job.Spec.Parallelism || slim.Spec.Template.Spec.NodeSelector["pool"] != "general" {
		t.Errorf("lost what the manager reads: %+v", slim)
	}
}

// A change decided on the slim mirror reaches the worker's mirror and leaves
// the rest of it, which the cache never held, as it was.
func TestUpdateFromCache(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.create(t, stepJob())
	h.reconcile(t)
	ctx := context.Background()
	w := h.workers["w1"]
	full, err := w.UncachedJob(ctx, trainKey)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := w.Mirror(ctx, trainKey)
	if err != nil {
		t.Fatal(err)
	}
	updated := cached.DeepCopy()
	updated.Spec.Parallelism = ptr.To[int32](3)
	updated.Spec.Template.Spec.NodeSelector = nil
	if err := updateFromCache(ctx, w, cached, updated); err != nil {
		t.Fatal(err)
	}
	after, err := w.UncachedJob(ctx, trainKey)
	if err != nil {
		t.Fatal(err)
	}
	if *after.Spec.Parallelism != 3 || len(after.Spec.Template.Spec.Containers) != len(full.Spec.Template.Spec.Containers) ||
		after.Spec.Template.Spec.Containers[0].Image != full.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("after the update: parallelism %d, containers %v; want 3 and the containers kept", *after.Spec.Parallelism, after.Spec.Template.Spec.Containers)
	}
	// Changed on the worker since the cache read it: kept, as only what the
	// manager changed is written.
	after.Spec.BackoffLimit = ptr.To[int32](9)
	if err := w.API.Update(ctx, after); err != nil {
		t.Fatal(err)
	}
	stale := cached.DeepCopy()
	stale.Spec.Parallelism = ptr.To[int32](5)
	if err := updateFromCache(ctx, w, cached, stale); err != nil {
		t.Fatal(err)
	}
	final, err := w.UncachedJob(ctx, trainKey)
	if err != nil {
		t.Fatal(err)
	}
	if *final.Spec.BackoffLimit != 9 || *final.Spec.Parallelism != 5 {
		t.Errorf("backoffLimit %d, parallelism %d: want the worker's 9 kept and 5 carried", *final.Spec.BackoffLimit, *final.Spec.Parallelism)
	}
}
