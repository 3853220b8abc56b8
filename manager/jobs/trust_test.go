package jobs

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// The attacks of issue 23 on the reconciler, with the manager's own guard
// alone (no admission policy in a unit test): a tenant who writes
// jobferry's annotations, a worker-namespace user who replaces or deletes a
// mirror.

// runningOn dispatches the Job to its only fitting worker and reports it
// running there.
func runningOn(t *testing.T, h *jobsHarness, worker string) *batchv1.Job {
	t.Helper()
	h.create(t, policytest.Job())
	h.reconcile(t)
	h.report(t, worker, policytest.Running)
	h.clock.Step(time.Second)
	h.reconcile(t)
	job := h.job(t)
	if job.Annotations[v1alpha1.WorkerAnnotation] != worker || job.Status.Active != 1 {
		t.Fatalf("not running on %s: %v %+v", worker, job.Annotations, job.Status)
	}
	h.events()
	return job
}

// tamper changes the manager Job as its author may: an update of its
// annotations.
func tamper(t *testing.T, h *jobsHarness, change func(*batchv1.Job)) {
	t.Helper()
	job := h.job(t)
	change(job)
	if err := h.manager.Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

func TestTenantMovingARunningJobMovesNothing(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	h.workers.Conns["w2"].Down = true
	runningOn(t, h, "w1")
	h.workers.Conns["w2"].Down = false
	m := h.mirror(t, "w1")

	tamper(t, h, func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w2" })
	h.reconcile(t)
	h.reconcile(t)
	if m2 := h.mirror(t, "w2"); m2 != nil {
		t.Errorf("a mirror was created on w2, where the tenant moved the Job: the Job runs twice")
	}
	if now := h.mirror(t, "w1"); now == nil || now.UID != m.UID {
		t.Errorf("the mirror on w1 was touched: %v", now)
	}
	if got := h.events(); strings.Join(got, ",") != policy.ReasonUntrustedState {
		t.Errorf("events %v, want one %s (the second reconcile of the same version says nothing more)", got, policy.ReasonUntrustedState)
	}
	// What jobferry wrote, restored: the Job goes on.
	tamper(t, h, func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w1" })
	h.report(t, "w1", policytest.Complete)
	h.reconcile(t)
	if job := h.job(t); !jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Errorf("after the restore the final status was not copied: %+v", job.Status)
	}
}

func TestTenantRaisingTheAttemptRestartsNothing(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	m := h.mirror(t, "w1")
	tamper(t, h, func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2" })
	h.reconcile(t)
	if now := h.mirror(t, "w1"); now == nil || now.UID != m.UID || h.workers.Conns["w1"].Creates.Load() != 1 {
		t.Errorf("the running mirror was fenced or recreated (%d creates): %v", h.workers.Conns["w1"].Creates.Load(), now)
	}
}

func TestTenantPlacementAtCreationIsNotActedOn(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.workers.Conns["w1"].Pools = nil // w1 has no room: only a forged placement would put the Job there
	h.create(t, policytest.Job(func(j *batchv1.Job) {
		j.CreationTimestamp = metav1.NewTime(policytest.Now)
		j.Annotations[v1alpha1.WorkerAnnotation] = "w1"
		j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1"
		j.Spec.Suspend = ptr.To(false)
		delete(j.Annotations, v1alpha1.HeldForPlacementAnnotation)
	}))
	h.reconcile(t)
	if m := h.mirror(t, "w1"); m != nil || h.workers.Conns["w1"].Creates.Load() != 0 {
		t.Errorf("a mirror was created where the tenant placed the Job")
	}
	if got := h.events(); strings.Join(got, ",") != policy.ReasonUntrustedState {
		t.Errorf("events %v, want %s", got, policy.ReasonUntrustedState)
	}
}

func TestTenantRemovingTheStateDoesNotRunTheJobTwice(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	h.workers.Conns["w2"].Down = true
	runningOn(t, h, "w1")
	h.workers.Conns["w2"].Down = false
	tamper(t, h, func(j *batchv1.Job) {
		for _, name := range append(slices.Clone(jobstate.SealedAnnotations), v1alpha1.StateSealAnnotation) {
			delete(j.Annotations, name)
		}
	})
	// A manager that starts afresh remembers nothing of what it created.
	h.r.memory.attempts = attemptMemo{}
	h.reconcile(t)
	if m := h.mirror(t, "w2"); m != nil || h.workers.Conns["w2"].Creates.Load() != 0 {
		t.Errorf("the Job stripped of its state was dispatched again to w2")
	}
	if got := h.events(); strings.Join(got, ",") != policy.ReasonStrayMirror {
		t.Errorf("events %v, want %s", got, policy.ReasonStrayMirror)
	}
}

// lostToW2 loses w1, where the Job runs, and brings w2 back: past the
// worker-lost timeout the Job runs on w2 as attempt 2.
func lostToW2(t *testing.T, h *jobsHarness) {
	t.Helper()
	ctx := context.Background()
	h.workers.Conns["w1"].Down, h.workers.Conns["w2"].Down = true, false
	wc := &v1alpha1.WorkerCluster{}
	if err := h.manager.Get(ctx, client.ObjectKey{Name: "w1"}, wc); err != nil {
		t.Fatal(err)
	}
	wc.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable, LastTransitionTime: metav1.NewTime(h.clock.Now())}}
	if err := h.manager.Status().Update(ctx, wc); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(16 * time.Minute)
	h.reconcile(t)
	h.report(t, "w2", policytest.Running)
	h.clock.Step(time.Second)
	h.reconcile(t)
}

// A state saved while the Job ran on w1 and written back, seal and all,
// once the Job runs on w2 as attempt 2 (whoever could bypass the state
// policy): the seal matches, but w2's mirror says the state is not the
// latest. jobferry does not act on it — it does not take w1's old mirror
// for the Job's, copies none of its status and places nothing — whether
// w1 is back or still away.
func TestRolledBackStateIsNotActedOn(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	h.workers.Conns["w2"].Down = true
	saved := runningOn(t, h, "w1").Annotations
	old := h.mirror(t, "w1")

	// w1 is lost; past the timeout the Job runs on w2 as attempt 2.
	lostToW2(t, h)
	if job := h.job(t); job.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" || job.Status.Active != 1 {
		t.Fatalf("not running as attempt 2 on w2: %v %+v", job.Annotations, job.Status)
	}
	h.events()

	tamper(t, h, func(j *batchv1.Job) { j.Annotations = saved })
	// A manager that starts afresh remembers nothing of what it created.
	h.r.memory.attempts = attemptMemo{}
	h.reconcile(t)
	events := h.events()
	if strings.Join(events, ",") != policy.ReasonStrayMirror {
		t.Errorf("events %v, want %s", events, policy.ReasonStrayMirror)
	}
	// w1 back, its attempt-1 mirror finished: nothing of it is taken.
	h.workers.Conns["w1"].Down = false
	h.report(t, "w1", policytest.Complete)
	h.clock.Step(time.Minute)
	h.reconcile(t)
	job := h.job(t)
	if jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Errorf("the status of w1's attempt-1 mirror (UID %s) was copied to the rolled-back Job: %+v", old.UID, job.Status)
	}
	if m := h.mirror(t, "w2"); m == nil || mirror.Attempt(m) != 2 {
		t.Errorf("the attempt-2 mirror on w2 was touched: %v", m)
	}
	if m := h.mirror(t, "w1"); m != nil {
		t.Errorf("w1's attempt-1 mirror (UID %s) still runs beside the attempt-2 one", m.UID)
	}
	if h.workers.Conns["w1"].Creates.Load() != 1 || h.workers.Conns["w2"].Creates.Load() != 1 {
		t.Errorf("mirrors created: %d on w1, %d on w2; want one each", h.workers.Conns["w1"].Creates.Load(), h.workers.Conns["w2"].Creates.Load())
	}
}

