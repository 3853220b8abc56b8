package jobs

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/tenantlimits"
)

func attackSetup(t *testing.T, hard corev1.ResourceList) (*jobsHarness, func(types.NamespacedName), func(types.NamespacedName) *batchv1.Job) {
	h := newJobsHarness(t, "w1")
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := h.manager.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	run := func(key types.NamespacedName) {
		t.Helper()
		if _, err := h.r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatalf("reconcile %s: %v", key, err)
		}
	}
	get := func(key types.NamespacedName) *batchv1.Job {
		t.Helper()
		job := &batchv1.Job{}
		if err := h.manager.Get(ctx, key, job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	return h, run, get
}

func key(n string) types.NamespacedName { return types.NamespacedName{Namespace: "team-a", Name: n} }

// Scaling parallelism after placement: the sealed charge stays at the old size.
func TestAttackScaleAfterPlacement(t *testing.T) {
	h, run, get := attackSetup(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")})
	ctx := context.Background()
	h.create(t, stepJob(func(j *batchv1.Job) { j.Name, j.UID = "a", "uid-a"; j.Spec.Completions = nil }))
	run(key("a"))
	a := get(key("a"))
	if a.Annotations[v1alpha1.WorkerAnnotation] != "w1" {
		t.Fatal("a not placed")
	}
	a.Spec.Parallelism = ptr.To[int32](50)
	if err := h.manager.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	run(key("a"))
	m, _ := h.workers.Conns["w1"].UncachedJob(ctx, key("a"))
	t.Logf("mirror parallelism %d; sealed %s", *m.Spec.Parallelism, get(key("a")).Annotations[v1alpha1.AdmittedPodsAnnotation])
	h.create(t, stepJob(func(j *batchv1.Job) { j.Name, j.UID = "b", "uid-b" }))
	run(key("b"))
	t.Logf("b placed on %q (quota pods=2, a runs %d pods)", get(key("b")).Annotations[v1alpha1.WorkerAnnotation], *m.Spec.Parallelism)
}

// Parallelism 0 at placement: zero charge, never refused.
func TestAttackZeroParallelism(t *testing.T) {
	h, run, get := attackSetup(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")})
	h.create(t, stepJob(func(j *batchv1.Job) { j.Name, j.UID = "a", "uid-a"; j.Spec.Parallelism = ptr.To[int32](0); j.Spec.Completions = nil }))
	run(key("a"))
	t.Logf("a (parallelism 0, quota pods=0) placed on %q", get(key("a")).Annotations[v1alpha1.WorkerAnnotation])
}

// A tenant writing jobs/status marks a running Job Failed: it stops counting; its mirror runs on.
func TestAttackForgedFinished(t *testing.T) {
	h, run, get := attackSetup(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	ctx := context.Background()
	h.create(t, stepJob(func(j *batchv1.Job) { j.Name, j.UID = "a", "uid-a" }))
	run(key("a"))
	a := get(key("a"))
	now := metav1.Now()
	a.Status.StartTime = &now
	a.Status.Conditions = append(a.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "x"},
		batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "x"})
	if err := h.manager.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	run(key("a"))
	m, _ := h.workers.Conns["w1"].UncachedJob(ctx, key("a"))
	h.create(t, stepJob(func(j *batchv1.Job) { j.Name, j.UID = "b", "uid-b" }))
	run(key("b"))
	t.Logf("a's mirror still there: %v suspend=%v deleted=%v; b placed on %q", m != nil, m != nil && ptr.Deref(m.Spec.Suspend, false), m != nil && m.DeletionTimestamp != nil, get(key("b")).Annotations[v1alpha1.WorkerAnnotation])
}

// Overflow: per-pod memory within the quota, parallelism large: the charge wraps negative.
func TestAttackOverflow(t *testing.T) {
	job := stepJob(func(j *batchv1.Job) {
		j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](9000), nil
		j.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Ti")}
	})
	pod := &corev1.Pod{Spec: job.Spec.Template.Spec}
	c := tenantlimits.Admitted(job, pod).Charge
	mem := c.Usage[corev1.ResourceRequestsMemory]
	t.Logf("charge requests.memory = %s", mem.String())
	q := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsMemory: resource.MustParse("2Ti")}}}
	t.Logf("refusal for the overflowing Job: %v", tenantlimits.QuotaRefuses("team-a", []corev1.ResourceQuota{q}, nil, c))
	big := tenantlimits.Admitted(stepJob(func(j *batchv1.Job) {
		j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](1000), nil
		j.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Ti")}
	}), pod).Charge
	t.Logf("refusal for a later 1000 x 1Ti Job beside it: %v", tenantlimits.QuotaRefuses("team-a", []corev1.ResourceQuota{q}, []v1alpha1.QuotaCharge{c}, big))
}

// A template changed after placement (suspended) reaches the mirror without a new dry-run.
func TestAttackTemplateChangeSkipsDryRun(t *testing.T) {
	h, run, get := attackSetup(t, corev1.ResourceList{})
	ctx := context.Background()
	adm := &admitter{verdict: func(job *batchv1.Job) tenantlimits.PodVerdict {
		if job.Spec.Template.Labels["forbidden"] != "" {
			return tenantlimits.PodVerdict{Refused: "policy refuses label forbidden"}
		}
		return tenantlimits.PodVerdict{Admitted: tenantlimits.Admitted(job, &corev1.Pod{Spec: job.Spec.Template.Spec})}
	}}
	h.r.PodAdmission = adm
	h.create(t, stepJob(func(j *batchv1.Job) { j.Name, j.UID = "a", "uid-a" }))
	run(key("a"))
	a := get(key("a"))
	a.Spec.Suspend = ptr.To(true)
	if err := h.manager.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	run(key("a"))
	a = get(key("a"))
	a.Spec.Template.Labels = map[string]string{"forbidden": "yes"}
	a.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	if err := h.manager.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	run(key("a"))
	a = get(key("a"))
	a.Spec.Suspend = ptr.To(false)
	if err := h.manager.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	run(key("a"))
	m, _ := h.workers.Conns["w1"].UncachedJob(ctx, key("a"))
	t.Logf("dry-runs: %d; mirror labels %v tolerations %v suspend %v", adm.asked, m.Spec.Template.Labels, m.Spec.Template.Spec.Tolerations, *m.Spec.Suspend)
}
