package jobs

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/workers"
)

// A check applied reads as applied while the cache shows the Workload as it
// was before; any other version of it, or another Workload, reads as it is.
func TestCheckMemoReadsTheCheckAppliedUntilTheCacheCatchesUp(t *testing.T) {
	var m checkMemo
	key := types.NamespacedName{Namespace: "a", Name: "j"}
	before := workload.View{Workload: "job-j-1", Version: "7", Check: "jobferry", State: kueue.CheckStatePending}
	ready := workload.CheckUpdate{State: kueue.CheckStateReady, Message: "placed on worker-1",
		Updates: []kueue.PodSetUpdate{{Name: "main", NodeSelector: map[string]string{"pool": "general"}}}}
	if got := m.view(key, before); got.State != kueue.CheckStatePending {
		t.Fatalf("nothing applied yet, read %s", got.State)
	}
	m.wrote(key, before, ready)
	stale := m.view(key, before)
	if !ready.Unchanged(stale) || stale.Message != ready.Message || stale.Version != "7" {
		t.Errorf("the version it was applied to reads %+v, want the check applied", stale)
	}
	// Kueue reset the check since: the cache's newer version is the truth.
	reset := before
	reset.Version = "9"
	if got := m.view(key, reset); got.State != kueue.CheckStatePending {
		t.Errorf("a newer version reads %s, want it as it is (Pending)", got.State)
	}
	other := before
	other.Workload = "job-j-2"
	if got := m.view(key, other); got.State != kueue.CheckStatePending {
		t.Errorf("another Workload of the same version reads %s, want it as it is", got.State)
	}
	m.forget(key)
	if got := m.view(key, before); got.State != kueue.CheckStatePending {
		t.Errorf("forgotten, it reads %s", got.State)
	}
}

func TestObservedMemoKeepsTheOldestChange(t *testing.T) {
	var m observedMemo
	key := types.NamespacedName{Namespace: "a", Name: "j"}
	t0 := time.Unix(100, 0)
	m.seen(key, t0)
	m.seen(key, t0.Add(time.Second))
	if got := m.since(key); !got.Equal(t0) {
		t.Errorf("since = %v, want the first change %v", got, t0)
	}
	if got, ok := m.take(key); !ok || !got.Equal(t0) {
		t.Errorf("take = %v, %t; want %v", got, ok, t0)
	}
	if _, ok := m.take(key); ok {
		t.Error("a change taken is still remembered")
	}
}

// A deleted worker's Jobs count from the first look at it gone; a worker
// registered again starts afresh when it is gone next.
func TestRemovedWorkersCountFromTheFirstLook(t *testing.T) {
	h := newJobsHarness(t)
	t0 := h.clock.Now()
	if got := h.r.memory.removed.since("w1", t0); !got.Equal(t0) {
		t.Fatalf("first look: %v, want %v", got, t0)
	}
	if got := h.r.memory.removed.since("w1", t0.Add(time.Minute)); !got.Equal(t0) {
		t.Errorf("second look: %v, want the first look's %v", got, t0)
	}
	h.r.workerReconciled("w1")
	later := t0.Add(time.Hour)
	if got := h.r.memory.removed.since("w1", later); !got.Equal(later) {
		t.Errorf("gone again after it was reconciled: %v, want %v", got, later)
	}
}

// The manager is quiet until quietCopies copies fall within one period,
// and again once the oldest of them is a period old.
func TestCopyRateQuiet(t *testing.T) {
	var c copyRate
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !c.quiet(start, time.Second) {
		t.Fatal("a manager that copied nothing is not quiet")
	}
	for i := range quietCopies - 1 {
		c.wrote(start.Add(time.Duration(i) * 10 * time.Millisecond))
	}
	if !c.quiet(start.Add(100*time.Millisecond), time.Second) {
		t.Errorf("%d copies in a period: not quiet", quietCopies-1)
	}
	c.wrote(start.Add(100 * time.Millisecond))
	if c.quiet(start.Add(200*time.Millisecond), time.Second) {
		t.Errorf("%d copies in a period: quiet", quietCopies)
	}
	if !c.quiet(start.Add(time.Second), time.Second) {
		t.Error("a period after the oldest of the last copies: not quiet")
	}
}

// The mirrors a standby saw change are looked at ahead of the others (the
// mirror source, at statusPriority), their lag counted from when the
// standby saw them, not from the election.
func TestMirrorsHeldBackAreQueuedAsMirrorChangesFromWhenSeen(t *testing.T) {
	r := &JobReconciler{events: newEventSources()}
	seen := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	r.mirrorsHeldBack([]workers.MirrorChange{{Worker: "w1", Job: a, Seen: seen}, {Worker: "w2", Job: b, Seen: seen.Add(time.Second)}})
	for _, want := range []types.NamespacedName{a, b} {
		select {
		case e := <-r.events.mirrors:
			if got := client.ObjectKeyFromObject(e.Object); got != want {
				t.Errorf("queued %v as a mirror change; want %v", got, want)
			}
		default:
			t.Fatalf("%v was not queued as a mirror change (jobs source: %d)", want, len(r.events.jobs))
		}
	}
	if got := r.memory.observed.since(a); !got.Equal(seen) {
		t.Errorf("lag of %v counted from %v; want %v", a, got, seen)
	}
}

