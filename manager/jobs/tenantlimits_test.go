package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/tenantlimits"
)

// admitter answers every dry-run with verdict, and counts them; it records
// the Jobs whose verdict was carried to a write of jobferry's.
type admitter struct {
	verdict func(job *batchv1.Job) tenantlimits.PodVerdict
	asked   int
	carried []*batchv1.Job
}

func (a *admitter) Admit(_ context.Context, job *batchv1.Job) (tenantlimits.PodVerdict, error) {
	a.asked++
	return a.verdict(job), nil
}

func (a *admitter) Carry(_, written *batchv1.Job) {
	a.carried = append(a.carried, written.DeepCopy())
}

func suspendedWith(t *testing.T, job *batchv1.Job) *batchv1.JobCondition {
	t.Helper()
	c := jobstatus.Condition(job.Status, batchv1.JobSuspended)
	if c == nil {
		t.Fatalf("no Suspended condition: %+v", job.Status.Conditions)
	}
	return c
}

// A Job whose pods its namespace refuses (a LimitRange maximum, say) is not
// dispatched: it waits with the admission's own message, in its condition
// and an Event, and is asked about again later.
func TestPodsTheNamespaceRefusesAreNotDispatched(t *testing.T) {
	h := newJobsHarness(t, "w1")
	const refused = `pods "train-x7k2p" is forbidden: maximum cpu usage per Container is 2, but limit is 4`
	h.r.PodAdmission = &admitter{verdict: func(*batchv1.Job) tenantlimits.PodVerdict { return tenantlimits.PodVerdict{Refused: refused} }}
	h.create(t, policytest.Job())
	result := h.reconcile(t)
	if m := h.mirror(t, "w1"); m != nil || h.workers.Conns["w1"].Creates.Load() != 0 {
		t.Fatal("a mirror was created for pods the namespace refuses")
	}
	job := h.job(t)
	if job.Annotations[v1alpha1.WorkerAnnotation] != "" {
		t.Errorf("placed on %s", job.Annotations[v1alpha1.WorkerAnnotation])
	}
	c := suspendedWith(t, job)
	if c.Reason != policy.ReasonPodsNotAdmitted || !strings.Contains(c.Message, "namespace team-a of this cluster does not admit its pods") || !strings.Contains(c.Message, refused) {
		t.Errorf("condition %s: %s", c.Reason, c.Message)
	}
	if got := h.events(); strings.Join(got, ",") != policy.ReasonPodsNotAdmitted {
		t.Errorf("events %v, want %s", got, policy.ReasonPodsNotAdmitted)
	}
	if result.RequeueAfter != policy.PodsRecheck {
		t.Errorf("looked at again after %v, want %v", result.RequeueAfter, policy.PodsRecheck)
	}
	// The same refusal again writes nothing and tells no one twice.
	h.reconcile(t)
	if got := h.events(); len(got) != 0 {
		t.Errorf("the same refusal again recorded %v", got)
	}
}

// The LimitRange defaults the namespace's admission gave the pods go, sealed
// with the placement, into the mirror.
func TestMirrorRunsWithWhatTheNamespaceAdmitted(t *testing.T) {
	h := newJobsHarness(t, "w1")
	defaults := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}
	pods := &admitter{verdict: func(job *batchv1.Job) tenantlimits.PodVerdict {
		pod := &corev1.Pod{Spec: *job.Spec.Template.Spec.DeepCopy()}
		pod.Spec.Containers[0].Resources = defaults
		return tenantlimits.PodVerdict{Admitted: tenantlimits.Admitted(job, pod)}
	}}
	h.r.PodAdmission = pods
	h.create(t, policytest.Job())
	h.reconcile(t)
	m, err := h.workers.Conns["w1"].UncachedJob(context.Background(), trainKey)
	if err != nil {
		t.Fatalf("no mirror: %v", err)
	}
	if got := m.Spec.Template.Spec.Containers[0].Resources; got.Requests.Cpu().String() != "500m" || got.Limits.Cpu().String() != "1" {
		t.Errorf("the mirror's container resources %v, want the namespace's defaults", got)
	}
	job := h.job(t)
	var admitted v1alpha1.AdmittedPods
	if err := json.Unmarshal([]byte(job.Annotations[v1alpha1.AdmittedPodsAnnotation]), &admitted); err != nil {
		t.Fatalf("annotation %s: %v", v1alpha1.AdmittedPodsAnnotation, err)
	}
	if cpu := admitted.Charge.PerPod[corev1.ResourceRequestsCPU]; cpu.String() != "500m" {
		t.Errorf("charge %v, want requests.cpu 500m", admitted.Charge.PerPod)
	}
	if v, names := jobstate.Verify(job, jobstate.Key(testKey)); v != jobstate.Trusted {
		t.Errorf("the state verifies as %s (%v)", v, names)
	}
	if len(job.Spec.Template.Spec.Containers[0].Resources.Requests) != 0 {
		t.Errorf("the manager Job's template changed: %v", job.Spec.Template.Spec.Containers[0].Resources)
	}
	if _, ok := m.Annotations[v1alpha1.AdmittedPodsAnnotation]; ok {
		t.Error("the mirror carries the manager's state")
	}
	// The placement's verdict goes with the Job as the placement wrote it
	// (tenantlimits.PodAdmission.Carry then keeps it for that generation).
	if len(pods.carried) != 1 || pods.carried[0].Annotations[v1alpha1.WorkerAnnotation] != "w1" || pods.carried[0].UID != job.UID {
		t.Errorf("verdicts carried to %d written Jobs, want 1: the Job as placed on w1", len(pods.carried))
	}
}

