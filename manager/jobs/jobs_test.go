package jobs

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/jobstate/jobstatetest"
	"github.com/jobferry/jobferry/manager/workers/workerstest"
	"github.com/jobferry/jobferry/mirror"
)

// jobsHarness is a JobReconciler on a fake manager cluster and fake
// workers: the whole dispatch of a Job, in milliseconds and without a server.
type jobsHarness struct {
	r        *JobReconciler
	manager  client.Client
	workers  *workerstest.Pool
	clock    *clocktesting.FakeClock
	recorder *events.FakeRecorder
	// jobWrites (updates and patches) and statusWrites (of the status
	// subresource) count the manager Job writes.
	jobWrites, statusWrites atomic.Int32
}

func newJobsHarness(t *testing.T, workers ...string) *jobsHarness {
	t.Helper()
	h := &jobsHarness{clock: clocktesting.NewFakeClock(policytest.Now), recorder: events.NewFakeRecorder(100), workers: workerstest.NewPool(nil)}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{v1alpha1.DispatchNamespaceLabel: "enabled"}}}}
	for _, w := range workers {
		objs = append(objs, &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: w}, Status: v1alpha1.WorkerClusterStatus{
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConnected, LastTransitionTime: metav1.NewTime(policytest.Now.Add(-time.Hour))}}}})
		h.workers.Conns[w] = workerstest.NewConn("jobferry")
	}
	h.manager = fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(objs...).
		WithStatusSubresource(&batchv1.Job{}, &v1alpha1.WorkerCluster{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if _, ok := obj.(*batchv1.Job); ok {
					h.jobWrites.Add(1)
				}
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if _, ok := obj.(*batchv1.Job); ok {
					h.jobWrites.Add(1)
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*batchv1.Job); ok && sub == "status" {
					h.statusWrites.Add(1)
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if _, ok := obj.(*batchv1.Job); ok && sub == "status" {
					h.statusWrites.Add(1)
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	policy, err := admission.NewDispatchPolicy(labels.SelectorFromSet(labels.Set{v1alpha1.DispatchNamespaceLabel: "enabled"}), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	h.r = &JobReconciler{
		Client: h.manager, APIReader: h.manager, Recorder: h.recorder, Policy: policy, Clock: h.clock, Keys: testKey,
		Config:         policytest.Config,
		CapacitySettle: 2 * time.Second,
		Workers:        h.workers,
	}
	h.r.init()
	return h
}

var trainKey = types.NamespacedName{Namespace: "team-a", Name: "train"}

func (h *jobsHarness) create(t *testing.T, job *batchv1.Job) {
	t.Helper()
	if err := h.manager.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

func (h *jobsHarness) reconcile(t *testing.T) reconcile.Result {
	t.Helper()
	result, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: trainKey})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return result
}

func (h *jobsHarness) job(t *testing.T) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	if err := h.manager.Get(context.Background(), trainKey, job); err != nil {
		t.Fatal(err)
	}
	return job
}

// mirror is the mirror on worker; nil when there is none.
func (h *jobsHarness) mirror(t *testing.T, worker string) *batchv1.Job {
	t.Helper()
	m, err := h.workers.Conns[worker].Mirror(context.Background(), trainKey)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// report sets the mirror's status as the worker's Job controller would and
// tells the manager, as the worker's informer does.
func (h *jobsHarness) report(t *testing.T, worker string, status func(*batchv1.Job)) {
	t.Helper()
	m := h.mirror(t, worker)
	status(m)
	if err := h.workers.Conns[worker].API.Status().Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.workers.MirrorChanged(worker, m)
}

// events are the reasons of the Events recorded so far.
func (h *jobsHarness) events() []string {
	var out []string
	for _, e := range h.eventMessages() {
		out = append(out, strings.Fields(e)[1])
	}
	return out
}

// eventMessages drains the recorder: each Event as "type reason message".
func (h *jobsHarness) eventMessages() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestJobReconcilerDispatchesAJob(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.create(t, policytest.Job())

	// The worker's cache shows the mirror only after the reconciles that
	// the placement's own update events cause.
	h.workers.Conns["w1"].Lags = true
	h.reconcile(t)
	job := h.job(t)
	if job.Annotations[v1alpha1.WorkerAnnotation] != "w1" || ptr.Deref(job.Spec.Suspend, true) || policy.NeedsActivation(job) {
		t.Fatalf("after the first reconcile: annotations %v, suspend %v; want placed on w1 and unsuspended", job.Annotations, job.Spec.Suspend)
	}
	m, err := h.workers.Conns["w1"].UncachedJob(context.Background(), trainKey)
	if err != nil || !mirror.IsMirrorOf(m, "jobferry", job.UID) || ptr.Deref(m.Spec.Suspend, true) {
		t.Fatalf("mirror %v: want a running mirror of the Job on w1", m)
	}
	if got := h.events(); strings.Join(got, ",") != policy.ReasonDispatched {
		t.Errorf("events %v, want one %s", got, policy.ReasonDispatched)
	}
	if h.jobWrites.Load() != 2 || h.statusWrites.Load() != 0 {
		t.Errorf("manager writes: %d of the Job, %d of its status; want the update that places, injects and unsuspends, and the one that records the mirror's UID", h.jobWrites.Load(), h.statusWrites.Load())
	}
	job = h.job(t)
	if job.Annotations[v1alpha1.MirrorUIDAnnotation] != string(m.UID) {
		t.Errorf("recorded mirror UID %q, want %s", job.Annotations[v1alpha1.MirrorUIDAnnotation], m.UID)
	}
	if v, names := jobstate.Verify(job, jobstate.Key(testKey)); v != jobstate.Trusted {
		t.Errorf("the state the manager wrote verifies as %s (%v)", v, names)
	}
	if _, ok := m.Annotations[v1alpha1.WorkerAnnotation]; ok {
		t.Errorf("the mirror carries the manager's state: %v", m.Annotations)
	}
	// The placement's own update event reconciles the Job again before the
	// worker's cache shows the mirror: nothing is created twice.
	h.reconcile(t)
	h.workers.Conns["w1"].Lags = false
	if m2 := h.mirror(t, "w1"); m2 == nil || m2.UID != m.UID || h.workers.Conns["w1"].Creates.Load() != 1 {
		t.Errorf("the mirror was created again (%d creates): %v", h.workers.Conns["w1"].Creates.Load(), m2)
	}
	if got := h.events(); len(got) != 0 {
		t.Errorf("a reconcile before the cache saw the mirror recorded %v", got)
	}

	// The mirror's creation was seen long before its pods start, and left
	// nothing to copy: it does not shorten the next change's batch wait.
	h.workers.MirrorChanged("w1", m)
	h.reconcile(t)
	h.clock.Step(10 * time.Second)
	// The worker starts the pod while the manager is busy copying (ten
	// copies in the last second; on a quiet one it would be copied at
	// once): the copy waits for the batch period, but the assumed capacity
	// is released from the mirror's event already.
	for range quietCopies {
		h.r.memory.copies.wrote(h.clock.Now())
	}
	h.report(t, "w1", policytest.Running)
	h.clock.Step(2 * time.Second)
	h.workers.CapacityChanged("w1")
	if assumed := h.r.placing.assume.assumed("w1"); len(assumed) != 0 {
		t.Errorf("the running Job is still assumed on w1 after a summary: %v", assumed)
	}
	h.clock.Step(-2 * time.Second)
	if result := h.reconcile(t); result.RequeueAfter != time.Second {
		t.Errorf("a running mirror's change is looked at again after %s, want the batch period", result.RequeueAfter)
	}
	if h.statusWrites.Load() != 0 {
		t.Errorf("the running status was copied before the batch period")
	}
	h.clock.Step(time.Second)
	h.reconcile(t)
	if job := h.job(t); job.Status.Active != 1 || job.Status.StartTime == nil {
		t.Errorf("status after the batch period: %+v, want the running status", job.Status)
	}

	// It completes: the final status is copied at once; the mirror stays
	// (with its pods and logs) until the manager Job is deleted.
	h.report(t, "w1", policytest.Complete)
	h.reconcile(t)
	job = h.job(t)
	if !jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Errorf("status %+v, want Complete", job.Status)
	}
	if m := h.mirror(t, "w1"); m == nil {
		t.Errorf("the finished mirror was deleted while its manager Job exists")
	}
	if h.jobWrites.Load() != 2 || h.statusWrites.Load() != 2 {
		t.Errorf("manager writes: %d of the Job, %d of its status; want 2 and 2", h.jobWrites.Load(), h.statusWrites.Load())
	}
	// Nothing is left to do, and nothing runs again.
	h.reconcile(t)
	if m := h.mirror(t, "w1"); m == nil || h.jobWrites.Load() != 2 || h.statusWrites.Load() != 2 {
		t.Errorf("a finished Job was acted on again: mirror %v, writes %d/%d", m, h.jobWrites.Load(), h.statusWrites.Load())
	}
}

func TestJobReconcilerDeletesFinishedMirrorsWhenAsked(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.r.Config.DeleteFinishedMirrors = true
	h.create(t, policytest.Job())
	h.reconcile(t)
	if h.mirror(t, "w1") == nil {
		t.Fatal("no mirror on w1")
	}
	h.report(t, "w1", policytest.Complete)
	h.reconcile(t)
	if job := h.job(t); !jobstatus.ConditionTrue(job.Status, batchv1.JobComplete) {
		t.Errorf("status %+v, want Complete", job.Status)
	}
	if m := h.mirror(t, "w1"); m != nil {
		t.Errorf("the finished mirror was not deleted once its final status was copied")
	}
}

func TestJobReconcilerNameConflictPlacesElsewhere(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "someone-else"}}
	if err := h.workers.Conns["w1"].API.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	h.create(t, policytest.Job())
	h.reconcile(t)
	job := h.job(t)
	if job.Annotations[v1alpha1.WorkerAnnotation] != "w2" || job.Annotations[v1alpha1.ExcludedWorkersAnnotation] != "w1" {
		t.Errorf("annotations %v: want placed on w2 with w1 excluded", job.Annotations)
	}
	if m := h.mirror(t, "w2"); m == nil {
		t.Errorf("no mirror on w2")
	}
	if j, err := h.workers.Conns["w1"].UncachedJob(context.Background(), trainKey); err != nil || j.UID != "someone-else" || j.Labels[v1alpha1.OriginLabel] != "" {
		t.Errorf("the Job on w1 that is not jobferry's was touched: %v, %v", j, err)
	}
	if got := strings.Join(h.events(), ","); got != policy.ReasonNameConflict+","+policy.ReasonDispatched {
		t.Errorf("events %s, want %s then %s", got, policy.ReasonNameConflict, policy.ReasonDispatched)
	}
}

