package jobcontroller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func named(name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	p.Spec.NodeName = "node"
	for _, m := range mods {
		m(p)
	}
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPodsForRemoval(t *testing.T) {
	unscheduled := func(p *corev1.Pod) { p.Spec.NodeName = "" }
	pending := func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	newer := func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute)) }
	idx := func(ix string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ix} }
	}
	nonIndexed := testJob()
	indexedJob := testJob(func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Completions = ptr.To[int32](3)
	})
	cases := map[string]struct {
		job  *batchv1.Job
		pods []*corev1.Pod
		n    int
		want []string
	}{
		"least advanced first": {
			job:  nonIndexed,
			pods: []*corev1.Pod{named("ready", ready), named("running"), named("pending", pending), named("unscheduled", unscheduled, pending)},
			n:    3, want: []string{"unscheduled", "pending", "running"},
		},
		"ready for less time first": {
			job: nonIndexed,
			pods: []*corev1.Pod{
				named("ready-long", func(p *corev1.Pod) {
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
				}),
				named("ready-short", func(p *corev1.Pod) {
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))}}
				}),
			},
			n: 1, want: []string{"ready-short"},
		},
		"more restarts first": {
			job: nonIndexed,
			pods: []*corev1.Pod{named("calm"), named("crashy", func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 3}}
			})},
			n: 1, want: []string{"crashy"},
		},
		"newer before older": {
			job: nonIndexed, pods: []*corev1.Pod{named("old"), named("new", newer)}, n: 1, want: []string{"new"},
		},
		"duplicate and out-of-range indexes go even when none is wanted": {
			job:  indexedJob,
			pods: []*corev1.Pod{named("a0", idx("0")), named("b0", idx("0"), pending), named("c5", idx("5")), named("d1", idx("1"))},
			n:    0, want: []string{"c5", "b0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(podsForRemoval(tc.job, tc.pods, tc.n))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsPodFailed(t *testing.T) {
	deleted := func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	failedPolicy := testJob(func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed) })
	cases := map[string]struct {
		pod  *corev1.Pod
		job  *batchv1.Job
		want bool
	}{
		"phase Failed": {pod: named("p", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), job: testJob(), want: true},
		"running":      {pod: named("p"), job: testJob(), want: false},
		"deleted while running, TerminatingOrFailed": {pod: named("p", deleted), job: testJob(), want: true},
		"deleted while running, Failed policy":       {pod: named("p", deleted), job: failedPolicy, want: false},
		"deleted after success":                      {pod: named("p", deleted, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), job: testJob(), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := isPodFailed(tc.pod, tc.job); got != tc.want {
				t.Errorf("got %t, want %t", got, tc.want)
			}
		})
	}
}

func TestWantActive(t *testing.T) {
	cases := map[string]struct {
		parallelism, completions *int32
		succeeded, active        int32
		want                     int32
	}{
		"parallelism bounds":                                      {parallelism: ptr.To[int32](3), completions: ptr.To[int32](10), want: 3},
		"remaining completions bound":                             {parallelism: ptr.To[int32](3), completions: ptr.To[int32](4), succeeded: 2, want: 2},
		"never negative":                                          {parallelism: ptr.To[int32](3), completions: ptr.To[int32](4), succeeded: 6, want: 0},
		"no completions: parallelism until a success":             {parallelism: ptr.To[int32](5), active: 2, want: 5},
		"no completions: after a success, let the running finish": {parallelism: ptr.To[int32](5), succeeded: 1, active: 2, want: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := testJob(func(j *batchv1.Job) { j.Spec.Parallelism, j.Spec.Completions = tc.parallelism, tc.completions })
			if got := wantActive(job, tc.succeeded, tc.active); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestManages(t *testing.T) {
	cases := map[string]struct {
		managedBy       *string
		manageUnmanaged bool
		want            bool
	}{
		"jobferry worker":                             {managedBy: ptr.To(v1alpha1.WorkerManagedBy), want: true},
		"unset, default mode":                         {want: false},
		"unset, managing unmanaged Jobs":              {manageUnmanaged: true, want: true},
		"built-in name, managing unmanaged Jobs":      {managedBy: ptr.To(batchv1.JobControllerName), manageUnmanaged: true, want: true},
		"another controller, managing unmanaged Jobs": {managedBy: ptr.To("kueue.x-k8s.io/multikueue"), manageUnmanaged: true, want: false},
		"the manager's Jobs":                          {managedBy: ptr.To(v1alpha1.ManagerManagedBy), manageUnmanaged: true, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{ManageUnmanaged: tc.manageUnmanaged}
			if got := r.Manages(testJob(func(j *batchv1.Job) { j.Spec.ManagedBy = tc.managedBy })); got != tc.want {
				t.Errorf("got %t, want %t", got, tc.want)
			}
		})
	}
}

func TestEnsureCondition(t *testing.T) {
	suspended := []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", Message: "Job suspended"}}
	cases := map[string]struct {
		in          []batchv1.JobCondition
		status      corev1.ConditionStatus
		reason      string
		wantChanged bool
		wantLen     int
	}{
		"a False condition is never added": {status: corev1.ConditionFalse, reason: "JobResumed", wantChanged: false, wantLen: 0},
		"a True condition is added":        {status: corev1.ConditionTrue, reason: "JobSuspended", wantChanged: true, wantLen: 1},
		"unchanged is left alone":          {in: suspended, status: corev1.ConditionTrue, reason: "JobSuspended", wantChanged: false, wantLen: 1},
		"a flip replaces it in place":      {in: suspended, status: corev1.ConditionFalse, reason: "JobResumed", wantChanged: true, wantLen: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg := map[string]string{"JobSuspended": "Job suspended", "JobResumed": "Job resumed"}[tc.reason]
			got, changed := ensureCondition(append([]batchv1.JobCondition(nil), tc.in...), batchv1.JobSuspended, tc.status, tc.reason, msg, t0)
			if changed != tc.wantChanged || len(got) != tc.wantLen {
				t.Errorf("changed %t, %d conditions; want %t, %d", changed, len(got), tc.wantChanged, tc.wantLen)
			}
			if changed && (got[0].Status != tc.status || !got[0].LastTransitionTime.Time.Equal(t0)) {
				t.Errorf("condition %+v, want status %s at %v", got[0], tc.status, t0)
			}
		})
	}
}

func TestPodExpectations(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	e := podExpectations{clock: clock}
	if !e.satisfied("k") {
		t.Fatal("no expectations must be satisfied")
	}
	e.expect("k", 2, 0)
	e.observe("k", 1, 0)
	if e.satisfied("k") {
		t.Fatal("one of two creations seen must not be satisfied")
	}
	e.observe("k", 1, 0)
	if !e.satisfied("k") {
		t.Fatal("both creations seen must be satisfied")
	}
	e.expect("k", 0, 1)
	clock.Step(expectationsTimeout + time.Second)
	if !e.satisfied("k") {
		t.Fatal("expectations older than the timeout must count as satisfied")
	}
}

func TestWrittenVersions(t *testing.T) {
	var w writtenVersions
	w.wrote("uid", "120")
	for rv, want := range map[string]bool{"119": true, "120": false, "121": false, "not-a-number": false} {
		if got := w.stale("uid", rv); got != want {
			t.Errorf("stale(%q) = %t, want %t", rv, got, want)
		}
	}
	if w.stale("other", "1") {
		t.Error("a Job never written is never stale")
	}
}
