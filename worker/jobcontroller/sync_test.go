package jobcontroller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// These tables run whole syncs against controller-runtime's fake client, to
// pin down the decisions of one sync; the real behaviour over time is
// compared with kube-controller-manager in e2e/conformance_test.go.

const testJobUID = types.UID("job-uid")

func testJob(mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", UID: testJobUID},
		Spec: batchv1.JobSpec{
			ManagedBy:    ptr.To(v1alpha1.WorkerManagedBy),
			Parallelism:  ptr.To[int32](2),
			Completions:  ptr.To[int32](2),
			BackoffLimit: ptr.To[int32](6),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			},
		},
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

// testPod is a pod of testJob holding the tracking finalizer.
func testPod(name string, phase corev1.PodPhase, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID(name + "-uid"),
			Finalizers:        []string{batchv1.JobTrackingFinalizer},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(testJob(), batchv1.SchemeGroupVersion.WithKind("Job"))},
			CreationTimestamp: metav1.NewTime(t0),
		},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func deleting(p *corev1.Pod) {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	p.Finalizers = append(p.Finalizers, "test/keep")
}

func exitCode(code int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(t0)},
		}}}
	}
}

func disrupted(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
}

func withIndex(ix string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ix}
	}
}

// syncResult is what a test compares after the syncs.
type syncResult struct {
	Active, Ready, Terminating, Succeeded, Failed int32
	Uncounted                                     int
	CompletedIndexes, FailedIndexes               string
	Conditions                                    []string
	StartTime, CompletionTime                     bool
	// Pods: name (generateName for created ones), phase, finalizers, and
	// the index failure count of created ones.
	Pods   []string
	Events []string
}