// A step says what it wrote only after the write: a name conflict whose
// release of the placement is refused records the refusal's Event and not
// the NameConflict one, whatever the refusal (a lost race, a rejection);
// once the write goes through, the NameConflict Event follows it.
func TestJobReconcilerSaysNothingOfAFailedWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refusal error
		events  string
		// requeueAfter is the retry refused chose, which Reconcile returns
		// without an error; returned: the error itself goes back, for the
		// work queue's back-off.
		requeueAfter time.Duration
		returned     bool
	}{
		{name: "conflict", refusal: apierrors.NewConflict(batchv1.Resource("jobs"), "train", errors.New("changed meanwhile")), requeueAfter: 100 * time.Millisecond},
		{name: "rejected", refusal: apierrors.NewBadRequest("not today"), events: policy.WriteJob.Reason},
		{name: "forbidden", refusal: apierrors.NewForbidden(batchv1.Resource("jobs"), "train", errors.New("no")), events: policy.WriteJob.Reason, requeueAfter: forbiddenRetry},
		{name: "unavailable", refusal: apierrors.NewServiceUnavailable("down"), returned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newJobsHarness(t, "w1", "w2")
			foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "someone-else"}}
			if err := h.workers.Conns["w1"].API.Create(context.Background(), foreign); err != nil {
				t.Fatal(err)
			}
			// Placed on w1 (the first worker in order), the mirror's name
			// found taken there; the release that follows is refused.
			h.create(t, policytest.Job())
			writes := 0
			h.r.Client = interceptor.NewClient(h.manager.(client.WithWatch), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if writes++; writes > 1 {
						return tc.refusal
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
			})
			result, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: trainKey})
			if (err != nil) != tc.returned || (!tc.returned && result.RequeueAfter != tc.requeueAfter) {
				t.Errorf("Reconcile = %+v, %v; want the error returned %t, else a retry after %s", result, err, tc.returned, tc.requeueAfter)
			}
			if job := h.job(t); job.Annotations[v1alpha1.WorkerAnnotation] != "w1" {
				t.Fatalf("annotations %v: want the placement on w1 kept (its release refused)", job.Annotations)
			}
			if got := strings.Join(h.events(), ","); got != tc.events {
				t.Errorf("events %q after the refused release, want %q (no %s before the write)", got, tc.events, policy.ReasonNameConflict)
			}
		})
	}
}