// A Job that a worker-namespace user makes with the labels of the Job's
// mirror at a later attempt — its seal forged, or copied from the running
// mirror — is no evidence of a later attempt: the Job runs on, its status
// copied, with no StrayMirror.
func TestStrayEvidenceIsSealed(t *testing.T) {
	ctx := context.Background()
	h := newJobsHarness(t, "w1", "w2")
	h.workers.Conns["w2"].Down = true
	runningOn(t, h, "w1")
	h.workers.Conns["w2"].Down = false
	real := h.mirror(t, "w1")
	for i, seal := range []string{"", "00112233445566778899aabbccddeeff", real.Labels[v1alpha1.AttemptSealLabel]} {
		labels := maps.Clone(real.Labels)
		labels[v1alpha1.DispatchAttemptLabel] = strconv.Itoa(5 + i)
		labels[v1alpha1.AttemptSealLabel] = seal
		fake := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: real.Namespace, Name: real.Name, Labels: labels}, Spec: real.Spec}
		_ = h.workers.Conns["w2"].API.Delete(ctx, fake)
		if err := h.workers.Conns["w2"].API.Create(ctx, fake); err != nil {
			t.Fatal(err)
		}
		h.r.memory.attempts = attemptMemo{}
		h.reconcile(t)
		if got := h.events(); slices.Contains(got, policy.ReasonStrayMirror) {
			t.Errorf("a Job with the mirror's labels at attempt %d and seal %q was taken for a later attempt: events %v", 5+i, seal, got)
		}
	}
	h.report(t, "w1", policytest.Complete)
	h.reconcile(t)
	if job := h.job(t); !jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Errorf("the real mirror's final status was not copied: %+v", job.Status)
	}
}

