package inspection

import (
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestCallersAreLimitedEachOnTheirOwn(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newCallers(Limits{RequestsPerSecond: 1, Burst: 2, StreamsPerCaller: 1, MaxCallers: 10}, clk)
	for i := range 2 {
		if err := c.admit("alice"); err != nil {
			t.Fatalf("alice's request %d within her burst: %v", i+1, err)
		}
	}
	var tm *tooMany
	if err := c.admit("alice"); !errors.As(err, &tm) || tm.retryAfter <= 0 {
		t.Fatalf("alice's third request at once: %v, want refused with a time to retry", err)
	}
	if err := c.admit("bob"); err != nil {
		t.Errorf("bob is not limited by alice: %v", err)
	}
	clk.Step(time.Second)
	if err := c.admit("alice"); err != nil {
		t.Errorf("alice a second later: %v", err)
	}

	release, err := c.openStream("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.openStream("alice"); !errors.As(err, &tm) {
		t.Errorf("alice's second stream at once: %v, want refused", err)
	}
	release()
	release() // twice is once
	if c.byName["alice"].streams != 0 {
		t.Errorf("alice has %d streams after releasing her one", c.byName["alice"].streams)
	}
	if release, err := c.openStream("alice"); err != nil {
		t.Errorf("alice's stream after the first ended: %v", err)
	} else {
		release()
	}
}

func TestCallersMemoryIsBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newCallers(Limits{RequestsPerSecond: 1, Burst: 1, StreamsPerCaller: 1, MaxCallers: 2}, clk)
	if err := c.admit("a"); err != nil {
		t.Fatal(err)
	}
	release, err := c.openStream("b")
	if err != nil {
		t.Fatal(err)
	}
	// a's bucket is empty and b streams: neither may be forgotten yet.
	var tm *tooMany
	if err := c.admit("c"); !errors.As(err, &tm) {
		t.Fatalf("a third caller with two busy ones remembered: %v, want refused", err)
	}
	clk.Step(time.Second)
	if err := c.admit("c"); err != nil {
		t.Fatalf("a third caller once a is idle: %v", err)
	}
	if _, kept := c.byName["a"]; kept || len(c.byName) != 2 {
		t.Errorf("remembered %d callers (a kept: %t), want b and c", len(c.byName), kept)
	}
	release()
}