// The Events a step says before its last write go out only once that write
// succeeded: a Job whose cluster selector does not parse is told so with
// its Waiting condition; while that status write fails, no Event.
func TestJobReconcilerSaysNothingOfAStepWhoseLastWriteFailed(t *testing.T) {
	h := newJobsHarness(t, "w1")
	job := policytest.Job()
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, v1alpha1.ClusterSelectorAnnotation, "region in (eu")
	h.create(t, job)
	var refusal error = apierrors.NewServiceUnavailable("down")
	h.r.Client = interceptor.NewClient(h.manager.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if refusal != nil {
				return refusal
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	if _, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: trainKey}); err == nil {
		t.Fatal("the refused status write was not returned for a retry")
	}
	if got := h.events(); len(got) > 0 {
		t.Errorf("events %v while the Waiting write failed, want none", got)
	}
	refusal = nil
	h.reconcile(t)
	if got := strings.Join(h.events(), ","); got != policy.ReasonInvalidSelector {
		t.Errorf("events %q once the write went through, want %s", got, policy.ReasonInvalidSelector)
	}
}

func TestJobReconcilerDeletesTheMirrorOfADeletedJob(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.create(t, policytest.Job())
	h.reconcile(t)
	if h.mirror(t, "w1") == nil {
		t.Fatal("no mirror")
	}
	if err := h.manager.Delete(context.Background(), h.job(t)); err != nil {
		t.Fatal(err)
	}
	h.reconcile(t)
	if m := h.mirror(t, "w1"); m != nil {
		t.Errorf("the mirror of the deleted Job is still there")
	}
}