// A ResourceQuota of pods: 2 in the namespace: two Jobs are dispatched, the
// third waits with a reason naming the quota until one of the two finishes.
func TestQuotaBoundsTheNamespacesDispatchedJobs(t *testing.T) {
	h := newJobsHarness(t, "w1")
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "two-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}}}
	if err := h.manager.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	keys := make([]types.NamespacedName, 3)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: "team-a", Name: "train-" + string(rune('0'+i))}
		h.create(t, policytest.Job(func(j *batchv1.Job) { j.Name, j.UID = keys[i].Name, types.UID("uid-"+keys[i].Name) }))
	}
	run := func(key types.NamespacedName) reconcile.Result {
		t.Helper()
		result, err := h.r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		if err != nil {
			t.Fatalf("reconcile %s: %v", key, err)
		}
		return result
	}
	get := func(key types.NamespacedName) *batchv1.Job {
		t.Helper()
		job := &batchv1.Job{}
		if err := h.manager.Get(ctx, key, job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	for _, key := range keys[:2] {
		run(key)
		if get(key).Annotations[v1alpha1.WorkerAnnotation] != "w1" {
			t.Fatalf("%s not placed within the quota", key.Name)
		}
	}
	h.events()
	result := run(keys[2])
	third := get(keys[2])
	if third.Annotations[v1alpha1.WorkerAnnotation] != "" {
		t.Fatal("the third Job was placed past a quota of two pods")
	}
	c := suspendedWith(t, third)
	want := "ResourceQuota two-pods in namespace team-a has no room for this Job's pods beside the namespace's dispatched unfinished Jobs (pods, hard limit 2)"
	if c.Reason != policy.ReasonQuotaExceeded || !strings.Contains(c.Message, want) {
		t.Errorf("condition %s: %s; want %s saying %q", c.Reason, c.Message, policy.ReasonQuotaExceeded, want)
	}
	if got := h.events(); strings.Join(got, ",") != policy.ReasonQuotaExceeded {
		t.Errorf("events %v, want %s", got, policy.ReasonQuotaExceeded)
	}
	// Looked at again with nothing changed: no write, no second Event.
	writes := h.statusWrites.Load()
	run(keys[2])
	if got := h.events(); len(got) != 0 || h.statusWrites.Load() != writes {
		t.Errorf("the same refusal again: events %v, %d status writes", got, h.statusWrites.Load()-writes)
	}
	if result.RequeueAfter != quotaRecheck {
		t.Errorf("looked at again after %v, want %v", result.RequeueAfter, quotaRecheck)
	}
	if waiting := h.r.placing.quotaWaiting.take("team-a"); len(waiting) != 1 || waiting[0] != keys[2].Name {
		t.Errorf("quota waiters %v, want %s", waiting, keys[2].Name)
	}

	// The first finishes on its worker: its charge goes, the third fits.
	conn := h.workers.Conns["w1"]
	m, err := conn.Mirror(ctx, keys[0])
	if err != nil || m == nil {
		t.Fatalf("mirror of %s: %v", keys[0].Name, err)
	}
	policytest.Complete(m)
	if err := conn.API.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	h.workers.MirrorChanged("w1", m)
	run(keys[0])
	if !jobstatus.ConditionTrue(get(keys[0]).Status, batchv1.JobComplete) {
		t.Fatal("the first Job did not complete")
	}
	run(keys[2])
	if get(keys[2]).Annotations[v1alpha1.WorkerAnnotation] != "w1" {
		t.Errorf("the third Job was not placed once the first finished: %+v", suspendedWith(t, get(keys[2])))
	}
}

// quotaHarness is a harness whose namespace team-a has a quota of hard.
func quotaHarness(t *testing.T, hard corev1.ResourceList) *jobsHarness {
	h := newJobsHarness(t, "w1")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := h.manager.Create(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	return h
}

// nextJob creates the namespace's next Job, reconciles it and returns it as
// that left it.
func (h *jobsHarness) nextJob(t *testing.T) *batchv1.Job {
	t.Helper()
	h.create(t, policytest.Job(func(j *batchv1.Job) { j.Name, j.UID = "next", "uid-next" }))
	next := types.NamespacedName{Namespace: "team-a", Name: "next"}
	h.reconcileKey(t, next)
	got := &batchv1.Job{}
	if err := h.manager.Get(context.Background(), next, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func (h *jobsHarness) reconcileKey(t *testing.T, key types.NamespacedName) {
	t.Helper()
	if _, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile %s: %v", key, err)
	}
}

// A Job placed within the quota whose parallelism its tenant then raises
// past it: the new parallelism is not carried to the mirror, and the Job is
// told why; the quota still counts it as it is now.
func TestParallelismGrownPastTheQuotaIsNotCarried(t *testing.T) {
	h := quotaHarness(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")})
	ctx := context.Background()
	h.create(t, policytest.Job())
	h.reconcile(t)
	job := h.job(t)
	if job.Annotations[v1alpha1.WorkerAnnotation] != "w1" {
		t.Fatal("not placed within the quota")
	}
	h.events()
	job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](50), ptr.To[int32](50)
	if err := h.manager.Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	h.reconcile(t)
	m, err := h.workers.Conns["w1"].UncachedJob(ctx, trainKey)
	if err != nil {
		t.Fatal(err)
	}
	if p := ptr.Deref(m.Spec.Parallelism, 0); p != 1 {
		t.Errorf("the mirror runs parallelism %d, want 1: the growth to 50 is past the quota of 2 pods", p)
	}
	if got := h.events(); strings.Join(got, ",") != policy.ReasonInvalidMirror {
		t.Errorf("events %v, want %s", got, policy.ReasonInvalidMirror)
	}

	// The next Job of the namespace sees the grown Job as it is now.
	got := h.nextJob(t)
	if w := got.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
		t.Errorf("placed on %s beside a Job counted at 50 pods against a quota of 2", w)
	}
}

// A tenant who may write its Jobs' status marks a running Job Failed: its
// mirror still runs, so it still counts.
func TestAForgedFinishedStatusDoesNotFreeTheQuota(t *testing.T) {
	h := quotaHarness(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	ctx := context.Background()
	h.create(t, policytest.Job())
	h.reconcile(t)
	job := h.job(t)
	at := metav1.NewTime(policytest.Now)
	job.Status.StartTime = &at
	job.Status.Conditions = append(job.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: at},
		batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: at})
	if err := h.manager.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	if !policy.IsFinished(h.job(t)) {
		t.Fatal("the forged status does not read finished")
	}
	got := h.nextJob(t)
	if w := got.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
		t.Errorf("placed on %s while the Job marked Failed by its tenant still runs its mirror", w)
	}
	if c := suspendedWith(t, got); c.Reason != policy.ReasonQuotaExceeded {
		t.Errorf("condition %s: %s, want %s", c.Reason, c.Message, policy.ReasonQuotaExceeded)
	}
}

