package bench

import (
	"testing"
	"time"
)

// The placements seen after the event count for the worker they went to:
// there (with the last of them from the event) or elsewhere; those seen
// before it, or never placed, do not count.
func TestPlacementsAfter(t *testing.T) {
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	jobs := map[string]*jobTimes{
		"before":          {placed: at.Add(-time.Second), placedOn: "worker-1"},
		"at":              {placed: at, placedOn: "worker-1"},
		"there soon":      {placed: at.Add(200 * time.Millisecond), placedOn: "worker-1"},
		"there later":     {placed: at.Add(700 * time.Millisecond), placedOn: "worker-1"},
		"elsewhere":       {placed: at.Add(300 * time.Millisecond), placedOn: "worker-2"},
		"elsewhere later": {placed: at.Add(5 * time.Second), placedOn: "worker-3"},
		"not placed":      {},
	}
	got := placementsAfter(jobs, "worker-1", at, time.Time{})
	want := WorkerShift{Worker: "worker-1", At: at, PlacedAfter: 2, LastPlacedAfterSeconds: 0.7, PlacedElsewhereAfter: 2}
	if got != want {
		t.Errorf("placementsAfter = %+v, want %+v", got, want)
	}
	if none := placementsAfter(jobs, "worker-1", at.Add(time.Second), time.Time{}); none.PlacedAfter != 0 || none.LastPlacedAfterSeconds != 0 || none.PlacedElsewhereAfter != 1 {
		t.Errorf("after the last placement there: %+v, want none there and one elsewhere", none)
	}
	// Until a moment: what is placed from then on does not count.
	window := placementsAfter(jobs, "worker-1", at, at.Add(500*time.Millisecond))
	if want := (WorkerShift{Worker: "worker-1", At: at, Until: at.Add(500 * time.Millisecond), PlacedAfter: 1, LastPlacedAfterSeconds: 0.2, PlacedElsewhereAfter: 1}); window != want {
		t.Errorf("placementsAfter until a moment = %+v, want %+v", window, want)
	}
}