func TestSyncJob(t *testing.T) {
	cases := map[string]struct {
		job   *batchv1.Job
		pods  []*corev1.Pod
		syncs int
		// clockAt is the time of the syncs after t0 (default 1 s).
		clockAt time.Duration
		want    syncResult
	}{
		"creates pods up to parallelism": {
			job: testJob(func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3); j.Spec.Completions = ptr.To[int32](5) }),
			want: syncResult{Active: 3, StartTime: true,
				Pods:   []string{"j- Pending [batch.kubernetes.io/job-tracking]", "j- Pending [batch.kubernetes.io/job-tracking]", "j- Pending [batch.kubernetes.io/job-tracking]"},
				Events: []string{"Normal SuccessfulCreate", "Normal SuccessfulCreate", "Normal SuccessfulCreate"}},
		},
		"a succeeded pod is counted once its finalizer is gone": {
			job:  testJob(),
			pods: []*corev1.Pod{testPod("a", corev1.PodSucceeded), testPod("b", corev1.PodRunning)},
			// b still runs for the one completion left: nothing to create.
			want: syncResult{Active: 1, Succeeded: 1, StartTime: true,
				Pods: []string{"a Succeeded []", "b Running [batch.kubernetes.io/job-tracking]"}},
		},
		"a deleted pod counts failed at once under TerminatingOrFailed": {
			job:  testJob(func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1) }),
			pods: []*corev1.Pod{testPod("a", corev1.PodRunning, deleting)},
			// Replacement waits for the 10 s back-off of the first failure.
			want: syncResult{Terminating: 1, Failed: 1, StartTime: true,
				Pods: []string{"a Running [test/keep]"}},
		},
		"under podReplacementPolicy Failed a terminating pod is neither failed nor replaced": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.Parallelism = ptr.To[int32](1)
				j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
			}),
			pods: []*corev1.Pod{testPod("a", corev1.PodRunning, deleting)},
			want: syncResult{Terminating: 1, StartTime: true,
				Pods: []string{"a Running [batch.kubernetes.io/job-tracking test/keep]"}},
		},
		"suspending deletes pods without counting them and clears startTime": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.Suspend = ptr.To(true)
				j.Status.StartTime = ptr.To(metav1.NewTime(t0))
				j.Status.Active = 2
			}),
			pods: []*corev1.Pod{testPod("a", corev1.PodRunning), testPod("b", corev1.PodPending)},
			// As upstream, the pods just deleted count as terminating in
			// this write; the next sync sees them gone.
			want: syncResult{Terminating: 2, Conditions: []string{"Suspended=True JobSuspended"},
				Events: []string{"Normal SuccessfulDelete", "Normal SuccessfulDelete", "Normal Suspended"}},
		},
		"backoff limit: FailureTarget first, Failed once nothing terminates": {
			job:   testJob(func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](0) }),
			pods:  []*corev1.Pod{testPod("a", corev1.PodFailed), testPod("b", corev1.PodRunning)},
			syncs: 2,
			want: syncResult{Failed: 2, StartTime: true,
				Conditions: []string{"FailureTarget=True BackoffLimitExceeded", "Failed=True BackoffLimitExceeded"},
				Pods:       []string{"a Failed []"},
				Events:     []string{"Normal SuccessfulDelete", "Warning BackoffLimitExceeded"}},
		},
		"completions reached: SuccessCriteriaMet and Complete with a completion time": {
			job:  testJob(func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1); j.Spec.Completions = ptr.To[int32](1) }),
			pods: []*corev1.Pod{testPod("a", corev1.PodSucceeded)},
			want: syncResult{Succeeded: 1, StartTime: true, CompletionTime: true,
				Conditions: []string{"SuccessCriteriaMet=True CompletionsReached", "Complete=True CompletionsReached"},
				Pods:       []string{"a Succeeded []"},
				Events:     []string{"Normal Completed"}},
		},
		"indexed: completed indexes and one pod per missing index": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
				j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](3), ptr.To[int32](3)
			}),
			pods: []*corev1.Pod{testPod("a", corev1.PodSucceeded, withIndex("1"))},
			want: syncResult{Active: 2, Succeeded: 1, CompletedIndexes: "1", StartTime: true,
				Pods:   []string{"a Succeeded []", "j-0- Pending [batch.kubernetes.io/job-tracking]", "j-2- Pending [batch.kubernetes.io/job-tracking]"},
				Events: []string{"Normal SuccessfulCreate", "Normal SuccessfulCreate"}},
		},
		"backoffLimitPerIndex: the failed pod keeps its finalizer until its replacement inherits its count": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
				j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](1), ptr.To[int32](1)
				j.Spec.BackoffLimitPerIndex = ptr.To[int32](2)
			}),
			pods: []*corev1.Pod{testPod("a", corev1.PodFailed, withIndex("0"), exitCode(1),
				func(p *corev1.Pod) { p.Annotations[batchv1.JobIndexFailureCountAnnotation] = "0" })},
			// At t0+11s the index's 10 s back-off (counted from a's finish at
			// t0) is over: the first sync creates the replacement and keeps
			// a's finalizer; the second sees the replacement and releases a.
			clockAt: 11 * time.Second,
			syncs:   2,
			want: syncResult{Active: 1, Failed: 1, StartTime: true,
				Pods:   []string{"a Failed []", "j-0- Pending [batch.kubernetes.io/job-tracking] failures=1"},
				Events: []string{"Normal SuccessfulCreate"}},
		},
		"backoffLimitPerIndex: an index failing at its limit is failed, and so is the Job": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
				j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](2), ptr.To[int32](2)
				j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
			}),
			pods: []*corev1.Pod{
				testPod("a", corev1.PodFailed, withIndex("0"), func(p *corev1.Pod) { p.Annotations[batchv1.JobIndexFailureCountAnnotation] = "1" }),
				testPod("b", corev1.PodSucceeded, withIndex("1")),
			},
			want: syncResult{Succeeded: 1, Failed: 1, CompletedIndexes: "1", FailedIndexes: "0", StartTime: true,
				Conditions: []string{"FailureTarget=True FailedIndexes", "Failed=True FailedIndexes"},
				Pods:       []string{"a Failed []", "b Succeeded []"},
				Events:     []string{"Warning FailedIndexes"}},
		},
		"podFailurePolicy FailJob: FailureTarget naming the pod, the others stopped and counted": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:      batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
				}}}
			}),
			pods: []*corev1.Pod{testPod("a", corev1.PodFailed, exitCode(42)), testPod("b", corev1.PodRunning)},
			// b is deleted keeping its finalizer (the fake client then keeps
			// it terminating), so Failed waits for the next sync.
			want: syncResult{Failed: 2, Terminating: 1, StartTime: true,
				Conditions: []string{"FailureTarget=True PodFailurePolicy"},
				Pods:       []string{"a Failed []"},
				Events:     []string{"Normal SuccessfulDelete"}},
		},
		"podFailurePolicy Ignore: the failure is not counted": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.Parallelism = ptr.To[int32](1)
				j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:          batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
				}}}
			}),
			pods: []*corev1.Pod{testPod("a", corev1.PodFailed, disrupted)},
			// Replaced after the 10 s back-off, which counts every failure.
			want: syncResult{StartTime: true, Pods: []string{"a Failed []"}},
		},
		"successPolicy met: SuccessCriteriaMet, the rest stopped and not counted": {
			job: testJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
				j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](3), ptr.To[int32](3)
				j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
			}),
			pods: []*corev1.Pod{
				testPod("a", corev1.PodSucceeded, withIndex("0")),
				testPod("b", corev1.PodRunning, withIndex("1")),
				testPod("c", corev1.PodRunning, withIndex("2")),
			},
			// Complete waits for the two stopped pods to be gone.
			want: syncResult{Succeeded: 1, Terminating: 2, CompletedIndexes: "0", StartTime: true,
				Conditions: []string{"SuccessCriteriaMet=True SuccessPolicy"},
				Pods:       []string{"a Succeeded []"},
				Events:     []string{"Normal SuccessfulDelete", "Normal SuccessfulDelete"}},
		},
		"Jobs managed by others are left alone": {
			job:  testJob(func(j *batchv1.Job) { j.Spec.ManagedBy = nil }),
			pods: []*corev1.Pod{testPod("a", corev1.PodSucceeded)},
			want: syncResult{Pods: []string{"a Succeeded [batch.kubernetes.io/job-tracking]"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.job}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			r, c, recorder := newTestReconciler(objs, nil)
			if tc.clockAt != 0 {
				r.Clock = clocktesting.NewFakeClock(t0.Add(tc.clockAt))
				r.podExpectations.clock = r.Clock
			}
			syncTimes(t, r, max(tc.syncs, 1))
			got := observeSync(t, c, recorder)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func newTestReconciler(objs []client.Object, funcs *interceptor.Funcs) (*Reconciler, client.Client, *record.FakeRecorder) {
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(objs...).
		WithStatusSubresource(&batchv1.Job{}).
		WithIndex(&corev1.Pod{}, controllerUIDField, func(o client.Object) []string {
			if ref := metav1.GetControllerOf(o); ref != nil {
				return []string{string(ref.UID)}
			}
			return nil
		})
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	c := b.Build()
	recorder := record.NewFakeRecorder(1000)
	r := &Reconciler{Client: c, Recorder: recorder, Clock: clocktesting.NewFakeClock(t0.Add(time.Second))}
	r.podExpectations.clock = r.Clock
	return r, c, recorder
}

func syncTimes(t *testing.T, r *Reconciler, n int) {
	t.Helper()
	for range n {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "j"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// Found by the chaos run (a worker namespace deleted under an Indexed Job
// with backoffLimitPerIndex): the failed pod kept for its replacement to
// inherit its failure count is released once a replacement is refused
// because the namespace is being deleted — the namespace's deletion waits
// for its pods before it deletes the Job, so holding the pod held the
// namespace for ever.
func TestSyncJobReleasesDelayedPodsWhenTheNamespaceIsTerminating(t *testing.T) {
	job := testJob(func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](4), ptr.To[int32](4)
		j.Spec.BackoffLimitPerIndex = ptr.To[int32](2)
	})
	failed := testPod("a", corev1.PodFailed, withIndex("0"), exitCode(1),
		func(p *corev1.Pod) { p.Annotations[batchv1.JobIndexFailureCountAnnotation] = "0" })
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `pods "j-0-x" is forbidden: unable to create new content in namespace ns because it is being terminated`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"}}}}}
	creates := 0
	funcs := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*corev1.Pod); ok {
			creates++
			return terminating
		}
		return c.Create(ctx, obj, opts...)
	}}
	r, c, recorder := newTestReconciler([]client.Object{job, failed}, funcs)
	// Past the index's 10 s back-off: the replacement is due.
	r.Clock = clocktesting.NewFakeClock(t0.Add(11 * time.Second))
	r.podExpectations.clock = r.Clock
	syncTimes(t, r, 1)
	got := observeSync(t, c, recorder)
	// Four pods are due (the replacement and indexes 1-3); the first
	// refusal ends the sync's creates.
	if creates != 1 {
		t.Errorf("%d pod creates tried, want one: the first refusal says the namespace is going", creates)
	}
	if want := []string{"a Failed []"}; !slices.Equal(got.Pods, want) {
		t.Errorf("pods %v, want %v: the failed pod released once its replacement was refused in a namespace being deleted", got.Pods, want)
	}
	if got.Failed != 1 {
		t.Errorf("failed %d, want the released pod counted", got.Failed)
	}
	// The refused pod is not waited for: the next sync (another index's
	// pod failing meanwhile, say) tries again, and learns it again.
	if !r.podExpectations.satisfied("ns/j") {
		t.Error("a pod refused in a namespace being deleted is still expected")
	}
}

