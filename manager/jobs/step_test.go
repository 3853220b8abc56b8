package jobs

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

var stepNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

var testStepConfig = Config{Origin: "jobferry", ManagerID: "manager-a", WorkerLostTimeout: 15 * time.Minute, StatusBatchPeriod: time.Second}

// stepJob is a manager Job as the webhook admits it: held for placement.
func stepJob(mutate ...func(*batchv1.Job)) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "uid-1",
			Annotations: map[string]string{v1alpha1.HeldForPlacementAnnotation: "true"}},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true),
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "example/work:1"}}}},
		},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

// placed is a Job as PlacedJob leaves it on worker w1.
func placed(job *batchv1.Job) {
	job.Annotations[v1alpha1.WorkerAnnotation] = "w1"
	job.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1"
	delete(job.Annotations, v1alpha1.HeldForPlacementAnnotation)
	job.Spec.Suspend = ptr.To(false)
}

func running(job *batchv1.Job) {
	job.Status.StartTime = &metav1.Time{Time: stepNow.Add(-time.Minute)}
	job.Status.Active = 1
	job.Status.Ready = ptr.To[int32](1)
	job.Status.Terminating = ptr.To[int32](0)
	job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
}

func complete(job *batchv1.Job) {
	at := metav1.NewTime(stepNow.Add(-time.Second))
	job.Status.StartTime = &metav1.Time{Time: stepNow.Add(-time.Minute)}
	job.Status.CompletionTime = &at
	job.Status.Active, job.Status.Succeeded = 0, 1
	job.Status.Ready, job.Status.Terminating = ptr.To[int32](0), ptr.To[int32](0)
	job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastProbeTime: at, LastTransitionTime: at},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastProbeTime: at, LastTransitionTime: at},
	}
}

// mirrorOf is the mirror of job as the worker shows it, with the worker's
// status applied by mutate.
func mirrorOf(t *testing.T, job *batchv1.Job, mutate ...func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	m, err := DesiredMirror(job, NeedsActivation(job), workerCluster(), testStepConfig.Origin, testStepConfig.ManagerID)
	if err != nil {
		t.Fatal(err)
	}
	m.UID = "mirror-uid"
	m.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "mirror-uid"}}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func workerCluster(mutate ...func(*v1alpha1.WorkerCluster)) *v1alpha1.WorkerCluster {
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}
	for _, f := range mutate {
		f(wc)
	}
	return wc
}

func disconnectedFor(d time.Duration) func(*v1alpha1.WorkerCluster) {
	return func(wc *v1alpha1.WorkerCluster) {
		wc.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonUnreachable, LastTransitionTime: metav1.NewTime(stepNow.Add(-d))}}
	}
}

// connectedState is the state of a Job placed on w1, which is connected.
func connectedState(job *batchv1.Job, m *batchv1.Job) State {
	s := State{Job: job, Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(),
		Connection: Connection{Connected: true, MayUse: true, StartedTemplatesMutable: true, KubernetesVersion: "v1.36.3"}, Mirror: m}
	if m != nil {
		s.MirrorUID = m.UID
	}
	return s
}

// startedSuspended is a placed Job whose mirror started and is suspended
// now, the Job's node selector changed since (and the Job suspended, or
// resumed), on a worker of that version.
func startedSuspended(t *testing.T, version string, startedMayChange, stillSuspended bool) State {
	job := stepJob(placed, func(j *batchv1.Job) {
		j.Spec.Suspend = ptr.To(stillSuspended)
		j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "b"}
	})
	m := mirrorOf(t, stepJob(placed), func(m *batchv1.Job) {
		m.Spec.Suspend = ptr.To(true)
		m.Status.StartTime = &metav1.Time{Time: stepNow.Add(-time.Hour)}
		m.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}
	})
	s := connectedState(job, m)
	s.Connection.StartedTemplatesMutable, s.Connection.KubernetesVersion = startedMayChange, version
	return s
}

