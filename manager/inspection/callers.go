package inspection

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Limits bound what one caller (one authenticated user) may take of the
// manager and of the workers through the inspection API.
type Limits struct {
	// RequestsPerSecond and Burst: a token bucket per caller.
	RequestsPerSecond float64
	Burst             int
	// StreamsPerCaller: log requests of one caller open at once.
	StreamsPerCaller int
	// FollowFor: how long a followed log streams at most.
	FollowFor time.Duration
	// MaxLogBytes: the most one log request returns.
	MaxLogBytes int64
	// MaxPods and MaxEvents: the most of a mirror's pods and Events one
	// inspection shows (the newest); ScanEvents: the most of the
	// namespace's Events read on the worker to find them.
	MaxPods, MaxEvents, ScanEvents int
	// MaxCallers: callers remembered at once; an idle one is forgotten
	// first.
	MaxCallers int
}

// DefaultLimits are the manager's defaults (its flags).
var DefaultLimits = Limits{
	RequestsPerSecond: 5, Burst: 20, StreamsPerCaller: 4, FollowFor: 30 * time.Minute, MaxLogBytes: 10 << 20,
	MaxPods: 200, MaxEvents: 500, ScanEvents: 5000, MaxCallers: 10000,
}

// callers is the inspection server's one memory: per caller, its token
// bucket and how many log streams it has open. It holds at most
// limits.MaxCallers callers; an idle caller (no stream open, its bucket
// full) may be forgotten at any time, which costs it nothing.
type callers struct {
	limits Limits
	clock  clock.PassiveClock

	mu     sync.Mutex
	byName map[string]*caller
}

type caller struct {
	bucket  *rate.Limiter
	streams int
}

func newCallers(limits Limits, clk clock.PassiveClock) *callers {
	return &callers{limits: limits, clock: clk, byName: map[string]*caller{}}
}

// tooMany is a refusal for a caller over its limits: the API's 429.
type tooMany struct {
	message    string
	retryAfter time.Duration
}

func (e *tooMany) Error() string { return e.message }

// admit takes one request of the caller from its bucket.
func (c *callers) admit(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	who, err := c.get(name)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	r := who.bucket.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return &tooMany{message: fmt.Sprintf("%s made more than %d inspection requests at once (%g a second): try again in %s",
			name, c.limits.Burst, c.limits.RequestsPerSecond, delay.Round(time.Second)), retryAfter: delay}
	}
	return nil
}

// openStream counts a log stream of the caller, if it has fewer than
// StreamsPerCaller open; release ends it.
func (c *callers) openStream(name string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	who, err := c.get(name)
	if err != nil {
		return nil, err
	}
	if who.streams >= c.limits.StreamsPerCaller {
		return nil, &tooMany{message: fmt.Sprintf("%s has %d log streams open, the most one user may: end one first", name, who.streams), retryAfter: 5 * time.Second}
	}
	who.streams++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			who.streams--
		})
	}, nil
}

// get is the caller's entry, made when new; at MaxCallers, idle callers
// are forgotten to make room, and a caller there is no room for is
// refused. c.mu is held.
func (c *callers) get(name string) (*caller, error) {
	if who, ok := c.byName[name]; ok {
		return who, nil
	}
	if len(c.byName) >= c.limits.MaxCallers {
		now := c.clock.Now()
		for n, who := range c.byName {
			if who.streams == 0 && who.bucket.TokensAt(now) >= float64(c.limits.Burst) {
				delete(c.byName, n)
			}
		}
		if len(c.byName) >= c.limits.MaxCallers {
			return nil, &tooMany{message: fmt.Sprintf("the manager serves %d callers at once, the most it may: try again shortly", len(c.byName)), retryAfter: 5 * time.Second}
		}
	}
	// A new bucket is full (rate.NewLimiter), whatever the clock says.
	who := &caller{bucket: rate.NewLimiter(rate.Limit(c.limits.RequestsPerSecond), c.limits.Burst)}
	c.byName[name] = who
	return who, nil
}