// With Kueue, a Job is left to Kueue's quota when it names a LocalQueue, or
// when jobferry sealed that it was seen queued; a record of being queued
// that its state's seal does not cover (forged where the state policy is
// missing) keeps it in the namespace's quota.
func TestOnlyASealedQueueRecordLeavesTheQuotaToKueue(t *testing.T) {
	recorded := policytest.Job(func(j *batchv1.Job) { j.Annotations[v1alpha1.QueuedAnnotation] = "team" })
	labelled := policytest.Job(policytest.Queued)
	for name, tc := range map[string]struct {
		job              *batchv1.Job
		kueueMode, trust bool
		want             bool
	}{
		"labelled":                 {labelled, true, false, true},
		"recorded, sealed":         {recorded, true, true, true},
		"recorded, seal not valid": {recorded, true, false, false},
		"without Kueue":            {labelled, false, true, false},
	} {
		if got := kueueBound(tc.kueueMode, tc.job, tc.trust); got != tc.want {
			t.Errorf("%s: Kueue's to bound %v, want %v", name, got, tc.want)
		}
	}
}

// The pods' verdict goes with a placement's write only when the write
// changes the template by the worker's directives alone: a Job released
// and placed again gets its user's recorded scheduling back, which the
// verdict of the released template did not judge.
func TestPodVerdictCarriedOnlyOverTheWorkersDirectives(t *testing.T) {
	pods := &admitter{verdict: func(*batchv1.Job) tenantlimits.PodVerdict { return tenantlimits.PodVerdict{} }}
	r := &JobReconciler{PodAdmission: pods}
	gpu := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "gpu"}}
	fresh := policytest.Job()
	placed, err := policy.PlacedJob(fresh, "w1", gpu)
	if err != nil {
		t.Fatal(err)
	}
	r.carryPodVerdict(fresh, placed)
	if len(pods.carried) != 1 {
		t.Fatalf("a first placement: %d verdicts carried, want 1", len(pods.carried))
	}
	// Handed over with the template as the dry-run judged it: the user's
	// scheduling, not the worker's directives.
	if got := pods.carried[0].Spec.Template; !equality.Semantic.DeepEqual(got, fresh.Spec.Template) {
		t.Errorf("carried with the template %+v, want the one judged, %+v", got.Spec, fresh.Spec.Template.Spec)
	}
	released := policy.ReleasedJob(placed)
	again, err := policy.PlacedJob(released, "w2", gpu)
	if err != nil {
		t.Fatal(err)
	}
	r.carryPodVerdict(released, again)
	if len(pods.carried) != 1 {
		t.Errorf("a placement after a release: the verdict of the released template was carried")
	}
}
