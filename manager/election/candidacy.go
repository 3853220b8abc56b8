// Package election holds a manager replica back from taking the leader
// election lease until it is ready to lead: a replica whose caches of the
// workers' mirrors are cold needs minutes to list them at 100,000 Jobs,
// while its peer, standing by warm, would lead at once. Both ask for the
// lease every retry period once it runs out, and whichever asks first wins,
// so a cold replica restarted a moment before (as a Deployment does after a
// crash) can take the lease from the warm one: it did in a 5,000-Job
// failover run of the bench.
package election

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
)

// Candidacy is a leader election lock that stands for election (creates or
// takes over the lease) only once its readiness says the replica is ready
// to lead, or MaxWait after it began, whichever comes first: a replica that
// never gets ready (a worker whose mirrors never finish listing) still
// leads if no other does. Once it has stood it always does, so a leader's
// renewals are never held back. Reading the lease goes through as is.
type Candidacy struct {
	resourcelock.Interface
	clock   clock.Clock
	began   time.Time
	maxWait time.Duration

	// ready says whether the replica is ready to lead: nil, or why not
	// (SetReady); unset: ready.
	ready atomic.Pointer[func() error]
	// stood: the candidacy no longer waits.
	stood atomic.Bool
}

// NewCandidacy wraps lock, beginning now by clk.
func NewCandidacy(lock resourcelock.Interface, clk clock.Clock, maxWait time.Duration) *Candidacy {
	return &Candidacy{Interface: lock, clock: clk, began: clk.Now(), maxWait: maxWait}
}

// SetReady sets what says whether the replica is ready to lead (built
// after the controller manager that holds the lock).
func (c *Candidacy) SetReady(ready func() error) { c.ready.Store(&ready) }

// Create creates the lease, once the replica may stand.
func (c *Candidacy) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := c.mayStand(); err != nil {
		return err
	}
	return c.Interface.Create(ctx, ler)
}

// Update takes over or renews the lease, once the replica may stand.
func (c *Candidacy) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := c.mayStand(); err != nil {
		return err
	}
	return c.Interface.Update(ctx, ler)
}

// mayStand is nil once the replica may stand for election, else why not
// yet (the leader elector logs it with each attempt, every retry period).
func (c *Candidacy) mayStand() error {
	if c.stood.Load() {
		return nil
	}
	waited := c.clock.Since(c.began)
	if ready := c.ready.Load(); ready != nil && waited < c.maxWait {
		if err := (*ready)(); err != nil {
			return fmt.Errorf("not standing for election until ready to lead (waited %s of at most %s): %w", waited.Round(time.Second), c.maxWait, err)
		}
	}
	c.stood.Store(true)
	return nil
}

// Lock is the lease lock controller-runtime would make for these options
// (leaderelection.NewResourceLock: its identity, client timeouts and
// labels), its leadership Events recorded by the events broadcaster it
// returns, which the caller shuts down when done.
func Lock(config *rest.Config, scheme *runtime.Scheme, options leaderelection.Options) (resourcelock.Interface, record.EventBroadcaster, error) {
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, nil, fmt.Errorf("building the client of the leader election Events: %w", err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	lock, err := leaderelection.NewResourceLock(config, lockEvents{broadcaster: broadcaster, scheme: scheme}, options)
	if err != nil {
		broadcaster.Shutdown()
		return nil, nil, fmt.Errorf("building the leader election lock: %w", err)
	}
	return lock, broadcaster, nil
}

// lockEvents gives the lock its recorder of the Events it records (the
// core API's, as controller-runtime's own lock does).
type lockEvents struct {
	broadcaster record.EventBroadcaster
	scheme      *runtime.Scheme
}

func (p lockEvents) GetEventRecorderFor(name string) record.EventRecorder {
	return p.broadcaster.NewRecorder(p.scheme, corev1.EventSource{Component: name})
}

// GetEventRecorder is not used by the lock.
func (p lockEvents) GetEventRecorder(string) events.EventRecorder { return nil }
