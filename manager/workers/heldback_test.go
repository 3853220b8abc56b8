package workers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestHeldBackHandsOverOneChangePerMirrorOldestFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	change := func(worker, name string, s int) MirrorChange {
		return MirrorChange{Worker: worker, Job: types.NamespacedName{Namespace: "ns", Name: name}, Seen: t0.Add(time.Duration(s) * time.Second)}
	}
	var h heldBack
	for _, c := range []MirrorChange{change("w1", "a", 0), change("w1", "b", 1), change("w1", "a", 2), change("w2", "a", 3)} {
		if !h.hold(c) {
			t.Fatalf("hold(%v) before the hand-over = false", c)
		}
	}
	got, overwritten := h.handOver(time.Time{})
	want := []MirrorChange{change("w1", "a", 0), change("w1", "b", 1), change("w2", "a", 3)}
	if fmt.Sprint(got) != fmt.Sprint(want) || overwritten != 0 {
		t.Errorf("handOver() = %v, %d overwritten; want %v, 0", got, overwritten, want)
	}
	if h.hold(change("w1", "c", 4)) {
		t.Error("hold after the hand-over = true; the caller must tell it itself")
	}
	if got, _ := h.handOver(time.Time{}); len(got) != 0 {
		t.Errorf("a second handOver() = %v; want nothing", got)
	}
}

func TestHeldBackKeepsTheLatestChangesWhenFull(t *testing.T) {
	var h heldBack
	extra := 5
	for i := range heldBackChanges + extra {
		h.hold(MirrorChange{Worker: "w1", Job: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}})
	}
	got, overwritten := h.handOver(time.Time{})
	if overwritten != extra || len(got) != heldBackChanges {
		t.Fatalf("handOver() gave %d changes, %d overwritten; want %d, %d", len(got), overwritten, heldBackChanges, extra)
	}
	if first, last := got[0].Job.Name, got[len(got)-1].Job.Name; first != fmt.Sprint(extra) || last != fmt.Sprint(heldBackChanges+extra-1) {
		t.Errorf("kept changes %s..%s; want the latest, %d..%d", first, last, extra, heldBackChanges+extra-1)
	}
}

// Only the changes seen since the given time are handed over, each mirror
// at the first of its changes since then.
func TestHeldBackHandsOverTheChangesSince(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	var h heldBack
	h.hold(MirrorChange{Worker: "w1", Job: a, Seen: t0})
	h.hold(MirrorChange{Worker: "w1", Job: b, Seen: t0.Add(time.Second)})
	h.hold(MirrorChange{Worker: "w1", Job: a, Seen: t0.Add(40 * time.Second)})
	got, _ := h.handOver(t0.Add(30 * time.Second))
	want := []MirrorChange{{Worker: "w1", Job: a, Seen: t0.Add(40 * time.Second)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handOver(since t0+30s) = %v; want %v", got, want)
	}
}
