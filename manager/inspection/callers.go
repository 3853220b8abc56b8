package inspection

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/jobferry/jobferry/manager/metrics"
)

// Limits bound what one caller (one authenticated user) may take of the
// manager and of the workers through the inspection API, and what one
// replica of the manager takes on for all callers together.
type Limits struct {
	// RequestsPerSecond and Burst: a token bucket per caller.
	RequestsPerSecond float64
	Burst             int
	// StreamsPerCaller: the worker log streams one caller has open at
	// once (a followed log of every pod of a Job opens one per pod and
	// container; those past the limit are left out, and the log says so).
	StreamsPerCaller int
	// FollowFor: how long a followed log streams at most.
	FollowFor time.Duration
	// MaxLogBytes: the most one log request returns; MaxLineBytes: the
	// longest log line passed on whole (a longer one is cut, and marked).
	MaxLogBytes  int64
	MaxLineBytes int
	// MaxPods and MaxEvents: the most of a mirror's pods and Events one
	// inspection shows (the newest); ScanEvents: the most of the
	// namespace's Events read on the worker to find them.
	MaxPods, MaxEvents, ScanEvents int
	// MaxCallers: callers remembered at once; an idle one is forgotten
	// first.
	MaxCallers int
	// MaxDescribes and MaxStreams: the inspections one replica answers at
	// once, and the worker log streams it has open at once, for all
	// callers together (past them, 429: try again).
	MaxDescribes, MaxStreams int
}

// DefaultLimits are the manager's defaults (its flags). An inspection
// holds at most MaxPods pods and MaxEvents Events in their shown form
// (workerread.Shown*: at most 64 KiB and 6 KiB each encoded, a few hundred
// bytes as a rule) and one whole object as it is read, so MaxDescribes at
// once hold about 130 MiB in the very worst case (200 pods of 16
// containers with every status at its bound) and a few MiB as a rule; a
// log stream holds one line of MaxLineBytes.
var DefaultLimits = Limits{
	RequestsPerSecond: 5, Burst: 20, StreamsPerCaller: 64, FollowFor: 30 * time.Minute, MaxLogBytes: 10 << 20, MaxLineBytes: 16 << 10,
	MaxPods: 200, MaxEvents: 500, ScanEvents: 5000, MaxCallers: 10000, MaxDescribes: 8, MaxStreams: 512,
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
	// streams and describes: the replica's, all callers' together.
	streams, describes int
}

type caller struct {
	bucket       *rate.Limiter
	streams      int
	explanations int
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
		// Whole seconds, rounded up, at least one: what Retry-After says.
		if whole := delay.Truncate(time.Second); whole < delay {
			delay = whole + time.Second
		}
		return &tooMany{message: fmt.Sprintf("%s made more than %d inspection requests at once (%g a second): try again in %s",
			name, c.limits.Burst, c.limits.RequestsPerSecond, delay), retryAfter: delay}
	}
	return nil
}

// streams is a log request's share of its caller's and the replica's
// worker log streams: taken by openStreams, grown by grow, given back by
// release.
type streams struct {
	c    *callers
	who  *caller
	n    int
	once sync.Once
}

// openStreams takes one worker log stream for the caller, if it and the
// replica have one left.
func (c *callers) openStreams(name string) (*streams, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	who, err := c.get(name)
	if err != nil {
		return nil, err
	}
	switch {
	case who.streams >= c.limits.StreamsPerCaller:
		return nil, &tooMany{message: fmt.Sprintf("%s has %d log streams open, the most one user may: end one first", name, who.streams), retryAfter: 5 * time.Second}
	case c.streams >= c.limits.MaxStreams:
		return nil, &tooMany{message: fmt.Sprintf("the manager has %d log streams open, the most one replica may: try again shortly", c.streams), retryAfter: 5 * time.Second}
	}
	who.streams++
	c.streams++
	metrics.InspectionLogStreams.Inc()
	return &streams{c: c, who: who, n: 1}, nil
}

// grow takes up to n more streams, as many as the caller and the replica
// have left, and says how many it took.
func (s *streams) grow(n int) int {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	n = max(0, min(n, c.limits.StreamsPerCaller-s.who.streams, c.limits.MaxStreams-c.streams))
	s.who.streams += n
	c.streams += n
	s.n += n
	metrics.InspectionLogStreams.Add(float64(n))
	return n
}

// releaseOne gives one stream back, as one of the request's streams
// ends while others go on.
func (s *streams) releaseOne() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.n > 0 {
		s.n--
		s.who.streams--
		c.streams--
		metrics.InspectionLogStreams.Dec()
	}
}

// release gives the streams back (once).
func (s *streams) release() {
	s.once.Do(func() {
		c := s.c
		c.mu.Lock()
		defer c.mu.Unlock()
		s.who.streams -= s.n
		c.streams -= s.n
		metrics.InspectionLogStreams.Sub(float64(s.n))
		s.n = 0
	})
}

// explanationsPerCaller is how many placement explanations one caller may
// have answered at once, of the replica's MaxDescribes: an explanation of
// a large Job takes seconds of CPU, and one caller must not hold every
// slot. (A describe or a log's listing waits on the workers, not the CPU,
// and a user follows many logs at once.)
const explanationsPerCaller = 2

// beginDescribe counts an inspection the replica answers, if it answers
// fewer than MaxDescribes; the func given back ends it.
func (c *callers) beginDescribe() (end func(), err error) {
	return c.begin("", 0)
}

// beginExplanation counts a placement explanation of the caller name as
// one of the replica's inspections, if the caller has fewer than
// explanationsPerCaller.
func (c *callers) beginExplanation(name string) (end func(), err error) {
	return c.begin(name, explanationsPerCaller)
}

// begin counts an inspection, of caller name at most perCaller at once
// when perCaller is set.
func (c *callers) begin(name string, perCaller int) (end func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.describes >= c.limits.MaxDescribes {
		return nil, &tooMany{message: fmt.Sprintf("the manager answers %d inspections at once, the most one replica may: try again shortly", c.describes), retryAfter: 2 * time.Second}
	}
	var who *caller
	if perCaller > 0 {
		if who, err = c.get(name); err != nil {
			return nil, err
		}
		if who.explanations >= perCaller {
			return nil, &tooMany{message: fmt.Sprintf("you have %d placements explained at once, the most one user may: try again once they end", who.explanations), retryAfter: time.Second}
		}
		who.explanations++
	}
	c.describes++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.describes--
			if who != nil {
				who.explanations--
			}
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
			if who.streams == 0 && who.explanations == 0 && who.bucket.TokensAt(now) >= float64(c.limits.Burst) {
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
