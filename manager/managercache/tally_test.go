package managercache

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

func tallyJob(name, worker string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name),
		Annotations: map[string]string{"worker": worker}}}
}

// A Tally follows each Job from its old key to its new one, counts only the
// Jobs its key says, and keeps no key at zero (its keys may come from what
// a Job's writer says).
func TestTallyMovesEachJobAndKeepsNoZero(t *testing.T) {
	tally := NewTally(func(job *batchv1.Job) (string, bool) {
		w := job.Annotations["worker"]
		return w, w != ""
	})
	h := tally.Handler()
	a, b := tallyJob("a", "w1"), tallyJob("b", "w1")
	h.OnAdd(a, true)
	h.OnAdd(b, true)
	h.OnAdd(tallyJob("unplaced", ""), true)
	if n := tally.Count("w1", ""); n[0] != 2 || n[1] != 0 {
		t.Fatalf("counts %v, want w1: 2 and nothing for an unplaced Job", tally.Snapshot())
	}
	moved := tallyJob("a", "w2")
	h.OnUpdate(a, moved)
	h.OnUpdate(b, tallyJob("b", ""))
	if got := tally.Snapshot(); len(got) != 1 || got["w2"] != 1 {
		t.Fatalf("after the moves: %v, want only w2: 1", got)
	}
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "team-a/a", Obj: moved})
	if got := tally.Snapshot(); len(got) != 0 {
		t.Errorf("after the delete (a tombstone) the tally keeps %v", got)
	}
	h.OnAdd("not a Job", true)
	if got := tally.Snapshot(); len(got) != 0 {
		t.Errorf("something not a Job counted: %v", got)
	}
}

// An Index keeps each Job's value by UID, drops it when the value says so
// (a Job being deleted, say) and on the Job's deletion.
func TestIndexKeepsEachJobsValue(t *testing.T) {
	index := NewIndex(func(job *batchv1.Job) (string, bool) {
		return job.Annotations["worker"], job.DeletionTimestamp == nil
	})
	h := index.Handler()
	j := tallyJob("a", "w1")
	h.OnAdd(j, true)
	if v, ok := index.Get(j.UID); !ok || v != "w1" {
		t.Fatalf("Get = %q, %t; want w1", v, ok)
	}
	deleting := tallyJob("a", "w1")
	deleting.DeletionTimestamp = &metav1.Time{}
	h.OnUpdate(j, deleting)
	if _, ok := index.Get(j.UID); ok || index.Len() != 0 {
		t.Errorf("a Job being deleted is kept (%d kept)", index.Len())
	}
	h.OnAdd(j, true)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "team-a/a", Obj: j})
	if index.Len() != 0 {
		t.Errorf("after the delete the index keeps %d", index.Len())
	}
}
