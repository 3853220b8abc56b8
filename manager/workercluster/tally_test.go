package workercluster

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// The tally follows a Job's life through the handler's events: counted on
// the worker it is placed on, running while a pod is active, moved with
// it, and gone once it finishes or is deleted — leaving no entry behind.
func TestJobTallyFollowsEachJobsEvents(t *testing.T) {
	job := managerJob
	ctx := context.Background()
	h := jobCountsHandler{reader: fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).Build(), tally: newJobTally()}
	q := &recordingQueue{}
	create := func(j *batchv1.Job) { h.Create(ctx, event.CreateEvent{Object: j}, q) }
	update := func(old, new *batchv1.Job) { h.Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: new}, q) }
	remove := func(j *batchv1.Job) { h.Delete(ctx, event.DeleteEvent{Object: j}, q) }
	steps := []struct {
		name string
		do   func()
		want map[string]workerCounts
	}{
		{"a Job created unplaced", func() { create(job("a", "")) }, map[string]workerCounts{}},
		{"placed on w1", func() { update(job("a", ""), job("a", "w1")) }, map[string]workerCounts{"w1": {dispatched: 1}}},
		{"a second Job created placed on w1, running", func() { create(job("b", "w1", active)) }, map[string]workerCounts{"w1": {dispatched: 2, running: 1}}},
		{"the first starts", func() { update(job("a", "w1"), job("a", "w1", active)) }, map[string]workerCounts{"w1": {dispatched: 2, running: 2}}},
		{"the first moves to w2", func() { update(job("a", "w1", active), job("a", "w2")) }, map[string]workerCounts{"w1": {dispatched: 1, running: 1}, "w2": {dispatched: 1}}},
		{"a Job this cluster runs itself", func() { create(job("c", "w1", local, active)) }, map[string]workerCounts{"w1": {dispatched: 1, running: 1}, "w2": {dispatched: 1}}},
		{"the second finishes", func() { update(job("b", "w1", active), job("b", "w1", done)) }, map[string]workerCounts{"w2": {dispatched: 1}}},
		{"a finished Job deleted", func() { remove(job("b", "w1", done)) }, map[string]workerCounts{"w2": {dispatched: 1}}},
		{"an unfinished Job deleted", func() { remove(job("a", "w2")) }, map[string]workerCounts{}},
	}
	for _, s := range steps {
		s.do()
		got := map[string]workerCounts{}
		for _, w := range []string{"w1", "w2"} {
			if c := countsIn(h.tally, w); c != (workerCounts{}) {
				got[w] = c
			}
		}
		if diff := cmp.Diff(s.want, got, cmp.AllowUnexported(workerCounts{})); diff != "" {
			t.Fatalf("after %q, counts (-want +got):\n%s", s.name, diff)
		}
		kept := map[string]bool{}
		for k := range h.tally.Snapshot() {
			kept[k.worker] = true
		}
		if len(kept) != len(s.want) {
			t.Fatalf("after %q, the tally keeps %d workers, want %d: %v", s.name, len(kept), len(s.want), h.tally.Snapshot())
		}
	}
}