func TestJobReconcilerRedispatchesFromALostWorker(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	h.workers.Conns["w2"].Down = true
	h.create(t, policytest.Job())
	h.reconcile(t)
	h.report(t, "w1", policytest.Running)
	h.clock.Step(time.Second)
	h.reconcile(t)
	if h.job(t).Status.Active != 1 {
		t.Fatal("the Job does not run on w1")
	}

	// w1 goes away, w2 comes back; after the timeout the Job moves.
	h.workers.Conns["w1"].Down, h.workers.Conns["w2"].Down = true, false
	wc := &v1alpha1.WorkerCluster{}
	if err := h.manager.Get(context.Background(), types.NamespacedName{Name: "w1"}, wc); err != nil {
		t.Fatal(err)
	}
	wc.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable, LastTransitionTime: metav1.NewTime(h.clock.Now())}}
	if err := h.manager.Status().Update(context.Background(), wc); err != nil {
		t.Fatal(err)
	}
	h.events()
	h.clock.Step(time.Minute)
	if result := h.reconcile(t); result.RequeueAfter != 10*time.Second || h.job(t).Annotations[v1alpha1.WorkerAnnotation] != "w1" {
		t.Errorf("a blip moved the Job (requeue %s)", result.RequeueAfter)
	}
	h.clock.Step(15 * time.Minute)
	h.reconcile(t)
	job := h.job(t)
	if job.Annotations[v1alpha1.WorkerAnnotation] != "w2" || job.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" {
		t.Errorf("annotations %v: want attempt 2 on w2", job.Annotations)
	}
	if m := h.mirror(t, "w2"); m == nil || mirror.Attempt(m) != 2 {
		t.Errorf("mirror on w2: %v, want attempt 2", m)
	}
	if got := strings.Join(h.events(), ","); got != policy.ReasonWorkerLost+","+policy.ReasonDispatched {
		t.Errorf("events %s, want %s then %s", got, policy.ReasonWorkerLost, policy.ReasonDispatched)
	}
	if job.Status.StartTime == nil || !job.Status.StartTime.Time.Equal(policytest.Now.Add(-time.Minute)) {
		t.Errorf("the start time of the first attempt was lost: %+v", job.Status)
	}
}

func TestJobReconcilerCarriesSuspendToTheMirror(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.create(t, policytest.Job())
	h.reconcile(t)
	job := h.job(t)
	job.Spec.Suspend = ptr.To(true)
	if err := h.manager.Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	h.events()
	h.reconcile(t)
	if m := h.mirror(t, "w1"); !ptr.Deref(m.Spec.Suspend, false) {
		t.Errorf("the mirror was not suspended")
	}
	if got := strings.Join(h.events(), ","); got != policy.ReasonMirrorSuspended {
		t.Errorf("events %s, want %s", got, policy.ReasonMirrorSuspended)
	}
}

// testKey seals the state of the unit tests' Jobs; it was made long before
// any of them.
var testKey = jobstatetest.Key{Secret: []byte("0123456789abcdef0123456789abcdef"), Since: policytest.Now.Add(-24 * time.Hour)}