// 600 finished pods are recorded over two syncs, no status write carrying
// more than 500 uncounted UIDs, and the Job is Complete only after the second.
func TestSyncJobCapsUncountedPerWrite(t *testing.T) {
	job := testJob(func(j *batchv1.Job) {
		j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](600), ptr.To[int32](600)
	})
	objs := []client.Object{job}
	for i := range 600 {
		objs = append(objs, testPod(fmt.Sprintf("p%03d", i), corev1.PodSucceeded))
	}
	maxUncounted := 0
	funcs := &interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		if u := obj.(*batchv1.Job).Status.UncountedTerminatedPods; u != nil {
			maxUncounted = max(maxUncounted, len(u.Succeeded)+len(u.Failed))
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}}
	r, c, recorder := newTestReconciler(objs, funcs)

	syncTimes(t, r, 1)
	first := observeSync(t, c, recorder)
	// As upstream, the success criteria count every succeeded pod seen, so
	// SuccessCriteriaMet comes at once; Complete waits for the counters.
	if want := []string{"SuccessCriteriaMet=True CompletionsReached"}; first.Succeeded != 500 || !slices.Equal(first.Conditions, want) {
		t.Errorf("after one sync: succeeded %d, conditions %v; want 500 and %v", first.Succeeded, first.Conditions, want)
	}
	recorder = record.NewFakeRecorder(1000)
	r.Recorder = recorder
	syncTimes(t, r, 1)
	second := observeSync(t, c, recorder)
	if second.Succeeded != 600 || !slices.Contains(second.Conditions, "Complete=True CompletionsReached") {
		t.Errorf("after two syncs: succeeded %d, conditions %v; want 600 and Complete", second.Succeeded, second.Conditions)
	}
	if maxUncounted > maxUncountedPods {
		t.Errorf("a status write carried %d uncounted UIDs, want at most %d", maxUncounted, maxUncountedPods)
	}
	for _, p := range second.Pods {
		if strings.Contains(p, batchv1.JobTrackingFinalizer) {
			t.Fatalf("pod still holds the finalizer: %s", p)
		}
	}
}

