package jobs

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestObservedMemoKeepsTheOldestChange(t *testing.T) {
	var m observedMemo
	key := types.NamespacedName{Namespace: "a", Name: "j"}
	t0 := time.Unix(100, 0)
	m.seen(key, t0)
	m.seen(key, t0.Add(time.Second))
	if got := m.since(key); !got.Equal(t0) {
		t.Errorf("since = %v, want the first change %v", got, t0)
	}
	if got, ok := m.take(key); !ok || !got.Equal(t0) {
		t.Errorf("take = %v, %t; want %v", got, ok, t0)
	}
	if _, ok := m.take(key); ok {
		t.Error("a change taken is still remembered")
	}
}

// A deleted worker's Jobs count from the first look at it gone; a worker
// registered again starts afresh when it is gone next.
func TestRemovedWorkersCountFromTheFirstLook(t *testing.T) {
	h := newJobsHarness(t)
	t0 := h.clock.Now()
	if got := h.r.removed.since("w1", t0); !got.Equal(t0) {
		t.Fatalf("first look: %v, want %v", got, t0)
	}
	if got := h.r.removed.since("w1", t0.Add(time.Minute)); !got.Equal(t0) {
		t.Errorf("second look: %v, want the first look's %v", got, t0)
	}
	h.r.workerReconciled("w1")
	later := t0.Add(time.Hour)
	if got := h.r.removed.since("w1", later); !got.Equal(later) {
		t.Errorf("gone again after it was reconciled: %v, want %v", got, later)
	}
}
