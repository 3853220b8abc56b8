package workers

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A request without an answer is told; one with any answer, or one its
// caller gave up on, is not.
func TestUnansweredReporter(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	cases := []struct {
		name     string
		resp     *http.Response
		err      error
		canceled bool
		want     int32
	}{
		{name: "no answer", err: refused, want: 1},
		{name: "an answer, even an error status", resp: &http.Response{StatusCode: http.StatusServiceUnavailable}},
		{name: "the caller gave up", err: context.Canceled, canceled: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var told atomic.Int32
			rt := unansweredReporter{
				next:       roundTripFunc(func(*http.Request) (*http.Response, error) { return tc.resp, tc.err }),
				unanswered: func() { told.Add(1) },
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.canceled {
				cancel()
			} else {
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://worker.example/readyz", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rt.RoundTrip(req); !errors.Is(err, tc.err) {
				t.Fatalf("RoundTrip error %v, want %v", err, tc.err)
			}
			if got := told.Load(); got != tc.want {
				t.Errorf("told %d times, want %d", got, tc.want)
			}
		})
	}
}

// A worker thought healthy is asked to be probed once however many
// requests fail before the probe runs; one thought unhealthy is left to
// its probes' backoff.
func TestUnansweredAsksOneProbe(t *testing.T) {
	asks := make(chan string, 10)
	c := &Connection{name: "worker-1", askProbe: func(w string) { asks <- w }}
	c.unanswered()
	c.healthy.Store(true)
	for range 3 {
		c.unanswered()
	}
	select {
	case w := <-asks:
		if w != "worker-1" {
			t.Fatalf("asked for a probe of %q", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no probe asked for")
	}
	if !c.probeAsked.Load() {
		t.Fatal("the ask is not remembered until the probe")
	}
	// The probe clears the ask (Connection.probe); a later failure asks again.
	c.probeAsked.Store(false)
	c.unanswered()
	select {
	case <-asks:
	case <-time.After(10 * time.Second):
		t.Fatal("no probe asked for after the first one ran")
	}
	if n := len(asks); n != 0 {
		t.Errorf("%d more asks, want none", n)
	}
}
