package bench

import (
	"testing"
	"time"
)

// The followed and quiet arms are compared over all their Jobs together,
// not as an average of the arms' percentiles: an arm of few slow Jobs
// weighs as many Jobs as it has.
func TestPooledOverheadTakesEveryArmsJobs(t *testing.T) {
	arm := func(seconds ...int) Arm {
		jobs := map[string]*jobTimes{}
		start := time.Unix(0, 0)
		for i, s := range seconds {
			jobs[string(rune('a'+i))] = &jobTimes{created: start, mirrorSeen: start.Add(time.Duration(s) * time.Second)}
		}
		return Arm{timings: summarise(jobs)}
	}
	quiet := []Arm{arm(1, 1, 1), arm(2, 4)}
	got := pooledOverhead(quiet)
	if got.Count != 5 || got.P50 != 1 || got.Max != 4 {
		t.Errorf("pooled over arms of (1, 1, 1) and (2, 4) s: %+v, want 5 Jobs, p50 1 s, max 4 s", got)
	}
	if got := spread(quiet); got != 4 {
		t.Errorf("spread of p99s 1 s and 4 s: %v, want 4", got)
	}
	if got := spread([]Arm{arm(2)}); got != 1 {
		t.Errorf("spread of one arm: %v, want 1", got)
	}
}