func TestNextStep(t *testing.T) {
	type check func(t *testing.T, st Step)
	wantWhy := func(parts ...string) check {
		return func(t *testing.T, st Step) {
			for _, p := range parts {
				if !strings.Contains(st.Why, p) {
					t.Errorf("Why %q does not say %q", st.Why, p)
				}
			}
		}
	}
	wantRequeue := func(d time.Duration) check {
		return func(t *testing.T, st Step) {
			if st.RequeueAfter != d {
				t.Errorf("RequeueAfter = %s, want %s", st.RequeueAfter, d)
			}
		}
	}
	wantWaiting := func(reason, part string) check {
		return func(t *testing.T, st Step) {
			if st.Waiting.Reason != reason || !strings.Contains(st.Waiting.Message, part) {
				t.Errorf("Waiting = %+v, want reason %s saying %q", st.Waiting, reason, part)
			}
		}
	}
	wantChanged := func(field string) check {
		return func(t *testing.T, st Step) {
			if !slices.Contains(st.Changed, field) {
				t.Errorf("Changed = %v, want %s among them", st.Changed, field)
			}
		}
	}
	staleAttempt := stepJob(placed, running, func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2" })
	cases := map[string]struct {
		state  State
		config func(*Config)
		want   Kind
		checks []check
	}{
		// Gone or going.
		"a Job that is gone: its mirror is deleted": {
			state: State{Now: stepNow}, want: StepFinalize,
		},
		"a Job being deleted: its mirror is deleted": {
			state: State{Now: stepNow, Job: stepJob(placed, func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: stepNow} })},
			want:  StepFinalize,
		},
		// Unplaced.
		"a held Job is placed": {
			state: State{Now: stepNow, Job: stepJob()}, want: StepPlace,
		},
		"a Job with completions 0 completes on the manager": {
			state: State{Now: stepNow, Job: stepJob(func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](0) })},
			want:  StepComplete,
		},
		"a Job the policy refuses says why and is looked at again in a minute": {
			state: State{Now: stepNow, Job: stepJob(), Refusal: &Refusal{Rule: admission.RuleNamespaceOptIn, Message: "not opted in"}},
			want:  StepNotAllowed, checks: []check{wantRequeue(time.Minute), wantWaiting(ReasonNotAllowed, "rule: namespace opt-in")},
		},
		"a Job its user suspended waits, saying so": {
			state: State{Now: stepNow, Job: stepJob(func(j *batchv1.Job) { delete(j.Annotations, v1alpha1.HeldForPlacementAnnotation) })},
			want:  StepShowWaiting, checks: []check{wantWaiting(reasonJobSuspended, "Job suspended")},
		},
		"a Job whose placement was rejected is not placed again until it changes": {
			state: State{Now: stepNow, Job: stepJob(), Blocked: map[Write]bool{WritePlacement: true}},
			want:  StepNone,
		},
		"an unplaced finished Job: nothing to do": {
			state: State{Now: stepNow, Job: stepJob(complete)}, want: StepNone,
		},
		// Placed, no mirror yet.
		"placed: the mirror is created": {
			state: connectedState(stepJob(placed), nil), want: StepCreateMirror,
		},
		"a mirror this manager just created, not in the worker's cache yet: wait for it": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.MirrorExpected = true
				return s
			}(),
			want: StepNone, checks: []check{wantRequeue(5 * time.Second)},
		},
		"a same-named Job not created by jobferry: name conflict": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Foreign = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "someone-else"}}
				return s
			}(),
			want: StepNameConflict, checks: []check{wantWhy("not created by jobferry exists on w1", "placed elsewhere")},
		},
		"the worker no longer takes the Job's namespace: released": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Connection.MayUse, s.Connection.Namespaces = false, []string{"team-b"}
				return s
			}(),
			want: StepRelease, checks: []check{wantWhy("takes Jobs from namespaces team-b only")},
		},
		"the worker's credential may not create Jobs there: released": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Connection.MirrorsForbidden = "its credential may not create batch/jobs"
				return s
			}(),
			want: StepRelease, checks: []check{wantWhy("w1:", "placed again", v1alpha1.ConditionAuthorized)},
		},
		"a mirror the worker rejected is not created again until the Job changes": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Blocked = map[Write]bool{WriteMirror: true}
				return s
			}(),
			want: StepNone,
		},
		"the finished Job's mirror is gone: nothing to do": {
			state: connectedState(stepJob(placed, complete), nil), want: StepNone,
		},
		"the cache lags behind the finished status this manager wrote: no second mirror": {
			state: func() State {
				s := connectedState(stepJob(placed, running), nil)
				s.WroteFinished = true
				return s
			}(),
			want: StepNone,
		},
		// Fencing.
		"a mirror of an earlier attempt is fenced": {
			state: connectedState(staleAttempt, mirrorOf(t, stepJob(placed))),
			want:  StepFence, checks: []check{wantRequeue(time.Second)},
		},
		"a mirror of an earlier Job of the same name is fenced": {
			state: connectedState(stepJob(placed), mirrorOf(t, stepJob(placed, func(j *batchv1.Job) { j.UID = "uid-0" }))),
			want:  StepFence,
		},
		"a fenced mirror being deleted: wait for it": {
			state: connectedState(staleAttempt, mirrorOf(t, stepJob(placed), func(m *batchv1.Job) { m.DeletionTimestamp = &metav1.Time{Time: stepNow} })),
			want:  StepNone, checks: []check{wantRequeue(time.Second)},
		},
		// Running.
		"placed by an earlier version and still held: activated": {
			state: connectedState(stepJob(func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w1" }), mirrorOf(t, stepJob(placed))),
			want:  StepActivate,
		},
		"the user suspends the Job: the mirror is suspended": {
			state: connectedState(stepJob(placed, running, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }), mirrorOf(t, stepJob(placed, running), running)),
			want:  StepUpdateMirror,
			checks: []check{func(t *testing.T, st Step) {
				if !ptr.Deref(st.Mirror.Spec.Suspend, false) || len(st.Changed) != 1 || st.Changed[0] != "suspend" {
					t.Errorf("mirror update suspend=%v changed=%v, want suspend only", st.Mirror.Spec.Suspend, st.Changed)
				}
			}},
		},
		"a new parallelism is carried to the mirror": {
			state: connectedState(stepJob(placed, running, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }), mirrorOf(t, stepJob(placed, running), running)),
			want:  StepUpdateMirror,
			checks: []check{func(t *testing.T, st Step) {
				if ptr.Deref(st.Mirror.Spec.Parallelism, 0) != 3 {
					t.Errorf("mirror parallelism = %v, want 3", st.Mirror.Spec.Parallelism)
				}
			}},
		},
		"a spec change the worker rejected is not carried again": {
			state: func() State {
				s := connectedState(stepJob(placed, running, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }), mirrorOf(t, stepJob(placed, running), running))
				s.Blocked = map[Write]bool{WriteMirrorSpec: true}
				return s
			}(),
			want: StepNone,
		},
		"a template that cannot take the worker's directives: invalid mirror": {
			state: func() State {
				job := stepJob(placed, func(j *batchv1.Job) {
					j.Spec.Suspend = ptr.To(true)
					j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "cpu"}
				})
				s := connectedState(job, mirrorOf(t, stepJob(placed), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }))
				s.WorkerCluster = workerCluster(func(wc *v1alpha1.WorkerCluster) {
					wc.Spec.Scheduling.NodeSelector = map[string]string{"pool": "gpu"}
				})
				return s
			}(),
			want: StepInvalidMirror, checks: []check{wantWhy("cannot carry the new spec to the mirror on w1", "conflicts")},
		},
		"the mirror's pods started while the manager copies many statuses: the copy waits for the batch period": {
			state: func() State {
				s := connectedState(stepJob(placed), mirrorOf(t, stepJob(placed), running))
				s.MirrorChangeSeen = stepNow.Add(-300 * time.Millisecond)
				return s
			}(),
			want: StepNone, checks: []check{wantRequeue(700 * time.Millisecond)},
		},
		"the mirror's pods started on a quiet manager: the running status is copied at once": {
			state: func() State {
				s := connectedState(stepJob(placed), mirrorOf(t, stepJob(placed), running))
				s.MirrorChangeSeen, s.QuietCopying = stepNow.Add(-10*time.Millisecond), true
				return s
			}(),
			want: StepCopyStatus,
		},
		"after the batch period the running status is copied": {
			state: func() State {
				s := connectedState(stepJob(placed), mirrorOf(t, stepJob(placed), running))
				s.MirrorChangeSeen = stepNow.Add(-time.Second)
				return s
			}(),
			want: StepCopyStatus,
			checks: []check{func(t *testing.T, st Step) {
				if st.Final || st.Status.Active != 1 || st.Status.StartTime == nil {
					t.Errorf("copied status final=%t active=%d startTime=%v, want a running status", st.Final, st.Status.Active, st.Status.StartTime)
				}
			}},
		},
		"a final status is copied at once": {
			state: func() State {
				s := connectedState(stepJob(placed, running), mirrorOf(t, stepJob(placed), complete))
				s.MirrorChangeSeen = stepNow.Add(-10 * time.Millisecond)
				return s
			}(),
			want: StepCopyStatus,
			checks: []check{func(t *testing.T, st Step) {
				if !st.Final || !jobstatus.ConditionTrue(st.Status, batchv1.JobComplete) || !jobstatus.ConditionTrue(st.Status, batchv1.JobSuccessCriteriaMet) {
					t.Errorf("copied status final=%t conditions=%v, want Complete with SuccessCriteriaMet", st.Final, st.Status.Conditions)
				}
			}},
		},
		"the same status on both sides: nothing to do, and no change waiting": {
			state: connectedState(stepJob(placed, running), mirrorOf(t, stepJob(placed), running)),
			want:  StepNone,
			checks: []check{func(t *testing.T, st Step) {
				if !st.InSync {
					t.Errorf("InSync is false: the change seen would start the next batch wait")
				}
			}},
		},
		"the final status is copied: the mirror stays until the Job is deleted": {
			state: connectedState(stepJob(placed, complete), mirrorOf(t, stepJob(placed), complete)),
			want:  StepNone,
		},
		"the final status is copied, finished mirrors are deleted: the mirror is deleted": {
			state:  connectedState(stepJob(placed, complete), mirrorOf(t, stepJob(placed), complete)),
			config: func(c *Config) { c.DeleteFinishedMirrors = true },
			want:   StepDeleteMirror,
		},
		// jobferry's state is jobferry's (issue 23 item 1): a tenant who
		// writes it steers nothing.
		"state not written by the manager (a placement, a raised attempt): nothing is done, and it says so": {
			state: State{Now: stepNow, Job: stepJob(placed, running), Untrusted: []string{v1alpha1.WorkerAnnotation, v1alpha1.StateSealAnnotation}},
			want:  StepUntrusted, checks: []check{wantWhy("annotations jobferry.dev/worker, jobferry.dev/state-seal", "does not act on it", "delete the Job")},
		},
		"untrusted state already reported for this version of the Job: quiet": {
			state: State{Now: stepNow, Job: stepJob(placed), Untrusted: []string{v1alpha1.WorkerAnnotation}, Blocked: map[Write]bool{NoticeUntrusted: true}},
			want:  StepNone, checks: []check{wantRequeue(0)},
		},
		"a Job being deleted is let go whatever its state": {
			state: State{Now: stepNow, Job: stepJob(placed, func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: stepNow} }), Untrusted: []string{v1alpha1.WorkerAnnotation}},
			want:  StepFinalize,
		},
		// A Job over what the cache keeps of one (issue 44) is its
		// identity only: nothing is decided from it but its deletion.
		"over the cache's budget: nothing is done, and it says so": {
			state: State{Now: stepNow, Job: stepJob(placed, running), OverBudget: "spec.template.spec.tolerations takes ..."},
			want:  StepOverBudget, checks: []check{wantWhy("holds more than jobferry keeps", "spec.template.spec.tolerations takes", "delete the Job")},
		},
		"over the cache's budget, already said for this version of the Job: quiet": {
			state: State{Now: stepNow, Job: stepJob(placed), OverBudget: "status takes ...", Blocked: map[Write]bool{NoticeOverBudget: true}},
			want:  StepNone, checks: []check{wantRequeue(0)},
		},
		"over the cache's budget and being deleted: let go": {
			state: State{Now: stepNow, Job: stepJob(placed, func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: stepNow} }), OverBudget: "status takes ..."},
			want:  StepFinalize,
		},
		// Someone who may write the mirror's status (a Job controller
		// writes none so large) cannot freeze the manager Job by it.
		"a mirror's status over what jobferry keeps of a Job's: not copied, and it says so": {
			state: connectedState(stepJob(placed, running), mirrorOf(t, stepJob(placed), running, func(m *batchv1.Job) {
				m.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: make([]types.UID, cachebudget.JobStatus.Entries+1)}
			})),
			want: StepOverBudget, checks: []check{wantWhy("the status of its mirror on w1 holds more than jobferry keeps", "it is not copied")},
		},
		"state an earlier manager wrote unsealed: sealed first": {
			state: State{Now: stepNow, Job: stepJob(placed, running), Legacy: true}, want: StepRecord,
			checks: []check{func(t *testing.T, st Step) {
				if st.MirrorUID != "" {
					t.Errorf("records mirror UID %q, want the state sealed as it is", st.MirrorUID)
				}
			}},
		},
		"its state removed while its mirror runs on a worker: not placed again": {
			state: State{Now: stepNow, Job: stepJob(func(j *batchv1.Job) {
				j.Spec.Suspend = ptr.To(false)
				delete(j.Annotations, v1alpha1.HeldForPlacementAnnotation)
			}),
				Stray: &StrayMirror{Worker: "w2", Attempt: 1, UID: "mirror-uid"}},
			want: StepStray, checks: []check{wantWhy("attempt 1, UID mirror-uid", "on w2", "records attempt 0", "removed or rolled back", "jobferry does not act on this Job"), wantRequeue(30 * time.Second)},
		},
		"a stray mirror already reported: no new Event, looked at again": {
			state: State{Now: stepNow, Job: stepJob(), Stray: &StrayMirror{Worker: "w2", Attempt: 1}, Blocked: map[Write]bool{NoticeStray: true}},
			want:  StepNone, checks: []check{wantRequeue(30 * time.Second)},
		},
		"its mirror running, but a later attempt's mirror runs elsewhere (an earlier state written back): the earlier attempt's mirror fenced": {
			state: func() State {
				job := stepJob(placed)
				s := connectedState(job, mirrorOf(t, job, running))
				s.Stray = &StrayMirror{Worker: "w2", Attempt: 2, UID: "later"}
				return s
			}(),
			want: StepFence, checks: []check{wantWhy("its mirror of attempt 1 on w1 was deleted: a mirror of a later attempt (2, on w2) exists")},
		},
		"its earlier mirror gone, a later attempt's mirror runs elsewhere: nothing done, no status copied": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Stray = &StrayMirror{Worker: "w2", Attempt: 2, UID: "later"}
				return s
			}(),
			want: StepStray, checks: []check{wantWhy("attempt 2, UID later", "records attempt 1")},
		},
		"its state records a lower attempt than this manager saw: nothing done": {
			state: func() State {
				job := stepJob(placed)
				s := connectedState(job, mirrorOf(t, job, running))
				s.RolledBackFrom = 2
				return s
			}(),
			want: StepStray, checks: []check{wantWhy("records attempt 1, but this manager saw it record attempt 2")},
		},
		"its worker down, a later attempt's mirror runs elsewhere: not waited for": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Connection = Connection{}
				s.Stray = &StrayMirror{Worker: "w2", Attempt: 2, UID: "later"}
				return s
			}(),
			want: StepStray,
		},
		"placed, but a later attempt's mirror it does not record runs elsewhere: no mirror created": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Stray = &StrayMirror{Worker: "w2", Attempt: 4, UID: "other"}
				return s
			}(),
			want: StepStray,
		},
		"a placed Job the policy refuses now (its namespace opted out since): no mirror is created": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.Refusal = &Refusal{Rule: admission.RulePodSecurity, Message: "violates PodSecurity"}
				return s
			}(),
			want: StepNotAllowed, checks: []check{wantWaiting(ReasonNotAllowed, "rule: Pod Security")},
		},
		"placed, but the worker no longer admits its pods: placed again": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.WorkerRejects = `its namespace team-a enforces PodSecurity "baseline:latest", weaker than "restricted:latest" on the manager`
				return s
			}(),
			want: StepRelease, checks: []check{wantWhy("may no longer take this Job", "baseline")},
		},
		// The mirror is the one jobferry created (issue 23 item 6).
		"the mirror just created is recorded before the worker's cache shows it": {
			state: func() State {
				s := connectedState(stepJob(placed), nil)
				s.MirrorExpected, s.CreatedMirrorUID = true, "created-uid"
				return s
			}(),
			want: StepRecord, checks: []check{func(t *testing.T, st Step) {
				if st.MirrorUID != "created-uid" {
					t.Errorf("records %q, want created-uid", st.MirrorUID)
				}
			}},
		},
		"the mirror this manager created shows in the cache unrecorded: recorded": {
			state: func() State {
				s := connectedState(stepJob(placed), mirrorOf(t, stepJob(placed)))
				s.MirrorUID, s.CreatedMirrorUID = "", "mirror-uid"
				return s
			}(),
			want: StepRecord,
		},
		"a mirror an earlier manager created, on a Job older than the key: adopted": {
			state: func() State {
				s := connectedState(stepJob(placed), mirrorOf(t, stepJob(placed)))
				s.MirrorUID, s.AdoptMirror = "", true
				return s
			}(),
			want: StepRecord,
		},
		"a Job with the mirror's labels but another UID: not copied, dispatched again": {
			state: func() State {
				s := connectedState(stepJob(placed, running), mirrorOf(t, stepJob(placed), complete, func(m *batchv1.Job) { m.UID = "impostor" }))
				s.MirrorUID = "mirror-uid"
				return s
			}(),
			want: StepMirrorNotOurs, checks: []check{wantWhy("team-a/train on w1", "UID impostor, not mirror-uid", "not copied", "attempt 2")},
		},
		"an unrecorded Job with the mirror's labels, while this manager created another: not ours": {
			state: func() State {
				s := connectedState(stepJob(placed), mirrorOf(t, stepJob(placed)))
				s.MirrorUID, s.CreatedMirrorUID = "", "created-uid"
				return s
			}(),
			want: StepMirrorNotOurs, checks: []check{wantWhy("none recorded")},
		},
		"a manager restarted between creating the mirror and recording it: adopted": {
			state: func() State {
				s := connectedState(stepJob(placed), mirrorOf(t, stepJob(placed)))
				s.MirrorUID, s.AdoptMirror = "", true
				return s
			}(),
			want: StepRecord,
		},
		"the mirror deleted on the worker: an Event and a new attempt, not a silent restart": {
			state: func() State {
				s := connectedState(stepJob(placed, running), nil)
				s.MirrorUID = "mirror-uid"
				return s
			}(),
			want: StepMirrorGone, checks: []check{wantWhy("(UID mirror-uid) was deleted there", "attempt 2")},
		},
		"the mirror out of the cache's sight, still on the worker: fenced first, saying why": {
			state: func() State {
				s := connectedState(stepJob(placed, running), nil)
				s.MirrorUID = "mirror-uid"
				s.HiddenMirror = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "mirror-uid"}}
				return s
			}(),
			want: StepFence, checks: []check{wantWhy("(UID mirror-uid) is no longer seen as jobferry's there", "it is deleted"), func(t *testing.T, st Step) {
				if st.Mirror == nil || st.Mirror.UID != "mirror-uid" {
					t.Errorf("fences %v, want the recorded mirror", st.Mirror)
				}
			}},
		},
		"the hidden mirror gone once fenced: a new attempt, saying jobferry deleted it": {
			state: func() State {
				s := connectedState(stepJob(placed, running), nil)
				s.MirrorUID, s.MirrorFenced = "mirror-uid", true
				return s
			}(),
			want: StepMirrorGone, checks: []check{wantWhy("(UID mirror-uid), deleted by jobferry as no longer seen as jobferry's there", "attempt 2")},
		},
		"the hidden mirror being deleted: wait for it": {
			state: func() State {
				s := connectedState(stepJob(placed, running), nil)
				s.MirrorUID = "mirror-uid"
				s.HiddenMirror = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "mirror-uid", DeletionTimestamp: &metav1.Time{}}}
				return s
			}(),
			want: StepNone,
		},
		"a finished Job's mirror deleted: nothing to do": {
			state: func() State {
				s := connectedState(stepJob(placed, complete), nil)
				s.MirrorUID = "mirror-uid"
				return s
			}(),
			want: StepNone,
		},
		// Template carries hold to the policy (issue 23 item 4).
		"a suspended Job's template changed to one the policy refuses: not carried": {
			state: func() State {
				job := stepJob(placed, func(j *batchv1.Job) {
					j.Spec.Suspend = ptr.To(true)
					j.Spec.Template.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/work": "unconfined"}
				})
				s := connectedState(job, mirrorOf(t, stepJob(placed), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }))
				s.Refusal = &Refusal{Rule: admission.RulePodSecurity, Message: `violates PodSecurity "baseline:latest": forbidden AppArmor profile`}
				return s
			}(),
			want: StepInvalidMirror, checks: []check{wantWhy("not carried to the mirror on w1", "rule: Pod Security", "AppArmor")},
		},
		"a suspended Job's template changed to one no pool of the worker accepts: not carried": {
			state: func() State {
				job := stepJob(placed, func(j *batchv1.Job) {
					j.Spec.Suspend = ptr.To(true)
					j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				})
				s := connectedState(job, mirrorOf(t, stepJob(placed), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }))
				s.WorkerRejects = "pool general: labels do not match the nodeSelector or required node affinity"
				return s
			}(),
			want: StepInvalidMirror, checks: []check{wantWhy("not carried", "pool general")},
		},
		// The worker's version decides whether a started Job's template
		// may change (MutableSchedulingDirectivesForSuspendedJobs, v1.36).
		"a started, suspended Job's template changed: carried to a v1.36 worker": {
			state:  startedSuspended(t, "v1.36.3", true, true),
			want:   StepUpdateMirror,
			checks: []check{wantChanged("template")},
		},
		"... not to an older worker, whose API server would refuse it, saying why": {
			state:  startedSuspended(t, "v1.32.13", false, true),
			want:   StepInvalidMirror,
			checks: []check{wantWhy("not carried to the mirror on w1", "Kubernetes v1.32.13", "from v1.36")},
		},
		"... and not resumed with the template it has": {
			state:  startedSuspended(t, "v1.32.13", false, false),
			want:   StepInvalidMirror,
			checks: []check{wantWhy("not carried to the mirror on w1", "Kubernetes v1.32.13")},
		},
		"a refused namespace does not stop a running Job's other changes": {
			state: func() State {
				s := connectedState(stepJob(placed, running, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }), mirrorOf(t, stepJob(placed, running), running))
				s.Refusal = &Refusal{Rule: admission.RuleNamespaceOptIn, Message: "not opted in"}
				return s
			}(),
			want: StepUpdateMirror,
		},
		// The worker is down.
		"a worker disconnected for less than the timeout: wait, saying so": {
			state: State{Job: stepJob(placed), Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(disconnectedFor(time.Minute))},
			want:  StepShowWaiting, checks: []check{wantRequeue(10 * time.Second), wantWaiting(ReasonWorkerNotConnected, "not connected")},
		},
		"a running Job on a worker disconnected briefly: wait quietly": {
			state: State{Job: stepJob(placed, running), Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(disconnectedFor(15*time.Minute - 5*time.Second))},
			want:  StepNone, checks: []check{wantRequeue(6 * time.Second)},
		},
		"a worker lost for the timeout: dispatched elsewhere with the next attempt": {
			state: State{Job: stepJob(placed, running), Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(disconnectedFor(20 * time.Minute))},
			want:  StepRedispatch, checks: []check{wantWhy("unreachable for 20m0s", "attempt 2")},
		},
		"a worker whose WorkerCluster was deleted lately: its mirror may run, the Job waits": {
			state: State{Job: stepJob(placed, running), Now: stepNow, Worker: "w1", WorkerGoneSince: stepNow.Add(-time.Minute)},
			want:  StepNone, checks: []check{wantRequeue(10 * time.Second)},
		},
		"a worker whose WorkerCluster was deleted, nothing ran: it says so": {
			state: State{Job: stepJob(placed), Now: stepNow, Worker: "w1", WorkerGoneSince: stepNow.Add(-time.Minute)},
			want:  StepShowWaiting, checks: []check{wantWaiting(ReasonWorkerNotConnected, "its WorkerCluster was deleted; after 15m0s it is placed elsewhere")},
		},
		"a worker whose WorkerCluster was deleted the timeout ago is lost": {
			state: State{Job: stepJob(placed, running), Now: stepNow, Worker: "w1", WorkerGoneSince: stepNow.Add(-15 * time.Minute)},
			want:  StepRedispatch,
		},
		"a worker that refuses the credential answers: its Job waits for it, however long": {
			state: State{Job: stepJob(placed, running), Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(func(wc *v1alpha1.WorkerCluster) {
				disconnectedFor(time.Hour)(wc)
				wc.Status.Conditions[0].Reason = v1alpha1.ReasonCredentialRejected
			})},
			want: StepNone, checks: []check{wantRequeue(10 * time.Second)},
		},
		"a Job placed on a worker that refuses the credential, nothing ran: it says why": {
			state: State{Job: stepJob(placed), Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(func(wc *v1alpha1.WorkerCluster) {
				disconnectedFor(time.Hour)(wc)
				wc.Status.Conditions[0].Reason = v1alpha1.ReasonCredentialRejected
				wc.Status.Conditions[0].Message = "refuses the credential (401 Unauthorized)"
			})},
			want: StepShowWaiting, checks: []check{wantWaiting(ReasonWorkerNotConnected, "not connected (CredentialRejected: refuses the credential (401 Unauthorized)); the Job waits")},
		},
		"a Job that asks to wait for its lost worker waits": {
			state: State{Job: stepJob(placed, running, func(j *batchv1.Job) { j.Annotations[v1alpha1.OnWorkerLostAnnotation] = v1alpha1.OnWorkerLostWait }),
				Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(disconnectedFor(time.Hour))},
			want: StepWorkerLostWait, checks: []check{wantRequeue(time.Minute), wantWhy("asks to wait")},
		},
		"a finished Job on a lost worker: nothing until it is back": {
			state: State{Job: stepJob(placed, complete), Now: stepNow, Worker: "w1", WorkerCluster: workerCluster(disconnectedFor(time.Hour))},
			want:  StepNone, checks: []check{wantRequeue(0)},
		},
		// Queued by Kueue (queuedstep.go).
		"queued, no Workload yet: waits for Kueue to make it": {
			state: queuedState(stepJob(queued), nil), want: StepNone,
		},
		"queued, quota not reserved: waits for Kueue": {
			state: queuedState(stepJob(queued), workloadView()), want: StepShowWaiting,
			checks: []check{wantWaiting(ReasonQueued, "waiting for Kueue to reserve quota")},
		},
		"queued, Kueue evicting it (quota still reserved, the check Pending again): waits": {
			state: queuedState(stepJob(queued), workloadView(reserved, evicted)), want: StepShowWaiting,
			checks: []check{wantWaiting(ReasonQueued, "waiting for Kueue to reserve quota")},
		},
		"queued and placed, Kueue evicting it before it started: the placement goes": {
			state: queuedPlacedState(stepJob(queued, queuedPlaced), nil, workloadView(reserved, evicted)),
			want:  StepRequeue,
		},
		"queued, quota reserved with jobferry's check Pending: placed": {
			state: queuedState(stepJob(queued), workloadView(reserved)), want: StepPlace,
		},
		"queued in a ClusterQueue without jobferry's check: waits for admission": {
			state: queuedState(stepJob(queued), workloadView(reserved, withoutCheck)), want: StepShowWaiting,
			checks: []check{wantWaiting(ReasonQueued, "names none of jobferry's admission checks")},
		},
		"queued, its checks not listed yet, quota not reserved: waits for quota": {
			state: queuedState(stepJob(queued), workloadView(checksNotListed)), want: StepShowWaiting,
			checks: []check{wantWaiting(ReasonQueued, "waiting for Kueue to reserve quota")},
		},
		"queued, quota reserved before Kueue listed the checks: nothing until it has": {
			state: queuedState(stepJob(queued), workloadView(reserved, checksNotListed)), want: StepNone,
		},
		"queued in a ClusterQueue without jobferry's check, admitted: placed": {
			state: queuedState(stepJob(queued), workloadView(reserved, withoutCheck, admitted)), want: StepPlace,
		},
		"queued, the check Ready but the placement let go: the check turns Retry": {
			state: queuedState(stepJob(queued, func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1" }), workloadView(reserved, admitted, checkState(kueue.CheckStateReady))),
			want:  StepSetCheck, checks: []check{wantCheck(kueue.CheckStateRetry, "let the placement of attempt 1 go")},
		},
		"queued, the check Ready on a Workload Kueue preempted before admitting it (the placement let go): the check turns Pending": {
			state: queuedState(stepJob(queued, func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1" }), workloadView(evicted, checkState(kueue.CheckStateReady))),
			want:  StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "took the quota of attempt 1 back")},
		},
		"queued, the check Ready while Kueue is still evicting it: the check turns Pending": {
			state: queuedState(stepJob(queued), workloadView(reserved, evicted, checkState(kueue.CheckStateReady))),
			want:  StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "once Kueue reserves quota again")},
		},
		"queued, the check Ready on a Workload without quota: the check turns Pending": {
			state: queuedState(stepJob(queued), workloadView(checkState(kueue.CheckStateReady))),
			want:  StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "once Kueue reserves quota again")},
		},
		"queued, the check Retry on a Workload Kueue evicted already (Kueue would never act on it): the check turns Pending": {
			state: queuedState(stepJob(queued), workloadView(evicted, checkState(kueue.CheckStateRetry))),
			want:  StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "once Kueue reserves quota again")},
		},
		"queued, a stale check the API server refused to change for this Job: nothing": {
			state: func() State {
				s := queuedState(stepJob(queued), workloadView(evicted, checkState(kueue.CheckStateRetry)))
				s.Blocked = map[Write]bool{WriteCheck: true}
				return s
			}(),
			want: StepNone,
		},
		"queued, evicted after a Retry, with pods of the lost worker counted: they are uncounted": {
			state: queuedState(stepJob(queued, running), workloadView(reserved, evicted)),
			want:  StepCopyStatus, checks: []check{func(t *testing.T, st Step) {
				if st.Status.Active != 0 || *st.Status.Ready != 0 || st.Status.StartTime == nil {
					t.Errorf("status %+v still counts pods, or lost its startTime (Kueue resets it)", st.Status)
				}
			}},
		},
		"queued, Retry, nothing counted: waits for Kueue to queue it again": {
			state: queuedState(stepJob(queued), workloadView(checkState(kueue.CheckStateRetry))), want: StepShowWaiting,
			checks: []check{wantWaiting(ReasonQueued, "Kueue queues it again")},
		},
		"queued, deactivated by Kueue after jobferry's check rejected it: the Job keeps saying why": {
			state: queuedState(stepJob(queued, func(j *batchv1.Job) {
				j.Status, _ = PendingStatus(j.Status, WaitingForWorker(ReasonNoWorkerCanRun, "no worker cluster could ever run this Job"), stepNow)
			}), workloadView(deactivated)),
			want: StepNone,
		},
		"queued, deactivated by its administrator: says so": {
			state: queuedState(stepJob(queued), workloadView(deactivated)), want: StepShowWaiting,
			checks: []check{wantWaiting(ReasonQueued, "Kueue does not queue it (deactivated: spec.active is false)")},
		},
		"queued, Rejected: says no worker can run it": {
			state: queuedState(stepJob(queued), workloadView(checkState(kueue.CheckStateRejected), func(v *workload.View) { v.Message = "no worker cluster could ever run this Job" })),
			want:  StepShowWaiting, checks: []check{wantWaiting(ReasonNoWorkerCanRun, "could ever run")},
		},
		"queued, seen for the first time: recorded as queued before anything else": {
			state: func() State {
				s := queuedState(stepJob(queued), workloadView())
				s.RecordedQueue = ""
				return s
			}(),
			want: StepRecord, checks: []check{func(t *testing.T, st Step) {
				if st.RecordQueue != "team" || st.MirrorUID != "" {
					t.Errorf("records queue %q (mirror UID %q), want team only", st.RecordQueue, st.MirrorUID)
				}
			}},
		},
		"seen queued, its queue label removed while it waits: never dispatched outside Kueue": {
			state: func() State {
				s := queuedState(stepJob(), nil)
				s.Queue = nil
				return s
			}(),
			want: StepShowWaiting, checks: []check{wantWaiting(ReasonQueueLabelRemoved, "was queued in Kueue's LocalQueue team and its label kueue.x-k8s.io/queue-name was removed")},
		},
		"seen queued and placed, its label removed before Kueue admitted it: not activated, no mirror": {
			state: func() State {
				s := queuedPlacedState(stepJob(queuedPlaced, func(j *batchv1.Job) { j.Annotations[v1alpha1.HeldForPlacementAnnotation] = "true" }), nil, workloadView())
				s.Queue = nil
				return s
			}(),
			want: StepShowWaiting, checks: []check{wantWaiting(ReasonQueueLabelRemoved, "set the label again (kueue.x-k8s.io/queue-name=team)")},
		},
		"seen queued, its label removed, the manager no longer runs with Kueue: dispatched as any Job": {
			state: func() State {
				s := queuedState(stepJob(), nil)
				s.Queue, s.KueueMode = nil, false
				return s
			}(),
			want: StepPlace,
		},
		"queued and placed, unsuspended while Kueue evicts it (Admitted kept while evicting): no mirror": {
			state: poolGeneral(queuedPlacedState(stepJob(queued, queuedPlaced, unsuspended), nil, workloadView(reserved, admitted, evicted, checkState(kueue.CheckStateReady)))),
			want:  StepNone, checks: []check{wantRequeue(5 * time.Second)},
		},
		"queued, its mirror suspended by Kueue's eviction, unsuspended by its tenant: the mirror stays suspended": {
			state: func() State {
				job := stepJob(queued, queuedPlaced, unsuspended)
				m := mirrorOf(t, job, func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) })
				return queuedPlacedState(job, m, workloadView(reserved, admitted, evicted, checkState(kueue.CheckStateReady)))
			}(),
			want: StepNone,
		},
		"seen queued, its label removed, its mirror suspended; unsuspended and grown by its tenant: neither carried": {
			state: func() State {
				job := stepJob(queuedPlaced, unsuspended, func(j *batchv1.Job) { j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](100), ptr.To[int32](100) })
				m := mirrorOf(t, stepJob(queuedPlaced), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) })
				s := queuedPlacedState(job, m, workloadView())
				s.Queue = nil
				return s
			}(),
			want: StepNone,
		},
		"queued and placed, unsuspended by its tenant before Kueue admitted it: no mirror": {
			state: poolGeneral(queuedPlacedState(stepJob(queued, queuedPlaced, unsuspended), nil, workloadView(reserved, checkState(kueue.CheckStateReady)))),
			want:  StepNone, checks: []check{wantRequeue(5 * time.Second)},
		},
		"queued and placed, still suspended: the check turns Ready with the worker's directives": {
			state: poolGeneral(queuedPlacedState(stepJob(queued, queuedPlaced), nil, workloadView(reserved))),
			want:  StepSetCheck, checks: []check{wantCheck(kueue.CheckStateReady, "placed on worker cluster w1"), func(t *testing.T, st Step) {
				u := st.Check.Updates
				if len(u) != 1 || u[0].Name != kueue.DefaultPodSetName || u[0].NodeSelector["pool"] != "general" || u[0].Annotations[v1alpha1.WorkerAnnotation] != "w1" {
					t.Errorf("pod set updates %+v, want w1's nodeSelector and the worker annotation on pod set main", u)
				}
			}},
		},
		"queued and placed, the check Ready: waits for Kueue to admit it": {
			state: func() State {
				s := poolGeneral(queuedPlacedState(stepJob(queued, queuedPlaced), nil, workloadView(reserved, checkState(kueue.CheckStateReady))))
				s.Queue.Updates = workload.PlacementUpdates(s.Queue.PodSets, "w1", s.WorkerCluster.Spec.Scheduling)
				return s
			}(),
			want: StepNone,
		},
		"queued and placed, Kueue took the quota back before it started: the placement goes": {
			state: queuedPlacedState(stepJob(queued, queuedPlaced), nil, workloadView(checkState(kueue.CheckStatePending))),
			want:  StepRequeue, checks: []check{wantWhy("Kueue took back the quota of Workload job-train-1", "attempt 1 on w1")},
		},
		"queued and admitted: the mirror is created": {
			state: queuedPlacedState(stepJob(queued, queuedPlaced, unsuspended), nil, workloadView(reserved, admitted, checkState(kueue.CheckStateReady))),
			want:  StepCreateMirror,
		},
		"queued and still marked held for placement, suspended by Kueue: its mirror stays suspended": {
			state: func() State {
				job := stepJob(queued, queuedPlaced, running, func(j *batchv1.Job) { j.Annotations[v1alpha1.HeldForPlacementAnnotation] = "true" })
				return queuedPlacedState(job, mirrorOf(t, job, func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }, running),
					workloadView(reserved, admitted, checkState(kueue.CheckStateReady)))
			}(),
			want: StepNone, checks: []check{wantInSync},
		},
		"queued, suspended by Kueue while its mirror runs: the mirror is suspended": {
			state: func() State {
				job := stepJob(queued, queuedPlaced, running)
				return queuedPlacedState(job, mirrorOf(t, job, unsuspended), workloadView(checkState(kueue.CheckStatePending)))
			}(),
			want: StepUpdateMirror, checks: []check{func(t *testing.T, st Step) {
				if !ptr.Deref(st.Mirror.Spec.Suspend, false) {
					t.Error("the mirror is not suspended")
				}
			}},
		},
		"queued, evicted, the suspended mirror still has pods: its status is copied, nothing goes": {
			state: func() State {
				job := stepJob(queued, queuedPlaced, running)
				return queuedPlacedState(job, mirrorOf(t, job, running), workloadView(checkState(kueue.CheckStatePending)))
			}(),
			want: StepNone, checks: []check{wantInSync},
		},
		"queued, evicted, the suspended mirror drained: it and the placement go": {
			state: func() State {
				job := stepJob(queued, queuedPlaced)
				return queuedPlacedState(job, mirrorOf(t, job), workloadView(checkState(kueue.CheckStatePending)))
			}(),
			want: StepRequeue, checks: []check{func(t *testing.T, st Step) {
				if st.Mirror == nil {
					t.Error("the drained mirror is not deleted with the placement")
				}
			}},
		},
	}
	covered := map[Kind]bool{}
	for _, tc := range cases {
		covered[tc.want] = true
	}
	for kind := range stepNames {
		if !covered[kind] {
			t.Errorf("no case decides %s", kind)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.state.Job.DeepCopy()
			cfg := testStepConfig
			if tc.config != nil {
				tc.config(&cfg)
			}
			st := Next(tc.state, cfg)
			if st.Kind != tc.want {
				t.Fatalf("step %s (%+v), want %s", st.Kind, st, tc.want)
			}
			for _, c := range tc.checks {
				c(t, st)
			}
			if tc.state.Job != nil && tc.state.Job.String() != before.String() {
				t.Errorf("Next modified the Job")
			}
		})
	}
}