// replaceMirror deletes the Job's mirror on worker and creates a Job with
// its name, labels and spec in its place, as a worker-namespace user may.
func replaceMirror(t *testing.T, h *jobsHarness, worker string) {
	t.Helper()
	ctx := context.Background()
	w := h.workers.Conns[worker]
	m := h.mirror(t, worker)
	if err := w.API.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	impostor := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, Labels: m.Labels}, Spec: m.Spec}
	if err := w.API.Create(ctx, impostor); err != nil {
		t.Fatal(err)
	}
}

func TestMirrorReplacedOnTheWorkerIsNotCopied(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	// A worker-namespace user deletes the mirror and creates a Job with its
	// labels, reporting success.
	replaceMirror(t, h, "w1")
	h.report(t, "w1", policytest.Complete)
	h.reconcile(t)
	job := h.job(t)
	if jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Fatalf("the impostor's success was copied")
	}
	events := h.events()
	if len(events) == 0 || events[0] != policy.ReasonMirrorNotOurs {
		t.Errorf("events %v, want %s first", events, policy.ReasonMirrorNotOurs)
	}
	if job.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" {
		t.Errorf("attempt %q, want the Job dispatched again as attempt 2", job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	}
}

func TestMirrorDeletedOnTheWorkerIsANewAttempt(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	m := h.mirror(t, "w1")
	if err := h.workers.Conns["w1"].API.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.r.memory.attempts = attemptMemo{}
	h.reconcile(t)
	job := h.job(t)
	now := h.mirror(t, "w1")
	if now == nil || now.UID == m.UID || mirror.Attempt(now) != 2 || job.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" {
		t.Errorf("after the deletion: mirror %v, Job attempt %q; want attempt 2 created anew", now, job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	}
	if got := strings.Join(h.events(), ","); got != policy.ReasonMirrorDeleted+","+policy.ReasonDispatched {
		t.Errorf("events %s, want %s then %s", got, policy.ReasonMirrorDeleted, policy.ReasonDispatched)
	}
}