func observeSync(t *testing.T, c client.Client, recorder *record.FakeRecorder) syncResult {
	t.Helper()
	job := &batchv1.Job{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "j"}, job); err != nil {
		t.Fatal(err)
	}
	s := job.Status
	got := syncResult{
		Active: s.Active, Ready: ptr.Deref(s.Ready, 0), Terminating: ptr.Deref(s.Terminating, 0),
		Succeeded: s.Succeeded, Failed: s.Failed, CompletedIndexes: s.CompletedIndexes, FailedIndexes: ptr.Deref(s.FailedIndexes, ""),
		StartTime: s.StartTime != nil, CompletionTime: s.CompletionTime != nil,
	}
	if u := s.UncountedTerminatedPods; u != nil {
		got.Uncounted = len(u.Succeeded) + len(u.Failed)
	}
	for _, cond := range s.Conditions {
		got.Conditions = append(got.Conditions, string(cond.Type)+"="+string(cond.Status)+" "+cond.Reason)
	}
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		name, phase := p.Name, p.Status.Phase
		if p.GenerateName != "" {
			name = p.GenerateName
		}
		if phase == "" {
			phase = corev1.PodPending // the API server's default
		}
		fins := slices.Clone(p.Finalizers)
		sort.Strings(fins)
		if fins == nil {
			fins = []string{}
		}
		desc := name + " " + string(phase) + " [" + strings.Join(fins, " ") + "]"
		if n, ok := p.Annotations[batchv1.JobIndexFailureCountAnnotation]; ok && p.GenerateName != "" {
			desc += " failures=" + n
		}
		got.Pods = append(got.Pods, desc)
	}
	sort.Strings(got.Pods)
	close(recorder.Events)
	for e := range recorder.Events {
		fields := strings.Fields(e)
		got.Events = append(got.Events, fields[0]+" "+fields[1])
	}
	sort.Strings(got.Events)
	return got
}
