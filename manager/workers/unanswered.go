package workers

import (
	"net/http"

	"k8s.io/client-go/rest"
)

// A worker whose API server is gone is found by its health probe, every
// --worker-health-interval (10 s) while it is thought healthy: until then
// placement would keep choosing it, and every Job placed there waits for
// the worker-lost timeout. A request to it that gets no answer at all —
// refused, reset, timed out, the mirror caches' watches among them, which
// break the moment it dies — asks for a probe at once instead, so new
// placements move elsewhere within a round trip. The probe decides, not
// the failed request: one lost connection to a worker that answers the
// probe changes nothing.

// unansweredReporter tells of each request its transport got no answer to
// (an error, not an HTTP status), unless the caller had given up on it
// first (its context ended: a cache stopping, a deadline of the caller's).
type unansweredReporter struct {
	next       http.RoundTripper
	unanswered func()
}

func (u unansweredReporter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.next.RoundTrip(req)
	if err != nil && req.Context().Err() == nil {
		u.unanswered()
	}
	return resp, err
}

// reportingUnanswered is cfg whose requests call unanswered when they get
// no answer.
func reportingUnanswered(cfg *rest.Config, unanswered func()) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return unansweredReporter{next: rt, unanswered: unanswered}
	})
	return out
}

// unanswered asks for a probe of the worker now, once until a probe runs,
// and only while it is thought healthy: while it is not, the backoff of
// failed probes already looks again soon.
func (c *Connection) unanswered() {
	if c.healthy.Load() && c.probeAsked.CompareAndSwap(false, true) && c.askProbe != nil {
		// Not on the request's goroutine: the ask may wait for the
		// controller's queue.
		go c.askProbe(c.name)
	}
}