// queued names a LocalQueue on the Job.
func queued(job *batchv1.Job) {
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[workload.NameLabel] = "team"
}

// queuedPlaced is a queued Job as PlacedQueuedJob leaves it on w1: placed,
// still suspended (Kueue unsuspends it).
func queuedPlaced(job *batchv1.Job) {
	job.Annotations[v1alpha1.WorkerAnnotation] = "w1"
	job.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1"
	delete(job.Annotations, v1alpha1.HeldForPlacementAnnotation)
}

func unsuspended(job *batchv1.Job) { job.Spec.Suspend = ptr.To(false) }

// workloadView is the View of a queued Job's Workload job-train-1, with
// jobferry's check "dispatch" Pending, as mutated.
func workloadView(mutate ...func(*workload.View)) *workload.View {
	v := &workload.View{Queue: "team", Workload: "job-train-1", PodSets: []kueue.PodSetReference{kueue.DefaultPodSetName},
		Check: "dispatch", State: kueue.CheckStatePending, ChecksListed: true}
	for _, m := range mutate {
		m(v)
	}
	return v
}

func reserved(v *workload.View)    { v.QuotaReserved = true }
func admitted(v *workload.View)    { v.Admitted = true }
func evicted(v *workload.View)     { v.Evicted = true }
func deactivated(v *workload.View) { v.Deactivated, v.Why = true, "spec.active is false" }