// laggingCache serves the Job as it was before the manager's last write of
// it, as an informer that has not caught up with that write does.
type laggingCache struct {
	client.Client
	before *batchv1.Job
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if job, ok := obj.(*batchv1.Job); ok && c.before != nil && key == client.ObjectKeyFromObject(c.before) {
		c.before.DeepCopyInto(job)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// beforeWrites keeps the Job as stored before each write of it.
type beforeWrites struct {
	client.Client
	last *batchv1.Job
}

func (c *beforeWrites) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.keep(ctx, obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *beforeWrites) Status() client.SubResourceWriter {
	return statusBeforeWrites{SubResourceWriter: c.Client.Status(), c: c}
}

func (c *beforeWrites) keep(ctx context.Context, obj client.Object) {
	if _, ok := obj.(*batchv1.Job); ok {
		stored := &batchv1.Job{}
		if c.Client.Get(ctx, client.ObjectKeyFromObject(obj), stored) == nil {
			c.last = stored
		}
	}
}

type statusBeforeWrites struct {
	client.SubResourceWriter
	c *beforeWrites
}

func (s statusBeforeWrites) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.keep(ctx, obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// A reconcile on a cache that still shows the version of the Job this
// manager's last write replaced writes nothing (it would only lose the
// race: a Conflict) and looks again; after replacedFor it acts on what it
// reads.
func TestAReconcileWaitsForTheCacheToShowItsOwnWrite(t *testing.T) {
	h := newJobsHarness(t, "w1")
	writes := &beforeWrites{Client: h.manager}
	h.r.Client = writes
	h.create(t, policytest.Job())
	h.reconcile(t)
	if h.job(t).Annotations[v1alpha1.MirrorUIDAnnotation] == "" || writes.last == nil {
		t.Fatalf("the first reconcile recorded no mirror: %v", h.job(t).Annotations)
	}
	h.r.Client = &laggingCache{Client: h.manager, before: writes.last}
	jobWrites, statusWrites := h.jobWrites.Load(), h.statusWrites.Load()

	if result := h.reconcile(t); result.RequeueAfter == 0 {
		t.Errorf("a reconcile on the replaced version: result %+v, want a requeue", result)
	}
	if h.jobWrites.Load() != jobWrites || h.statusWrites.Load() != statusWrites {
		t.Errorf("a reconcile on the replaced version wrote the Job (%d Job, %d status writes)", h.jobWrites.Load()-jobWrites, h.statusWrites.Load()-statusWrites)
	}
	h.clock.Step(replacedFor)
	h.reconcile(t)
	if h.jobWrites.Load()+h.statusWrites.Load() == jobWrites+statusWrites {
		t.Error("after replacedFor the replaced version was still not acted on")
	}
}

// A write that stored a new version marks the one it replaced as stale,
// for the Job of that UID only and for replacedFor; a write the API server
// stored nothing new for (same version, no event to come) marks nothing.
func TestReplacedMemoMarksOnlyWhatAWriteReplaced(t *testing.T) {
	now := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	v := func(uid types.UID, version string) *batchv1.Job {
		j := &batchv1.Job{}
		j.Namespace, j.Name, j.UID, j.ResourceVersion = "a", "j", uid, version
		return j
	}
	var m replacedMemo
	m.wrote(v("u1", "5"), v("u1", "5"), now)
	if m.stale(v("u1", "5"), now) {
		t.Error("a write that stored nothing new marked its version stale")
	}
	m.wrote(v("u1", "5"), v("u1", "6"), now)
	if m.stale(v("u2", "5"), now) {
		t.Error("another Job of the name read as stale")
	}
	m.wrote(v("u1", "5"), v("u1", "6"), now)
	if !m.stale(v("u1", "5"), now) || !m.stale(v("u1", "5"), now.Add(replacedFor-time.Millisecond)) {
		t.Error("the replaced version not stale within replacedFor")
	}
	if m.stale(v("u1", "5"), now.Add(replacedFor)) {
		t.Error("the replaced version still stale after replacedFor")
	}
	m.wrote(v("u1", "5"), v("u1", "6"), now)
	if m.stale(v("u1", "6"), now) || m.stale(v("u1", "5"), now) {
		t.Error("once the cache showed another version, the memory should be gone")
	}

	// A write that stored nothing new, after one that did, keeps what the
	// first replaced.
	m.wrote(v("u1", "6"), v("u1", "7"), now)
	m.wrote(v("u1", "7"), v("u1", "7"), now)
	if !m.stale(v("u1", "6"), now) {
		t.Error("a write that stored nothing new undid the memory of the one before")
	}
	m.forget(client.ObjectKey{Namespace: "a", Name: "j"})
	if m.stale(v("u1", "6"), now) {
		t.Error("forgotten, the version still read as stale")
	}

	// One reconcile writes twice: the cache is behind at either version.
	m.wrote(v("u1", "7"), v("u1", "8"), now)
	m.wrote(v("u1", "8"), v("u1", "9"), now.Add(time.Second))
	if !m.stale(v("u1", "7"), now.Add(time.Second)) || !m.stale(v("u1", "8"), now.Add(time.Second)) {
		t.Error("after two writes, a cache showing either replaced version read as current")
	}
	if m.stale(v("u1", "9"), now.Add(time.Second)) || m.stale(v("u1", "7"), now.Add(time.Second)) {
		t.Error("the cache showed the last write, yet a version read as stale")
	}
}
