package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/tenantlimits"
)

// Explain says what placement would decide, on the same views, and writes
// nothing: a Job two workers take goes to the freer; one that asks for more
// than is free anywhere is told, per worker, the pool and resource short; a
// full quota holds a stored Job before any worker is looked at, and a Job
// sent whole is not judged by it.
func TestExplainSaysWhatPlacementWouldDecide(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	// w2 has 2 CPUs free of 8; w1 all 8.
	h.workers.Conns["w2"].Pools[0].Free = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	asking := func(cpu string) *batchv1.Job {
		return policytest.Job(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		})
	}
	ctx := context.Background()

	e, err := h.r.Explain(ctx, asking("1"), false)
	if err != nil || e.Held != "" {
		t.Fatalf("a Job both take: held %q, error %v", e.Held, err)
	}
	if e.Worker != "w1" || len(e.Workers) != 2 || !e.Workers[0].Chosen || e.Workers[1].Code != "" || e.Workers[1].Why == "" {
		t.Errorf("a Job both take: want w1 chosen and w2 taking it but passed over with a reason, got %+v", e)
	}

	e, err = h.r.Explain(ctx, asking("6"), false)
	if err != nil {
		t.Fatal(err)
	}
	if e.Worker != "w1" || !e.Workers[0].Chosen || e.Workers[1].Code != dispatch.ReasonInsufficientCapacity {
		t.Fatalf("a Job only w1 could hold now: %+v", e)
	}
	if !strings.Contains(e.Workers[1].Change, "pool general needs 4 more cpu") {
		t.Errorf("6 CPUs where w1 has 8 free and w2 2: want w1 to take it, and w2's change to name 4 CPUs short, got %+v", e)
	}

	e, err = h.r.Explain(ctx, asking("12"), false)
	if err != nil {
		t.Fatal(err)
	}
	if e.Worker != "" || e.Never == "" {
		t.Errorf("12 CPUs where no pool has more than 8: want nowhere, and never said, got %+v", e)
	}

	invalid := policytest.Job(func(j *batchv1.Job) { j.Annotations[v1alpha1.ClusterSelectorAnnotation] = "gpu in (" })
	if _, err := h.r.Explain(ctx, invalid, false); !errors.As(err, &dispatch.InvalidJob{}) {
		t.Errorf("an invalid cluster selector: want an InvalidJob, got %v", err)
	}
	// The dispatch policy holds a Job of a namespace not opted in.
	if err := h.manager.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}); err != nil {
		t.Fatal(err)
	}
	elsewhere := asking("1")
	elsewhere.Namespace = "team-b"
	if e, err := h.r.Explain(ctx, elsewhere, false); err != nil || !strings.Contains(e.Held, "jobferry would not dispatch it (namespace opt-in)") || len(e.Workers) != 0 {
		t.Errorf("a Job of a namespace not opted in: want it held by the opt-in, no worker looked at; got %+v, %v", e, err)
	}

	// A quota of 1 CPU: the stored Job is held, the same Job sent whole is
	// not judged by it (the API server does that when it is created).
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "small"},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}}}
	if err := h.manager.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	stored := asking("2")
	h.create(t, stored)
	admission := &admitAll{}
	h.r.PodAdmission = admission
	e, err = h.r.Explain(ctx, h.job(t), true)
	if err != nil || !strings.Contains(e.Held, "small") {
		t.Errorf("a stored Job its quota has no room for: want held by quota small, got %q (error %v)", e.Held, err)
	}
	if e, err = h.r.Explain(ctx, asking("2"), false); err != nil || e.Held != "" {
		t.Errorf("the same Job sent whole: want no quota verdict, got %q (error %v)", e.Held, err)
	}
	// A stored Job placed already is not dry-run or charged again.
	placed := h.job(t)
	placed.Annotations[v1alpha1.WorkerAnnotation] = "w1"
	dryRuns := admission.calls
	if e, err = h.r.Explain(ctx, placed, true); err != nil || e.Held != "" || e.Worker == "" {
		t.Errorf("a placed Job: want no quota verdict and a worker, got %+v (error %v)", e, err)
	}
	if admission.calls != dryRuns {
		t.Errorf("a placed Job's pods were dry-run")
	}
	if events := h.events(); len(events) != 0 {
		t.Errorf("Explain recorded Events: %v", events)
	}
	if assumed := h.r.placing.assume.assumed("w1"); len(assumed) != 0 {
		t.Errorf("Explain assumed a placement on w1: %v", assumed)
	}
	if got := h.jobWrites.Load() + h.statusWrites.Load(); got != 0 {
		t.Errorf("Explain wrote %d times to manager Jobs", got)
	}
	if creates := h.workers.Conns["w1"].Creates.Load() + h.workers.Conns["w2"].Creates.Load(); creates != 0 {
		t.Errorf("Explain created %d mirrors", creates)
	}
}

// admitAll admits every pod as it is, charging its requests, and counts
// the dry-runs.
type admitAll struct{ calls int }

func (a *admitAll) Admit(_ context.Context, job *batchv1.Job) (tenantlimits.PodVerdict, error) {
	a.calls++
	return tenantlimits.PodVerdict{Admitted: tenantlimits.Admitted(job, &corev1.Pod{Spec: job.Spec.Template.Spec})}, nil
}

func (a *admitAll) Carry(_, _ *batchv1.Job) {}
