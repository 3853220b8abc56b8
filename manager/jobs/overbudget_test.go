package jobs

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/managercache"
)

// asTheCacheHandsItOut is c with its Jobs read as the manager cluster's
// cache hands them out (managercache.Handed): a Job over its budget as its
// identity only.
func asTheCacheHandsItOut(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if job, ok := obj.(*batchv1.Job); ok {
				*job = *managercache.Handed(job)
			}
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if jobs, ok := list.(*batchv1.JobList); ok {
				for i := range jobs.Items {
					jobs.Items[i] = *managercache.Handed(&jobs.Items[i])
				}
			}
			return nil
		},
	})
}

// withLabels sets n labels of the tenant's own on the manager Job, as its
// author may (the budget webhook, failing open, may not be there).
func withLabels(t *testing.T, h *jobsHarness, n int) {
	t.Helper()
	job := h.job(t)
	for k := range job.Labels {
		if strings.HasPrefix(k, "example.com/") {
			delete(job.Labels, k)
		}
	}
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	for i := range n {
		job.Labels[fmt.Sprintf("example.com/l-%04d", i)] = "x"
	}
	if err := h.manager.Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// A tenant who grows a placed Job past what the manager keeps of one (its
// labels, after creation) leaves the manager its identity only, so no
// change of it would reach the mirror: not its user's suspend, not Kueue's
// preemption. The mirror is suspended instead of running on out of their
// reach, the Job says why, and it runs again once it holds less.
func TestAJobGrownPastItsBudgetHasItsMirrorSuspended(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	h.r.Client = asTheCacheHandsItOut(h.manager.(client.WithWatch))

	withLabels(t, h, cachebudget.ManagerJobCached.Entries+1)
	if _, over := managercache.OverBudgetOf(managercache.Handed(h.job(t))); !over {
		t.Fatal("the cache keeps the grown Job whole: the test proves nothing")
	}
	h.reconcile(t)
	if m := h.mirror(t, "w1"); m == nil || !ptr.Deref(m.Spec.Suspend, false) {
		t.Fatalf("the mirror of the Job over its budget was not suspended: %+v", m)
	}
	h.reconcile(t)
	said := strings.Join(h.eventMessages(), "\n")
	for _, want := range []string{policy.ReasonMirrorSuspended, policy.ReasonOverBudget, "metadata.labels", "a mirror of it that runs is suspended"} {
		if !strings.Contains(said, want) {
			t.Errorf("events %q do not say %q", said, want)
		}
	}
	h.reconcile(t)
	if again := h.eventMessages(); len(again) > 0 {
		t.Errorf("said again for the same version of the Job: %q", again)
	}

	withLabels(t, h, 10)
	h.reconcile(t)
	if m := h.mirror(t, "w1"); m == nil || ptr.Deref(m.Spec.Suspend, false) {
		t.Fatalf("the mirror was not resumed once the Job held less: %+v", m)
	}
	if said := strings.Join(h.eventMessages(), "\n"); !strings.Contains(said, policy.ReasonMirrorResumed) {
		t.Errorf("events %q do not say the mirror was resumed", said)
	}
}

// A Job grown past what jobferry dispatches before it is placed (within
// what the cache keeps, so still acted on) is not placed: placed, it would
// leave no room for what placement and Kueue add. It says why, and is
// placed once it holds less.
func TestAJobGrownPastWhatJobferryDispatchesIsNotPlaced(t *testing.T) {
	h := newJobsHarness(t, "w1")
	h.create(t, policytest.Job())
	withLabels(t, h, cachebudget.ManagerJob.Entries+1)
	h.reconcile(t)
	if w := h.job(t).Annotations[v1alpha1.WorkerAnnotation]; w != "" || h.mirror(t, "w1") != nil {
		t.Fatalf("a Job over what jobferry dispatches was placed on %q", w)
	}
	said := strings.Join(h.eventMessages(), "\n")
	for _, want := range []string{policy.ReasonNotAllowed, admission.RuleBudget, "this Job holds more than jobferry keeps of a Job it dispatches: metadata.labels"} {
		if !strings.Contains(said, want) {
			t.Errorf("events %q do not say %q", said, want)
		}
	}
	withLabels(t, h, 10)
	h.reconcile(t)
	if w := h.job(t).Annotations[v1alpha1.WorkerAnnotation]; w != "w1" || h.mirror(t, "w1") == nil {
		t.Fatalf("the Job back within its budget was not placed: worker %q", w)
	}
}

// Of a Job over its budget, only a mirror jobferry made is suspended: a
// Job a worker-namespace user put in its place with its labels, but not
// its attempt seal, is left alone.
func TestAGrownJobsImpostorIsLeftAlone(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	m := h.mirror(t, "w1")
	w := h.workers.Conns["w1"]
	if err := w.API.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	labels := maps.Clone(m.Labels)
	delete(labels, v1alpha1.AttemptSealLabel)
	impostor := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, Labels: labels}, Spec: m.Spec}
	impostor.Spec.Suspend = ptr.To(false)
	if err := w.API.Create(context.Background(), impostor); err != nil {
		t.Fatal(err)
	}
	h.r.Client = asTheCacheHandsItOut(h.manager.(client.WithWatch))
	withLabels(t, h, cachebudget.ManagerJobCached.Entries+1)
	h.reconcile(t)
	if got := h.mirror(t, "w1"); got == nil || ptr.Deref(got.Spec.Suspend, false) {
		t.Errorf("the impostor was suspended (or removed): %+v", got)
	}
}