// withoutCheck: the Workload lists checks, none of them jobferry's.
func withoutCheck(v *workload.View) { v.Check, v.State = "", "" }

// checksNotListed: Kueue has not listed the ClusterQueue's checks yet.
func checksNotListed(v *workload.View) { v.Check, v.State, v.ChecksListed = "", "", false }
func checkState(state kueue.CheckState) func(*workload.View) {
	return func(v *workload.View) { v.State = state }
}

// queuedState is the state of an unplaced queued Job; nil v: Kueue made no
// Workload yet.
func queuedState(job *batchv1.Job, v *workload.View) State {
	if v == nil {
		v = &workload.View{Queue: "team"}
	}
	return State{Job: job, Now: stepNow, Queue: v, KueueMode: true, RecordedQueue: v.Queue}
}

// queuedPlacedState is the state of a queued Job placed on w1, which is
// connected.
func queuedPlacedState(job, m *batchv1.Job, v *workload.View) State {
	s := connectedState(job, m)
	s.Queue, s.KueueMode, s.RecordedQueue = v, true, v.Queue
	return s
}

// poolGeneral gives w1 the scheduling directive nodeSelector pool=general.
func poolGeneral(s State) State {
	s.WorkerCluster.Spec.Scheduling.NodeSelector = map[string]string{"pool": "general"}
	return s
}

func wantCheck(state kueue.CheckState, part string) func(*testing.T, Step) {
	return func(t *testing.T, st Step) {
		if st.Check.State != state || !strings.Contains(st.Check.Message, part) {
			t.Errorf("check %s %q, want %s saying %q", st.Check.State, st.Check.Message, state, part)
		}
	}
}

func wantInSync(t *testing.T, st Step) {
	if !st.InSync {
		t.Errorf("step %s is not in sync", st.Kind)
	}
}
