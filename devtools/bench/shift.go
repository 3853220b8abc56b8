package bench

import (
	"context"
	"fmt"
	"math"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A shift run (Config.Shift) measures how soon the manager stops placing
// Jobs on a worker that fills up and on one that is lost, while it
// dispatches: once a third of the Jobs are created the bench fills the
// first worker (a Job of its own there, created directly, takes every pod
// slot its nodes have, as another tenant's load would), and once half are
// created it SIGKILLs the second worker's API server, bringing it back
// lostFor later so that the Jobs placed there before finish.

// lostFor is how long the lost worker stays lost: far longer than the
// manager needs to notice, far shorter than its worker-lost timeout (its
// Jobs are not dispatched again).
const lostFor = 15 * time.Second

// fillerNamespace holds the Job that fills the first worker.
const fillerNamespace = "bench-filler"

// Shift is what a shift run measured.
type Shift struct {
	Filled WorkerShift `json:"filled"`
	Lost   WorkerShift `json:"lost"`
}

// WorkerShift is how the manager's placements left one worker.
type WorkerShift struct {
	Worker string `json:"worker"`
	// At is when the worker filled up (its capacity summary with no pod
	// slot free first read by the bench) or was lost (its API server
	// killed).
	At time.Time `json:"at"`
	// Until is when the lost worker's API server was started again: the
	// placements counted are those seen from At until then (zero: until
	// the end of the run, for the filled worker, which stays full).
	Until time.Time `json:"until,omitzero"`
	// PlacedAfter counts the Jobs the manager was seen placing there after
	// At (and before Until); LastPlacedAfterSeconds is the last of them,
	// from At (0: none).
	PlacedAfter            int     `json:"placedAfter"`
	LastPlacedAfterSeconds float64 `json:"lastPlacedAfterSeconds"`
	// PlacedElsewhereAfter counts the Jobs placed on other workers in the
	// same time: the shift had Jobs to show it.
	PlacedElsewhereAfter int `json:"placedElsewhereAfter"`
}

// shiftWorkers fills the first worker and loses the second as the Jobs of
// the run are created (see above); the figures come from the observer once
// every Job is placed (shiftFigures).
func (b *bencher) shiftWorkers(ctx context.Context, o *observer, n int) (filled, lost, back time.Time, err error) {
	if err := o.waitCreated(ctx, n/3); err != nil {
		return filled, lost, back, err
	}
	if filled, err = b.fill(ctx, 0); err != nil {
		return filled, lost, back, err
	}
	fmt.Fprintf(b.cfg.Progress, "shift: %s full (no pod slot free) %s\n", b.env.Workers[0].Name, filled.Format(time.TimeOnly))
	if err := o.waitCreated(ctx, n/2); err != nil {
		return filled, lost, back, err
	}
	lost, back, err = b.lose(ctx, 1)
	return filled, lost, back, err
}

// fill creates, directly on worker i, a Job whose pods take every pod slot
// of its nodes (whatever the mirrors there already take: its summary's
// free never goes below zero), and returns when its capacity summary was
// first read with no slot free.
func (b *bencher) fill(ctx context.Context, i int) (time.Time, error) {
	w := b.env.Workers[i]
	c, err := client.New(benchConfig(w), client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		return time.Time{}, err
	}
	summary := &v1alpha1.ClusterCapacity{}
	if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.ClusterCapacityName}, summary); err != nil {
		return time.Time{}, fmt.Errorf("reading %s's capacity summary: %w", w.Name, err)
	}
	slots := int64(0)
	for _, p := range summary.Status.Pools {
		slots += p.Allocatable.Pods().Value()
	}
	if slots == 0 || slots > math.MaxInt32 {
		return time.Time{}, fmt.Errorf("%s's capacity summary has %d pod slots", w.Name, slots)
	}
	if err := createNamespace(ctx, b.workers[i], fillerNamespace, nil); err != nil {
		return time.Time{}, err
	}
	filler := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: fillerNamespace, Name: "filler"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(slots)), Completions: ptr.To(int32(slots)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "load", Image: "registry.example/load:1"}}}}},
	}
	if err := c.Create(ctx, filler); err != nil {
		return time.Time{}, fmt.Errorf("creating the Job that fills %s: %w", w.Name, err)
	}
	var full time.Time
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cc := &v1alpha1.ClusterCapacity{}
		if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.ClusterCapacityName}, cc); err != nil {
			return false, err
		}
		for _, p := range cc.Status.Pools {
			if free := p.Free[corev1.ResourcePods]; free.Sign() > 0 {
				return false, nil
			}
		}
		full = time.Now()
		return len(cc.Status.Pools) > 0, nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("waiting for %s's capacity summary to show it full: %w", w.Name, err)
	}
	return full, nil
}

