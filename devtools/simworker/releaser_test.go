package simworker

import (
	"context"
	"testing"
)

// A sample's first round releases at most the sample, over every caller;
// the next round releases without bound.
func TestReleaserSampleBoundsTheFirstRoundOnly(t *testing.T) {
	ctx := context.Background()
	r := newReleaser(0, 3)
	r.begin()
	released := 0
	for range 10 {
		if r.take(ctx) {
			released++
		}
	}
	if released != 3 {
		t.Errorf("first round released %d; want the sample, 3", released)
	}
	r.begin()
	for i := range 10 {
		if !r.take(ctx) {
			t.Fatalf("second round refused release %d; want no bound", i+1)
		}
	}
}

func TestReleaserWithoutSampleReleasesEveryRound(t *testing.T) {
	ctx := context.Background()
	r := newReleaser(0, 0)
	for round := range 2 {
		r.begin()
		for i := range 5 {
			if !r.take(ctx) {
				t.Fatalf("round %d refused release %d", round+1, i+1)
			}
		}
	}
}