// A mirror relabelled on the worker so that its cache no longer shows it
// (or left out of it, its namespace holding more Jobs that look like
// jobferry's than it keeps) is not taken for deleted while it still runs:
// it is deleted first, saying why, then the Job dispatched again.
func TestMirrorHiddenOnTheWorkerIsFencedBeforeANewAttempt(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	ctx := context.Background()
	w := h.workers.Conns["w1"]
	m := h.mirror(t, "w1")
	hidden, err := w.UncachedJob(ctx, trainKey)
	if err != nil {
		t.Fatal(err)
	}
	delete(hidden.Labels, v1alpha1.OriginLabel)
	if err := w.API.Update(ctx, hidden); err != nil {
		t.Fatal(err)
	}
	h.r.memory.attempts = attemptMemo{}
	h.reconcile(t)
	if err := w.API.Get(ctx, trainKey, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the hidden mirror %s is still on the worker (%v)", m.UID, err)
	}
	if job := h.job(t); job.Annotations[v1alpha1.DispatchAttemptAnnotation] != "1" {
		t.Errorf("attempt %q before the hidden mirror was gone, want 1", job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	}
	h.reconcile(t)
	job := h.job(t)
	now := h.mirror(t, "w1")
	if now == nil || now.UID == m.UID || mirror.Attempt(now) != 2 || job.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" {
		t.Errorf("after the fence: mirror %v, Job attempt %q; want attempt 2 created anew", now, job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	}
	if got := strings.Join(h.events(), ","); got != policy.ReasonMirrorHidden+","+policy.ReasonMirrorDeleted+","+policy.ReasonDispatched {
		t.Errorf("events %s, want %s, %s, %s", got, policy.ReasonMirrorHidden, policy.ReasonMirrorDeleted, policy.ReasonDispatched)
	}
}

// A worker user who deletes the mirror and, in the moment between the
// manager's placement of the next attempt and its create, makes a Job with
// that attempt's labels, is not taken for its mirror: the manager placed
// that attempt itself, so the only mirror of it is the one it creates.
func TestJobWithTheNextAttemptsLabelsIsNotAdopted(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	ctx := context.Background()
	w := h.workers.Conns["w1"]
	m := h.mirror(t, "w1")
	if err := w.API.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	var impostor *batchv1.Job
	w.BeforeCreate = func(next *batchv1.Job) {
		impostor = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: next.Namespace, Name: next.Name, Labels: next.Labels, UID: "impostor"}}
		if err := w.API.Create(ctx, impostor); err != nil {
			t.Error(err)
		}
	}
	h.reconcile(t)
	if impostor == nil || impostor.Labels[v1alpha1.DispatchAttemptLabel] != "2" {
		t.Fatalf("no Job was planted before attempt 2's create: %v", impostor)
	}
	job := h.job(t)
	if recorded := job.Annotations[v1alpha1.MirrorUIDAnnotation]; recorded == "impostor" {
		t.Fatalf("the planted Job was recorded as the mirror of attempt %s", job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	}
	// Seen as not the mirror (or, by a cache that does not show it yet, as
	// a Job of someone else's holding the name).
	if got := strings.Join(h.events(), ","); !strings.HasPrefix(got, policy.ReasonMirrorDeleted+",") ||
		(!strings.Contains(got, policy.ReasonMirrorNotOurs) && !strings.Contains(got, policy.ReasonNameConflict)) {
		t.Errorf("events %s: want %s, then %s or %s for the planted Job", got, policy.ReasonMirrorDeleted, policy.ReasonMirrorNotOurs, policy.ReasonNameConflict)
	}
	// The next attempt fences it (its labels say attempt 2), and runs a
	// mirror of the manager's own.
	for range 3 {
		h.reconcile(t)
	}
	job = h.job(t)
	now := h.mirror(t, "w1")
	if now == nil || now.UID == "impostor" || string(now.UID) != job.Annotations[v1alpha1.MirrorUIDAnnotation] {
		t.Errorf("mirror %v, recorded %q: want a mirror the manager created, recorded", now, job.Annotations[v1alpha1.MirrorUIDAnnotation])
	}
}

// reportOverBudgetSuccess reports the mirror on worker Complete, with a
// message that takes its status over what the worker's cache keeps of a
// Job (cachebudget.Mirror), and returns the message.
func reportOverBudgetSuccess(t *testing.T, h *jobsHarness, worker string) string {
	t.Helper()
	long := strings.Repeat("m", 20<<10)
	h.report(t, worker, func(j *batchv1.Job) {
		policytest.Complete(j)
		j.Status.Conditions[1].Message = long
	})
	return long
}

// A mirror the manager created whose status grew over what the worker's
// cache keeps of a Job (cachebudget.Mirror) is read whole from the worker:
// its final status is copied as it is.
func TestMirrorOverTheCacheBudgetIsReadWhole(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	long := reportOverBudgetSuccess(t, h, "w1")
	if m, _ := h.workers.Conns["w1"].Mirror(context.Background(), client.ObjectKeyFromObject(h.job(t))); m == nil || !workers.IsOverBudget(m) {
		t.Fatalf("the cache keeps the mirror whole: the test proves nothing")
	}
	h.reconcile(t)
	job := h.job(t)
	if c := jobstatus.Condition(job.Status, batchv1.JobComplete); c == nil || c.Status != corev1.ConditionTrue || c.Message != long {
		t.Errorf("the final status of the mirror over the cache's budget was not copied: %+v", job.Status.Conditions)
	}
}

// A Job put in the mirror's place with its labels and a status over the
// cache's budget is kept as its identity only and taken for what it is,
// not the mirror: nothing of it is copied.
func TestImpostorOverTheCacheBudgetIsNotCopied(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	replaceMirror(t, h, "w1")
	reportOverBudgetSuccess(t, h, "w1")
	h.reconcile(t)
	job := h.job(t)
	if jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Fatalf("the impostor's success was copied")
	}
	if events := h.events(); len(events) == 0 || events[0] != policy.ReasonMirrorNotOurs {
		t.Errorf("events %v, want %s first", events, policy.ReasonMirrorNotOurs)
	}
}