// A Job over its budget whose worker is away is looked at again, so its
// mirror is suspended once the worker is back: nothing else would bring
// the Job back (no change of it, none of a mirror out of sight).
func TestAGrownJobWhoseWorkerIsAwayIsLookedAtAgain(t *testing.T) {
	h := newJobsHarness(t, "w1")
	runningOn(t, h, "w1")
	h.r.Client = asTheCacheHandsItOut(h.manager.(client.WithWatch))
	h.workers.Conns["w1"].Down = true
	withLabels(t, h, cachebudget.ManagerJobCached.Entries+1)
	if result := h.reconcile(t); result.RequeueAfter <= 0 {
		t.Fatalf("a Job over its budget on a worker away is not looked at again: %+v", result)
	}
	h.workers.Conns["w1"].Down = false
	h.reconcile(t)
	if m := h.mirror(t, "w1"); m == nil || !ptr.Deref(m.Spec.Suspend, false) {
		t.Fatalf("the mirror was not suspended once its worker was back: %+v", m)
	}
}

// Placement holds to what jobferry dispatches only a Job it never placed
// and Kueue does not queue: a placed one carries a worker's directives in
// its template (and a queued one Kueue's), which the rest of the cache's
// budget is for; the budget webhook bounds those.
func TestOnlyAFirstUnqueuedPlacementIsHeldToTheDispatchBudget(t *testing.T) {
	job := func(attempt string, queue string) *batchv1.Job {
		j := policytest.Job()
		if attempt != "" {
			j.Annotations[v1alpha1.DispatchAttemptAnnotation] = attempt
		}
		if queue != "" {
			if j.Labels == nil {
				j.Labels = map[string]string{}
			}
			j.Labels[v1alpha1.KueueQueueNameLabel] = queue
		}
		return j
	}
	for name, tc := range map[string]struct {
		job       *batchv1.Job
		kueueMode bool
		held      bool
	}{
		"never placed":                        {job: job("", ""), held: true},
		"placed before (attempt 1)":           {job: job("1", ""), held: false},
		"queued in Kueue":                     {job: job("", "team-a-queue"), kueueMode: true, held: false},
		"naming no LocalQueue, in Kueue mode": {job: job("", ""), kueueMode: true, held: true},
	} {
		if got := heldToTheDispatchBudget(tc.job, tc.kueueMode); got != tc.held {
			t.Errorf("%s: held %v, want %v", name, got, tc.held)
		}
	}
}
