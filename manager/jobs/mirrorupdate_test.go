package jobs

import (
	"context"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
)

// A change decided on the slim mirror reaches the worker's mirror and leaves
// the rest of it, which the cache never held, as it was.
func TestUpdateFromCache(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.create(t, policytest.Job())
	h.reconcile(t)
	ctx := context.Background()
	w := h.workers.Conns["w1"]
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