// lose SIGKILLs worker i's API server, as if its machine died, and
// restarts it lostFor later; it returns the moments of the kill and of
// the restart.
func (b *bencher) lose(ctx context.Context, i int) (killed, back time.Time, err error) {
	w := b.env.Workers[i]
	apiServer, err := w.Component("kube-apiserver")
	if err != nil {
		return killed, back, err
	}
	killed = time.Now()
	if err := syscall.Kill(apiServer.PID, syscall.SIGKILL); err != nil {
		return killed, back, fmt.Errorf("killing %s's API server (pid %d): %w", w.Name, apiServer.PID, err)
	}
	fmt.Fprintf(b.cfg.Progress, "shift: %s's API server killed %s; back in %s\n", w.Name, killed.Format(time.TimeOnly), lostFor)
	select {
	case <-ctx.Done():
		return killed, back, ctx.Err()
	case <-time.After(lostFor):
	}
	back = time.Now()
	if _, err := w.RestartComponent("kube-apiserver"); err != nil {
		return killed, back, fmt.Errorf("restarting %s's API server: %w", w.Name, err)
	}
	return killed, back, nil
}

// shiftFigures are the shift run's figures from what the observer saw.
func (o *observer) shiftFigures(filledWorker string, filled time.Time, lostWorker string, lost, back time.Time) *Shift {
	o.mu.Lock()
	defer o.mu.Unlock()
	return &Shift{Filled: placementsAfter(o.jobs, filledWorker, filled, time.Time{}), Lost: placementsAfter(o.jobs, lostWorker, lost, back)}
}

// placementsAfter is how the placements seen after at (and, unless it is
// zero, before until) left worker.
func placementsAfter(jobs map[string]*jobTimes, worker string, at, until time.Time) WorkerShift {
	out := WorkerShift{Worker: worker, At: at, Until: until}
	for _, j := range jobs {
		if j.placed.IsZero() || !j.placed.After(at) || (!until.IsZero() && !j.placed.Before(until)) {
			continue
		}
		if j.placedOn != worker {
			out.PlacedElsewhereAfter++
			continue
		}
		out.PlacedAfter++
		out.LastPlacedAfterSeconds = max(out.LastPlacedAfterSeconds, j.placed.Sub(at).Seconds())
	}
	return out
}

// startShift runs shiftWorkers beside the creates; the function it returns
// waits for it and gives the figures: call it once every Job is placed.
func (b *bencher) startShift(ctx context.Context, o *observer, n int) func() (*Shift, error) {
	type moments struct {
		filled, lost, back time.Time
		err                error
	}
	done := make(chan moments, 1)
	go func() {
		filled, lost, back, err := b.shiftWorkers(ctx, o, n)
		done <- moments{filled, lost, back, err}
	}()
	return func() (*Shift, error) {
		m := <-done
		if m.err != nil {
			return nil, fmt.Errorf("shift: %w", m.err)
		}
		return o.shiftFigures(b.env.Workers[0].Name, m.filled, b.env.Workers[1].Name, m.lost, m.back), nil
	}
}
