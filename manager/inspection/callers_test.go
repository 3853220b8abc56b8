package inspection

import (
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestCallersAreLimitedEachOnTheirOwn(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newCallers(Limits{RequestsPerSecond: 1, Burst: 2, StreamsPerCaller: 1, MaxCallers: 10, MaxStreams: 10}, clk)
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

	open, err := c.openStreams("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.openStreams("alice"); !errors.As(err, &tm) {
		t.Errorf("alice's second stream at once: %v, want refused", err)
	}
	open.release()
	open.release() // twice is once
	if c.byName["alice"].streams != 0 {
		t.Errorf("alice has %d streams after releasing her one", c.byName["alice"].streams)
	}
	if open, err := c.openStreams("alice"); err != nil {
		t.Errorf("alice's stream after the first ended: %v", err)
	} else {
		open.release()
	}
}

// A request's streams grow within its caller's limit and the replica's;
// the replica's ceilings hold across callers.
func TestStreamsAndDescribesAreBoundedPerReplica(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newCallers(Limits{RequestsPerSecond: 1, Burst: 1, StreamsPerCaller: 4, MaxCallers: 10, MaxStreams: 6, MaxDescribes: 1}, clk)
	alice, err := c.openStreams("alice")
	if err != nil {
		t.Fatal(err)
	}
	if got := alice.grow(9); got != 3 {
		t.Errorf("alice's request grew by %d streams, want 3 (her limit of 4)", got)
	}
	bob, err := c.openStreams("bob")
	if err != nil {
		t.Fatal(err)
	}
	if got := bob.grow(9); got != 1 {
		t.Errorf("bob's request grew by %d streams, want 1 (the replica's 6, alice holding 4)", got)
	}
	var tm *tooMany
	if _, err := c.openStreams("carol"); !errors.As(err, &tm) || !strings.Contains(tm.message, "the manager has 6 log streams open, the most one replica may") {
		t.Errorf("carol's stream with the replica's all taken: %v", err)
	}
	alice.release()
	if open, err := c.openStreams("carol"); err != nil {
		t.Errorf("carol's stream once alice's ended: %v", err)
	} else {
		open.release()
	}
	bob.releaseOne()
	if c.streams != 1 || c.byName["bob"].streams != 1 {
		t.Errorf("after one of bob's 2 streams ended: the replica counts %d, bob %d; want 1 and 1", c.streams, c.byName["bob"].streams)
	}
	bob.release()
	bob.releaseOne() // nothing left
	if c.streams != 0 {
		t.Errorf("the replica counts %d streams after all ended", c.streams)
	}

	end, err := c.beginDescribe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.beginExplanation("bob"); !errors.As(err, &tm) || !strings.Contains(tm.message, "the most one replica may") {
		t.Errorf("a second inspection at once past the replica's 1: %v", err)
	}
	end()
	end()
	if end, err := c.beginDescribe(); err != nil {
		t.Errorf("an inspection once the first ended: %v", err)
	} else {
		end()
	}

	// One caller has at most explanationsPerCaller of a replica's 8;
	// describes are not counted per caller.
	c = newCallers(Limits{RequestsPerSecond: 1, Burst: 1, MaxCallers: 10, MaxDescribes: 8}, clk)
	var ends []func()
	for range explanationsPerCaller {
		end, err := c.beginExplanation("mallory")
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	if _, err := c.beginExplanation("mallory"); !errors.As(err, &tm) || !strings.Contains(tm.message, "the most one user may") {
		t.Errorf("mallory's explanation past her %d at once: %v", explanationsPerCaller, err)
	}
	if end, err := c.beginDescribe(); err != nil {
		t.Errorf("mallory's describe while she holds her %d explanations: %v", explanationsPerCaller, err)
	} else {
		end()
	}
	if end, err := c.beginExplanation("alice"); err != nil {
		t.Errorf("alice's explanation while mallory holds her %d: %v", explanationsPerCaller, err)
	} else {
		end()
	}
	ends[0]()
	if end, err := c.beginExplanation("mallory"); err != nil {
		t.Errorf("mallory's inspection once one of hers ended: %v", err)
	} else {
		end()
	}
}

func TestCallersMemoryIsBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newCallers(Limits{RequestsPerSecond: 1, Burst: 1, StreamsPerCaller: 1, MaxCallers: 2, MaxStreams: 10}, clk)
	if err := c.admit("a"); err != nil {
		t.Fatal(err)
	}
	open, err := c.openStreams("b")
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
	open.release()
}
