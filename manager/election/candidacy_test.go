package election

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// recordingLock is a lock that records the writes that reach it.
type recordingLock struct {
	resourcelock.Interface
	creates, updates int
}

func (l *recordingLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	l.creates++
	return nil
}

func (l *recordingLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.updates++
	return nil
}

func TestCandidacyStandsOnceReadyAndFromThenOn(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC))
	lock := &recordingLock{}
	c := NewCandidacy(lock, clk, 2*time.Minute)
	ready := errors.New("worker-3's caches are still listing its mirrors")
	c.SetReady(func() error { return ready })
	ctx := context.Background()

	clk.Step(10 * time.Second)
	err := c.Update(ctx, resourcelock.LeaderElectionRecord{})
	if err == nil || !strings.Contains(err.Error(), "worker-3's caches are still listing") || !strings.Contains(err.Error(), "waited 10s of at most 2m0s") {
		t.Fatalf("Update while not ready: %v; want the reason and the wait", err)
	}
	if err := c.Create(ctx, resourcelock.LeaderElectionRecord{}); err == nil || lock.creates+lock.updates != 0 {
		t.Fatalf("Create while not ready: %v, %d writes reached the lock; want an error and none", err, lock.creates+lock.updates)
	}

	ready = nil
	if err := c.Create(ctx, resourcelock.LeaderElectionRecord{}); err != nil || lock.creates != 1 {
		t.Fatalf("Create once ready: %v, %d creates; want nil, 1", err, lock.creates)
	}
	// A leader's renewals are never held back, ready or not.
	ready = errors.New("a new worker's caches are listing")
	if err := c.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil || lock.updates != 1 {
		t.Errorf("Update after standing: %v, %d updates; want nil, 1", err, lock.updates)
	}
}

func TestCandidacyStandsAfterMaxWaitReadyOrNot(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC))
	lock := &recordingLock{}
	c := NewCandidacy(lock, clk, 2*time.Minute)
	c.SetReady(func() error { return errors.New("never ready") })
	clk.Step(2 * time.Minute)
	if err := c.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil || lock.updates != 1 {
		t.Errorf("Update after the longest wait: %v, %d updates; want nil, 1", err, lock.updates)
	}
}

func TestCandidacyWithoutReadinessStandsAtOnce(t *testing.T) {
	lock := &recordingLock{}
	c := NewCandidacy(lock, clocktesting.NewFakeClock(time.Now()), time.Minute)
	if err := c.Create(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil || lock.creates != 1 {
		t.Errorf("Create without a readiness: %v, %d creates; want nil, 1", err, lock.creates)
	}
}