// A mirror over the cache's budget whose attempt label a worker-namespace
// user raised is still the mirror the manager created (its UID is
// recorded): read whole, its final status copied.
func TestMirrorOverTheCacheBudgetWithARaisedAttemptIsReadWhole(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	long := reportOverBudgetSuccess(t, h, "w1")
	m := h.mirror(t, "w1")
	m.Labels[v1alpha1.DispatchAttemptLabel] = "2"
	if err := h.workers.Conns["w1"].API.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.reconcile(t)
	job := h.job(t)
	if c := jobstatus.Condition(job.Status, batchv1.JobComplete); c == nil || c.Message != long {
		t.Errorf("the final status of the relabelled mirror was not copied: %+v", job.Status.Conditions)
	}
}

// A leader died between creating a mirror and recording its UID, and a
// worker-namespace user put a Job with the mirror's labels (its attempt
// seal missing or copied from nowhere) in its place: the next leader does
// not adopt it, while it adopts a mirror whose attempt seal verifies.
func TestOnlyASealedMirrorIsAdopted(t *testing.T) {
	ctx := context.Background()
	for name, seal := range map[string]func(real string) string{
		"impostor without a seal":      func(string) string { return "" },
		"impostor with a made-up seal": func(string) string { return "00112233445566778899aabbccddeeff" },
		"the real mirror":              func(real string) string { return real },
	} {
		t.Run(name, func(t *testing.T) {
			h := newJobsHarness(t, "w1")
			runningOn(t, h, "w1")
			real := h.mirror(t, "w1")
			// The state as the dead leader left it: placed, no mirror UID.
			job := h.job(t)
			delete(job.Annotations, v1alpha1.MirrorUIDAnnotation)
			if err := h.manager.Update(ctx, jobstate.Sealed(job, jobstate.Key(testKey))); err != nil {
				t.Fatal(err)
			}
			labels := maps.Clone(real.Labels)
			labels[v1alpha1.AttemptSealLabel] = seal(real.Labels[v1alpha1.AttemptSealLabel])
			w := h.workers.Conns["w1"]
			if err := w.API.Delete(ctx, real); err != nil {
				t.Fatal(err)
			}
			found := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: real.Namespace, Name: real.Name, Labels: labels}, Spec: real.Spec}
			if err := w.API.Create(ctx, found); err != nil {
				t.Fatal(err)
			}
			h.r.memory.attempts = attemptMemo{}
			h.events()
			h.reconcile(t)
			recorded := h.job(t).Annotations[v1alpha1.MirrorUIDAnnotation]
			adopted := recorded == string(found.UID)
			if wantAdopted := name == "the real mirror"; adopted != wantAdopted {
				t.Errorf("adopted %v (recorded %q, found %s), want %v; events %v", adopted, recorded, found.UID, wantAdopted, h.events())
			}
		})
	}
}

// The same written back while w2, where attempt 2 runs, is away, and w1
// back with its attempt-1 mirror: no mirror says the state is not the
// latest, but this manager saw attempt 2 recorded: it does not act on it.
func TestRollbackWhileTheLaterWorkerIsAwayIsNotActedOn(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	h.workers.Conns["w2"].Down = true
	saved := runningOn(t, h, "w1").Annotations
	lostToW2(t, h)
	if job := h.job(t); job.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" {
		t.Fatalf("not running as attempt 2 on w2: %v", job.Annotations)
	}
	h.events()

	h.workers.Conns["w2"].Down = true
	tamper(t, h, func(j *batchv1.Job) { j.Annotations = saved })
	h.workers.Conns["w1"].Down = false
	h.report(t, "w1", policytest.Complete)
	h.reconcile(t)
	if got := h.events(); strings.Join(got, ",") != policy.ReasonStateRolledBack {
		t.Errorf("events %v, want %s", got, policy.ReasonStateRolledBack)
	}
	if job := h.job(t); jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Errorf("the status of w1's attempt-1 mirror was copied to the rolled-back Job: %+v", job.Status)
	}
	if h.workers.Conns["w1"].Creates.Load() != 1 || h.workers.Conns["w2"].Creates.Load() != 1 {
		t.Errorf("mirrors created: %d on w1, %d on w2; want one each", h.workers.Conns["w1"].Creates.Load(), h.workers.Conns["w2"].Creates.Load())
	}
}
