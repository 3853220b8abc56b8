package simworker

import (
	"context"
	"sync"

	"golang.org/x/time/rate"
)

// releaser paces the releases of every simulated worker, round by round
// (one round per release signal). Without a sample each round releases
// every held Job at the rate; with one, the first round releases at most
// sample Jobs over all workers at the rate (a steady trickle whose
// status-copy lag is measured while the rest are still tracked) and the
// later rounds the rest at once.
type releaser struct {
	sample int

	mu      sync.Mutex
	limiter *rate.Limiter
	// round counts the rounds begun; budget is what the current one may
	// still release (negative: no bound).
	round, budget int
}

// newReleaser paces releases at perSecond (0: at once), the first round
// bounded to sample Jobs when sample > 0.
func newReleaser(perSecond float64, sample int) *releaser {
	limit := rate.Inf
	if perSecond > 0 {
		limit = rate.Limit(perSecond)
	}
	return &releaser{sample: sample, limiter: rate.NewLimiter(limit, 1), budget: -1}
}

// begin starts a round (a release signal).
func (r *releaser) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.round++
	switch {
	case r.sample <= 0:
		r.budget = -1
	case r.round == 1:
		r.budget = r.sample
	default:
		r.budget = -1
		r.limiter.SetLimit(rate.Inf)
	}
}

// take waits for the next release's turn; false when this round has
// released all it may, or ctx ended.
func (r *releaser) take(ctx context.Context) bool {
	r.mu.Lock()
	if r.budget == 0 {
		r.mu.Unlock()
		return false
	}
	if r.budget > 0 {
		r.budget--
	}
	limiter := r.limiter
	r.mu.Unlock()
	return limiter.Wait(ctx) == nil
}
