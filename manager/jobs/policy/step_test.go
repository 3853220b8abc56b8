package policy_test

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
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// startedSuspended is a placed Job whose mirror started and is suspended
// now, the Job's node selector changed since (and the Job suspended, or
// resumed), on a worker of that version.
func startedSuspended(t *testing.T, version string, startedMayChange, stillSuspended bool) policy.State {
	job := policytest.Job(policytest.Placed, func(j *batchv1.Job) {
		j.Spec.Suspend = ptr.To(stillSuspended)
		j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "b"}
	})
	m := policytest.MirrorOf(t, policytest.Job(policytest.Placed), func(m *batchv1.Job) {
		m.Spec.Suspend = ptr.To(true)
		m.Status.StartTime = &metav1.Time{Time: policytest.Now.Add(-time.Hour)}
		m.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}
	})
	s := policytest.ConnectedState(job, m)
	s.Connection.StartedTemplatesMutable, s.Connection.KubernetesVersion = startedMayChange, version
	return s
}

func TestNextStep(t *testing.T) {
	type check func(t *testing.T, st policy.Step)
	wantWhy := func(parts ...string) check {
		return func(t *testing.T, st policy.Step) {
			for _, p := range parts {
				if !strings.Contains(st.Why, p) {
					t.Errorf("Why %q does not say %q", st.Why, p)
				}
			}
		}
	}
	wantRequeue := func(d time.Duration) check {
		return func(t *testing.T, st policy.Step) {
			if st.RequeueAfter != d {
				t.Errorf("RequeueAfter = %s, want %s", st.RequeueAfter, d)
			}
		}
	}
	wantWaiting := func(reason, part string) check {
		return func(t *testing.T, st policy.Step) {
			if st.Waiting.Reason != reason || !strings.Contains(st.Waiting.Message, part) {
				t.Errorf("Waiting = %+v, want reason %s saying %q", st.Waiting, reason, part)
			}
		}
	}
	wantChanged := func(field string) check {
		return func(t *testing.T, st policy.Step) {
			if !slices.Contains(st.Changed, field) {
				t.Errorf("Changed = %v, want %s among them", st.Changed, field)
			}
		}
	}
	staleAttempt := policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2" })
	cases := map[string]struct {
		state  policy.State
		config func(*policy.Config)
		want   policy.Kind
		checks []check
	}{
		// Gone or going.
		"a Job that is gone: its mirror is deleted": {
			state: policy.State{Now: policytest.Now}, want: policy.StepFinalize,
		},
		"a Job being deleted: its mirror is deleted": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: policytest.Now} })},
			want:  policy.StepFinalize,
		},
		// Unplaced.
		"a held Job is placed": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job()}, want: policy.StepPlace,
		},
		"a Job with completions 0 completes on the manager": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](0) })},
			want:  policy.StepComplete,
		},
		"a Job the policy refuses says why and is looked at again in a minute": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(), Refusal: &policy.Refusal{Rule: admission.RuleNamespaceOptIn, Message: "not opted in"}},
			want:  policy.StepNotAllowed, checks: []check{wantRequeue(time.Minute), wantWaiting(policy.ReasonNotAllowed, "rule: namespace opt-in")},
		},
		"a Job its user suspended waits, saying so": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(func(j *batchv1.Job) { delete(j.Annotations, v1alpha1.HeldForPlacementAnnotation) })},
			want:  policy.StepShowWaiting, checks: []check{wantWaiting(policy.ReasonJobSuspended, "Job suspended")},
		},
		"a Job whose placement was rejected is not placed again until it changes": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(), Blocked: map[policy.Write]bool{policy.WritePlacement: true}},
			want:  policy.StepNone,
		},
		"an unplaced finished Job: nothing to do": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Complete)}, want: policy.StepNone,
		},
		// Placed, no mirror yet.
		"placed: the mirror is created": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed), nil), want: policy.StepCreateMirror,
		},
		"a mirror this manager just created, not in the worker's cache yet: wait for it": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.MirrorExpected = true
				return s
			}(),
			want: policy.StepNone, checks: []check{wantRequeue(5 * time.Second)},
		},
		"a same-named Job not created by jobferry: name conflict": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Foreign = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "someone-else"}}
				return s
			}(),
			want: policy.StepNameConflict, checks: []check{wantWhy("not created by jobferry exists on w1", "placed elsewhere")},
		},
		"the worker no longer takes the Job's namespace: released": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Connection.MayUse, s.Connection.Namespaces = false, []string{"team-b"}
				return s
			}(),
			want: policy.StepRelease, checks: []check{wantWhy("takes Jobs from namespaces team-b only")},
		},
		"the worker's credential may not create Jobs there: released": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Connection.MirrorsForbidden = "its credential may not create batch/jobs"
				return s
			}(),
			want: policy.StepRelease, checks: []check{wantWhy("w1:", "placed again", v1alpha1.ConditionAuthorized)},
		},
		"a mirror the worker rejected is not created again until the Job changes": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Blocked = map[policy.Write]bool{policy.WriteMirror: true}
				return s
			}(),
			want: policy.StepNone,
		},
		"the finished Job's mirror is gone: nothing to do": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Complete), nil), want: policy.StepNone,
		},
		"the cache lags behind the finished status this manager wrote: no second mirror": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), nil)
				s.WroteFinished = true
				return s
			}(),
			want: policy.StepNone,
		},
		// Fencing.
		"a mirror of an earlier attempt is fenced": {
			state: policytest.ConnectedState(staleAttempt, policytest.MirrorOf(t, policytest.Job(policytest.Placed))),
			want:  policy.StepFence, checks: []check{wantRequeue(time.Second)},
		},
		"a mirror of an earlier Job of the same name is fenced": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed, func(j *batchv1.Job) { j.UID = "uid-0" }))),
			want:  policy.StepFence,
		},
		"a fenced mirror being deleted: wait for it": {
			state: policytest.ConnectedState(staleAttempt, policytest.MirrorOf(t, policytest.Job(policytest.Placed), func(m *batchv1.Job) { m.DeletionTimestamp = &metav1.Time{Time: policytest.Now} })),
			want:  policy.StepNone, checks: []check{wantRequeue(time.Second)},
		},
		// Running.
		"placed by an earlier version and still held: activated": {
			state: policytest.ConnectedState(policytest.Job(func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w1" }), policytest.MirrorOf(t, policytest.Job(policytest.Placed))),
			want:  policy.StepActivate,
		},
		"the user suspends the Job: the mirror is suspended": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }), policytest.MirrorOf(t, policytest.Job(policytest.Placed, policytest.Running), policytest.Running)),
			want:  policy.StepUpdateMirror,
			checks: []check{func(t *testing.T, st policy.Step) {
				if !ptr.Deref(st.Mirror.Spec.Suspend, false) || len(st.Changed) != 1 || st.Changed[0] != "suspend" {
					t.Errorf("mirror update suspend=%v changed=%v, want suspend only", st.Mirror.Spec.Suspend, st.Changed)
				}
			}},
		},
		"a new parallelism is carried to the mirror": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }), policytest.MirrorOf(t, policytest.Job(policytest.Placed, policytest.Running), policytest.Running)),
			want:  policy.StepUpdateMirror,
			checks: []check{func(t *testing.T, st policy.Step) {
				if ptr.Deref(st.Mirror.Spec.Parallelism, 0) != 3 {
					t.Errorf("mirror parallelism = %v, want 3", st.Mirror.Spec.Parallelism)
				}
			}},
		},
		"a spec change the worker rejected is not carried again": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }), policytest.MirrorOf(t, policytest.Job(policytest.Placed, policytest.Running), policytest.Running))
				s.Blocked = map[policy.Write]bool{policy.WriteMirrorSpec: true}
				return s
			}(),
			want: policy.StepNone,
		},
		"a template that cannot take the worker's directives: invalid mirror": {
			state: func() policy.State {
				job := policytest.Job(policytest.Placed, func(j *batchv1.Job) {
					j.Spec.Suspend = ptr.To(true)
					j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "cpu"}
				})
				s := policytest.ConnectedState(job, policytest.MirrorOf(t, policytest.Job(policytest.Placed), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }))
				s.WorkerCluster = policytest.WorkerCluster(func(wc *v1alpha1.WorkerCluster) {
					wc.Spec.Scheduling.NodeSelector = map[string]string{"pool": "gpu"}
				})
				return s
			}(),
			want: policy.StepInvalidMirror, checks: []check{wantWhy("cannot carry the new spec to the mirror on w1", "conflicts")},
		},
		"the mirror's pods started while the manager copies many statuses: the copy waits for the batch period": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running))
				s.MirrorChangeSeen = policytest.Now.Add(-300 * time.Millisecond)
				return s
			}(),
			want: policy.StepNone, checks: []check{wantRequeue(700 * time.Millisecond)},
		},
		"the mirror's pods started on a quiet manager: the running status is copied at once": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running))
				s.MirrorChangeSeen, s.QuietCopying = policytest.Now.Add(-10*time.Millisecond), true
				return s
			}(),
			want: policy.StepCopyStatus,
		},
		"after the batch period the running status is copied": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running))
				s.MirrorChangeSeen = policytest.Now.Add(-time.Second)
				return s
			}(),
			want: policy.StepCopyStatus,
			checks: []check{func(t *testing.T, st policy.Step) {
				if st.Final || st.Status.Active != 1 || st.Status.StartTime == nil {
					t.Errorf("copied status final=%t active=%d startTime=%v, want a running status", st.Final, st.Status.Active, st.Status.StartTime)
				}
			}},
		},
		"a final status is copied at once": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Complete))
				s.MirrorChangeSeen = policytest.Now.Add(-10 * time.Millisecond)
				return s
			}(),
			want: policy.StepCopyStatus,
			checks: []check{func(t *testing.T, st policy.Step) {
				if !st.Final || !jobstatus.ConditionTrue(st.Status, batchv1.JobComplete) || !jobstatus.ConditionTrue(st.Status, batchv1.JobSuccessCriteriaMet) {
					t.Errorf("copied status final=%t conditions=%v, want Complete with SuccessCriteriaMet", st.Final, st.Status.Conditions)
				}
			}},
		},
		"the same status on both sides: nothing to do, and no change waiting": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running)),
			want:  policy.StepNone,
			checks: []check{func(t *testing.T, st policy.Step) {
				if !st.InSync {
					t.Errorf("InSync is false: the change seen would start the next batch wait")
				}
			}},
		},
		"the final status is copied: the mirror stays until the Job is deleted": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Complete), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Complete)),
			want:  policy.StepNone,
		},
		"the final status is copied, finished mirrors are deleted: the mirror is deleted": {
			state:  policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Complete), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Complete)),
			config: func(c *policy.Config) { c.DeleteFinishedMirrors = true },
			want:   policy.StepDeleteMirror,
		},
		// jobferry's state is jobferry's (issue 23 item 1): a tenant who
		// writes it steers nothing.
		"state not written by the manager (a placement, a raised attempt): nothing is done, and it says so": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, policytest.Running), Untrusted: []string{v1alpha1.WorkerAnnotation, v1alpha1.StateSealAnnotation}},
			want:  policy.StepUntrusted, checks: []check{wantWhy("annotations jobferry.dev/worker, jobferry.dev/state-seal", "does not act on it", "delete the Job")},
		},
		"untrusted state already reported for this version of the Job: quiet": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed), Untrusted: []string{v1alpha1.WorkerAnnotation}, Blocked: map[policy.Write]bool{policy.NoticeUntrusted: true}},
			want:  policy.StepNone, checks: []check{wantRequeue(0)},
		},
		"a Job being deleted is let go whatever its state": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: policytest.Now} }), Untrusted: []string{v1alpha1.WorkerAnnotation}},
			want:  policy.StepFinalize,
		},
		// A Job over what the cache keeps of one (issue 44) is its
		// identity only: nothing is decided from it but its deletion.
		"over the cache's budget: nothing is done, and it says so": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, policytest.Running), OverBudget: "spec.template.spec.tolerations takes ..."},
			want:  policy.StepOverBudget, checks: []check{wantWhy("holds more than jobferry keeps", "spec.template.spec.tolerations takes", "delete the Job")},
		},
		// Kept as its identity, the Job's changes (its user's suspend,
		// Kueue's preemption) no longer reach its mirror: a tenant who
		// grows a placed Job past the budget must not keep it running
		// out of their queue's reach.
		"over the cache's budget with its mirror running: the mirror is suspended first": {
			state: overBudget(policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running))),
			want:  policy.StepUpdateMirror, checks: []check{func(t *testing.T, st policy.Step) {
				if !slices.Equal(st.Changed, []string{"suspend"}) || st.Mirror == nil || !ptr.Deref(st.Mirror.Spec.Suspend, false) {
					t.Errorf("changed %v, mirror suspend %v: want the mirror suspended, nothing else", st.Changed, st.Mirror.Spec.Suspend)
				}
			}},
		},
		"over the cache's budget, its running mirror refused the suspension for this version of the Job: quiet": {
			state: func() policy.State {
				s := overBudget(policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running)))
				s.Blocked = map[policy.Write]bool{policy.WriteMirrorSpec: true}
				return s
			}(),
			want: policy.StepNone,
		},
		"over the cache's budget, its mirror suspended: it says so": {
			state: overBudget(policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }))),
			want:  policy.StepOverBudget, checks: []check{wantWhy("holds more than jobferry keeps", "a mirror of it that runs is suspended", "resumed once the Job holds less")},
		},
		"over the cache's budget, its mirror finished: it says so": {
			state: overBudget(policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Complete))),
			want:  policy.StepOverBudget,
		},
		// Nothing brings such a Job back when its worker does (the
		// placement index leaves it out): it is looked at again.
		"over the cache's budget, its worker away: looked at again": {
			state: overBudget(policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, policytest.Running), Worker: "w1"}),
			want:  policy.StepOverBudget, checks: []check{wantRequeue(30 * time.Second)},
		},
		"over the cache's budget, its worker away, already said: looked at again quietly": {
			state: func() policy.State {
				s := overBudget(policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, policytest.Running), Worker: "w1"})
				s.Blocked = map[policy.Write]bool{policy.NoticeOverBudget: true}
				return s
			}(),
			want: policy.StepNone, checks: []check{wantRequeue(30 * time.Second)},
		},
		"over the cache's budget, never placed: said once": {
			state: overBudget(policy.State{Now: policytest.Now, Job: policytest.Job()}),
			want:  policy.StepOverBudget, checks: []check{wantRequeue(0)},
		},
		"over the cache's budget, already said for this version of the Job: quiet": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed), OverBudget: "status takes ...", Blocked: map[policy.Write]bool{policy.NoticeOverBudget: true}},
			want:  policy.StepNone, checks: []check{wantRequeue(0)},
		},
		"over the cache's budget and being deleted: let go": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: policytest.Now} }), OverBudget: "status takes ..."},
			want:  policy.StepFinalize,
		},
		// Someone who may write the mirror's status (a Job controller
		// writes none so large) cannot freeze the manager Job by it.
		"a mirror's status over what jobferry keeps of a Job's: not copied, and it says so": {
			state: policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running, func(m *batchv1.Job) {
				m.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: make([]types.UID, cachebudget.JobStatus.Entries+1)}
			})),
			want: policy.StepOverBudget, checks: []check{wantWhy("the status of its mirror on w1 holds more than jobferry keeps", "it is not copied")},
		},
		"state an earlier manager wrote unsealed: sealed first": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(policytest.Placed, policytest.Running), Legacy: true}, want: policy.StepRecord,
			checks: []check{func(t *testing.T, st policy.Step) {
				if st.MirrorUID != "" {
					t.Errorf("records mirror UID %q, want the state sealed as it is", st.MirrorUID)
				}
			}},
		},
		"its state removed while its mirror runs on a worker: not placed again": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(func(j *batchv1.Job) {
				j.Spec.Suspend = ptr.To(false)
				delete(j.Annotations, v1alpha1.HeldForPlacementAnnotation)
			}),
				Stray: &policy.StrayMirror{Worker: "w2", Attempt: 1, UID: "mirror-uid"}},
			want: policy.StepStray, checks: []check{wantWhy("attempt 1, UID mirror-uid", "on w2", "records attempt 0", "removed or rolled back", "jobferry does not act on this Job"), wantRequeue(30 * time.Second)},
		},
		"a stray mirror already reported: no new Event, looked at again": {
			state: policy.State{Now: policytest.Now, Job: policytest.Job(), Stray: &policy.StrayMirror{Worker: "w2", Attempt: 1}, Blocked: map[policy.Write]bool{policy.NoticeStray: true}},
			want:  policy.StepNone, checks: []check{wantRequeue(30 * time.Second)},
		},
		"its mirror running, but a later attempt's mirror runs elsewhere (an earlier state written back): the earlier attempt's mirror fenced": {
			state: func() policy.State {
				job := policytest.Job(policytest.Placed)
				s := policytest.ConnectedState(job, policytest.MirrorOf(t, job, policytest.Running))
				s.Stray = &policy.StrayMirror{Worker: "w2", Attempt: 2, UID: "later"}
				return s
			}(),
			want: policy.StepFence, checks: []check{wantWhy("its mirror of attempt 1 on w1 was deleted: a mirror of a later attempt (2, on w2) exists")},
		},
		"its earlier mirror gone, a later attempt's mirror runs elsewhere: nothing done, no status copied": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Stray = &policy.StrayMirror{Worker: "w2", Attempt: 2, UID: "later"}
				return s
			}(),
			want: policy.StepStray, checks: []check{wantWhy("attempt 2, UID later", "records attempt 1")},
		},
		"its state records a lower attempt than this manager saw: nothing done": {
			state: func() policy.State {
				job := policytest.Job(policytest.Placed)
				s := policytest.ConnectedState(job, policytest.MirrorOf(t, job, policytest.Running))
				s.RolledBackFrom = 2
				return s
			}(),
			want: policy.StepStray, checks: []check{wantWhy("records attempt 1, but this manager saw it record attempt 2")},
		},
		"its worker down, a later attempt's mirror runs elsewhere: not waited for": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Connection = policy.Connection{}
				s.Stray = &policy.StrayMirror{Worker: "w2", Attempt: 2, UID: "later"}
				return s
			}(),
			want: policy.StepStray,
		},
		"placed, but a later attempt's mirror it does not record runs elsewhere: no mirror created": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Stray = &policy.StrayMirror{Worker: "w2", Attempt: 4, UID: "other"}
				return s
			}(),
			want: policy.StepStray,
		},
		"a placed Job the policy refuses now (its namespace opted out since): no mirror is created": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.Refusal = &policy.Refusal{Rule: admission.RulePodSecurity, Message: "violates PodSecurity"}
				return s
			}(),
			want: policy.StepNotAllowed, checks: []check{wantWaiting(policy.ReasonNotAllowed, "rule: Pod Security")},
		},
		"placed, but the worker no longer admits its pods: placed again": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.WorkerRejects = `its namespace team-a enforces PodSecurity "baseline:latest", weaker than "restricted:latest" on the manager`
				return s
			}(),
			want: policy.StepRelease, checks: []check{wantWhy("may no longer take this Job", "baseline")},
		},
		// The mirror is the one jobferry created (issue 23 item 6).
		"the mirror just created is recorded before the worker's cache shows it": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), nil)
				s.MirrorExpected, s.CreatedMirrorUID = true, "created-uid"
				return s
			}(),
			want: policy.StepRecord, checks: []check{func(t *testing.T, st policy.Step) {
				if st.MirrorUID != "created-uid" {
					t.Errorf("records %q, want created-uid", st.MirrorUID)
				}
			}},
		},
		"the mirror this manager created shows in the cache unrecorded: recorded": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed)))
				s.MirrorUID, s.CreatedMirrorUID = "", "mirror-uid"
				return s
			}(),
			want: policy.StepRecord,
		},
		"a mirror an earlier manager created, on a Job older than the key: adopted": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed)))
				s.MirrorUID, s.AdoptMirror = "", true
				return s
			}(),
			want: policy.StepRecord,
		},
		"a Job with the mirror's labels but another UID: not copied, dispatched again": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Complete, func(m *batchv1.Job) { m.UID = "impostor" }))
				s.MirrorUID = "mirror-uid"
				return s
			}(),
			want: policy.StepMirrorNotOurs, checks: []check{wantWhy("team-a/train on w1", "UID impostor, not mirror-uid", "not copied", "attempt 2")},
		},
		"an unrecorded Job with the mirror's labels, while this manager created another: not ours": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed)))
				s.MirrorUID, s.CreatedMirrorUID = "", "created-uid"
				return s
			}(),
			want: policy.StepMirrorNotOurs, checks: []check{wantWhy("none recorded")},
		},
		"a manager restarted between creating the mirror and recording it: adopted": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed), policytest.MirrorOf(t, policytest.Job(policytest.Placed)))
				s.MirrorUID, s.AdoptMirror = "", true
				return s
			}(),
			want: policy.StepRecord,
		},
		"the mirror deleted on the worker: an Event and a new attempt, not a silent restart": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), nil)
				s.MirrorUID = "mirror-uid"
				return s
			}(),
			want: policy.StepMirrorGone, checks: []check{wantWhy("(UID mirror-uid) was deleted there", "attempt 2")},
		},
		"the mirror out of the cache's sight, still on the worker: fenced first, saying why": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), nil)
				s.MirrorUID = "mirror-uid"
				s.HiddenMirror = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "mirror-uid"}}
				return s
			}(),
			want: policy.StepFence, checks: []check{wantWhy("(UID mirror-uid) is no longer seen as jobferry's there", "it is deleted"), func(t *testing.T, st policy.Step) {
				if st.Mirror == nil || st.Mirror.UID != "mirror-uid" {
					t.Errorf("fences %v, want the recorded mirror", st.Mirror)
				}
			}},
		},
		"the hidden mirror gone once fenced: a new attempt, saying jobferry deleted it": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), nil)
				s.MirrorUID, s.MirrorFenced = "mirror-uid", true
				return s
			}(),
			want: policy.StepMirrorGone, checks: []check{wantWhy("(UID mirror-uid), deleted by jobferry as no longer seen as jobferry's there", "attempt 2")},
		},
		"the hidden mirror being deleted: wait for it": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running), nil)
				s.MirrorUID = "mirror-uid"
				s.HiddenMirror = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "mirror-uid", DeletionTimestamp: &metav1.Time{}}}
				return s
			}(),
			want: policy.StepNone,
		},
		"a finished Job's mirror deleted: nothing to do": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Complete), nil)
				s.MirrorUID = "mirror-uid"
				return s
			}(),
			want: policy.StepNone,
		},
		// Template carries hold to the policy (issue 23 item 4).
		"a suspended Job's template changed to one the policy refuses: not carried": {
			state: func() policy.State {
				job := policytest.Job(policytest.Placed, func(j *batchv1.Job) {
					j.Spec.Suspend = ptr.To(true)
					j.Spec.Template.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/work": "unconfined"}
				})
				s := policytest.ConnectedState(job, policytest.MirrorOf(t, policytest.Job(policytest.Placed), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }))
				s.Refusal = &policy.Refusal{Rule: admission.RulePodSecurity, Message: `violates PodSecurity "baseline:latest": forbidden AppArmor profile`}
				return s
			}(),
			want: policy.StepInvalidMirror, checks: []check{wantWhy("not carried to the mirror on w1", "rule: Pod Security", "AppArmor")},
		},
		"a suspended Job's template changed to one no pool of the worker accepts: not carried": {
			state: func() policy.State {
				job := policytest.Job(policytest.Placed, func(j *batchv1.Job) {
					j.Spec.Suspend = ptr.To(true)
					j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				})
				s := policytest.ConnectedState(job, policytest.MirrorOf(t, policytest.Job(policytest.Placed), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }))
				s.WorkerRejects = "pool general: labels do not match the nodeSelector or required node affinity"
				return s
			}(),
			want: policy.StepInvalidMirror, checks: []check{wantWhy("not carried", "pool general")},
		},
		// The worker's version decides whether a started Job's template
		// may change (MutableSchedulingDirectivesForSuspendedJobs, v1.36).
		"a started, suspended Job's template changed: carried to a v1.36 worker": {
			state:  startedSuspended(t, "v1.36.3", true, true),
			want:   policy.StepUpdateMirror,
			checks: []check{wantChanged("template")},
		},
		"... not to an older worker, whose API server would refuse it, saying why": {
			state:  startedSuspended(t, "v1.32.13", false, true),
			want:   policy.StepInvalidMirror,
			checks: []check{wantWhy("not carried to the mirror on w1", "Kubernetes v1.32.13", "from v1.36")},
		},
		"... and not resumed with the template it has": {
			state:  startedSuspended(t, "v1.32.13", false, false),
			want:   policy.StepInvalidMirror,
			checks: []check{wantWhy("not carried to the mirror on w1", "Kubernetes v1.32.13")},
		},
		"a refused namespace does not stop a running Job's other changes": {
			state: func() policy.State {
				s := policytest.ConnectedState(policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }), policytest.MirrorOf(t, policytest.Job(policytest.Placed, policytest.Running), policytest.Running))
				s.Refusal = &policy.Refusal{Rule: admission.RuleNamespaceOptIn, Message: "not opted in"}
				return s
			}(),
			want: policy.StepUpdateMirror,
		},
		// The worker is down.
		"a worker disconnected for less than the timeout: wait, saying so": {
			state: policy.State{Job: policytest.Job(policytest.Placed), Now: policytest.Now, Worker: "w1", WorkerCluster: policytest.WorkerCluster(policytest.DisconnectedFor(time.Minute))},
			want:  policy.StepShowWaiting, checks: []check{wantRequeue(10 * time.Second), wantWaiting(policy.ReasonWorkerNotConnected, "not connected")},
		},
		"a running Job on a worker disconnected briefly: wait quietly": {
			state: policy.State{Job: policytest.Job(policytest.Placed, policytest.Running), Now: policytest.Now, Worker: "w1", WorkerCluster: policytest.WorkerCluster(policytest.DisconnectedFor(15*time.Minute - 5*time.Second))},
			want:  policy.StepNone, checks: []check{wantRequeue(6 * time.Second)},
		},
		"a worker lost for the timeout: dispatched elsewhere with the next attempt": {
			state: policy.State{Job: policytest.Job(policytest.Placed, policytest.Running), Now: policytest.Now, Worker: "w1", WorkerCluster: policytest.WorkerCluster(policytest.DisconnectedFor(20 * time.Minute))},
			want:  policy.StepRedispatch, checks: []check{wantWhy("unreachable for 20m0s", "attempt 2")},
		},
		"a worker whose WorkerCluster was deleted lately: its mirror may run, the Job waits": {
			state: policy.State{Job: policytest.Job(policytest.Placed, policytest.Running), Now: policytest.Now, Worker: "w1", WorkerGoneSince: policytest.Now.Add(-time.Minute)},
			want:  policy.StepNone, checks: []check{wantRequeue(10 * time.Second)},
		},
		"a worker whose WorkerCluster was deleted, nothing ran: it says so": {
			state: policy.State{Job: policytest.Job(policytest.Placed), Now: policytest.Now, Worker: "w1", WorkerGoneSince: policytest.Now.Add(-time.Minute)},
			want:  policy.StepShowWaiting, checks: []check{wantWaiting(policy.ReasonWorkerNotConnected, "its WorkerCluster was deleted; after 15m0s it is placed elsewhere")},
		},
		"a worker whose WorkerCluster was deleted the timeout ago is lost": {
			state: policy.State{Job: policytest.Job(policytest.Placed, policytest.Running), Now: policytest.Now, Worker: "w1", WorkerGoneSince: policytest.Now.Add(-15 * time.Minute)},
			want:  policy.StepRedispatch,
		},
		"a worker that refuses the credential answers: its Job waits for it, however long": {
			state: policy.State{Job: policytest.Job(policytest.Placed, policytest.Running), Now: policytest.Now, Worker: "w1", WorkerCluster: policytest.WorkerCluster(func(wc *v1alpha1.WorkerCluster) {
				policytest.DisconnectedFor(time.Hour)(wc)
				wc.Status.Conditions[0].Reason = v1alpha1.ReasonCredentialRejected
			})},
			want: policy.StepNone, checks: []check{wantRequeue(10 * time.Second)},
		},
		"a Job placed on a worker that refuses the credential, nothing ran: it says why": {
			state: policy.State{Job: policytest.Job(policytest.Placed), Now: policytest.Now, Worker: "w1", WorkerCluster: policytest.WorkerCluster(func(wc *v1alpha1.WorkerCluster) {
				policytest.DisconnectedFor(time.Hour)(wc)
				wc.Status.Conditions[0].Reason = v1alpha1.ReasonCredentialRejected
				wc.Status.Conditions[0].Message = "refuses the credential (401 Unauthorized)"
			})},
			want: policy.StepShowWaiting, checks: []check{wantWaiting(policy.ReasonWorkerNotConnected, "not connected (CredentialRejected: refuses the credential (401 Unauthorized)); the Job waits")},
		},
		"a Job that asks to wait for its lost worker waits": {
			state: policy.State{Job: policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Annotations[v1alpha1.OnWorkerLostAnnotation] = v1alpha1.OnWorkerLostWait }),
				Now: policytest.Now, Worker: "w1", WorkerCluster: policytest.WorkerCluster(policytest.DisconnectedFor(time.Hour))},
			want: policy.StepWorkerLostWait, checks: []check{wantRequeue(time.Minute), wantWhy("asks to wait")},
		},
		"a finished Job on a lost worker: nothing until it is back": {
			state: policy.State{Job: policytest.Job(policytest.Placed, policytest.Complete), Now: policytest.Now, Worker: "w1", WorkerCluster: policytest.WorkerCluster(policytest.DisconnectedFor(time.Hour))},
			want:  policy.StepNone, checks: []check{wantRequeue(0)},
		},
		// Queued by Kueue (queued.go).
		"queued, no Workload yet: waits for Kueue to make it": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), nil), want: policy.StepNone,
		},
		"queued, quota not reserved: waits for Kueue": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView()), want: policy.StepShowWaiting,
			checks: []check{wantWaiting(policy.ReasonQueued, "waiting for Kueue to reserve quota")},
		},
		"queued, Kueue evicting it (quota still reserved, the check Pending again): waits": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Reserved, policytest.Evicted)), want: policy.StepShowWaiting,
			checks: []check{wantWaiting(policy.ReasonQueued, "waiting for Kueue to reserve quota")},
		},
		"queued and placed, Kueue evicting it before it started: the placement goes": {
			state: policytest.QueuedPlacedState(policytest.Job(policytest.Queued, policytest.QueuedPlaced), nil, policytest.WorkloadView(policytest.Reserved, policytest.Evicted)),
			want:  policy.StepRequeue,
		},
		"queued, quota reserved with jobferry's check Pending: placed": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Reserved)), want: policy.StepPlace,
		},
		"queued in a ClusterQueue without jobferry's check: waits for admission": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Reserved, policytest.WithoutCheck)), want: policy.StepShowWaiting,
			checks: []check{wantWaiting(policy.ReasonQueued, "names none of jobferry's admission checks")},
		},
		"queued, its checks not listed yet, quota not reserved: waits for quota": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.ChecksNotListed)), want: policy.StepShowWaiting,
			checks: []check{wantWaiting(policy.ReasonQueued, "waiting for Kueue to reserve quota")},
		},
		"queued, quota reserved before Kueue listed the checks: nothing until it has": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Reserved, policytest.ChecksNotListed)), want: policy.StepNone,
		},
		"queued in a ClusterQueue without jobferry's check, admitted: placed": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Reserved, policytest.WithoutCheck, policytest.Admitted)), want: policy.StepPlace,
		},
		"queued, the check Ready but the placement let go: the check turns Retry": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued, func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1" }), policytest.WorkloadView(policytest.Reserved, policytest.Admitted, policytest.CheckState(kueue.CheckStateReady))),
			want:  policy.StepSetCheck, checks: []check{wantCheck(kueue.CheckStateRetry, "let the placement of attempt 1 go")},
		},
		"queued, the check Ready on a Workload Kueue preempted before admitting it (the placement let go): the check turns Pending": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued, func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1" }), policytest.WorkloadView(policytest.Evicted, policytest.CheckState(kueue.CheckStateReady))),
			want:  policy.StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "took the quota of attempt 1 back")},
		},
		"queued, the check Ready while Kueue is still evicting it: the check turns Pending": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Reserved, policytest.Evicted, policytest.CheckState(kueue.CheckStateReady))),
			want:  policy.StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "once Kueue reserves quota again")},
		},
		"queued, the check Ready on a Workload without quota: the check turns Pending": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.CheckState(kueue.CheckStateReady))),
			want:  policy.StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "once Kueue reserves quota again")},
		},
		"queued, the check Retry on a Workload Kueue evicted already (Kueue would never act on it): the check turns Pending": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Evicted, policytest.CheckState(kueue.CheckStateRetry))),
			want:  policy.StepSetCheck, checks: []check{wantCheck(kueue.CheckStatePending, "once Kueue reserves quota again")},
		},
		"queued, a stale check the API server refused to change for this Job: nothing": {
			state: func() policy.State {
				s := policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Evicted, policytest.CheckState(kueue.CheckStateRetry)))
				s.Blocked = map[policy.Write]bool{policy.WriteCheck: true}
				return s
			}(),
			want: policy.StepNone,
		},
		"queued, evicted after a Retry, with pods of the lost worker counted: they are uncounted": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued, policytest.Running), policytest.WorkloadView(policytest.Reserved, policytest.Evicted)),
			want:  policy.StepCopyStatus, checks: []check{func(t *testing.T, st policy.Step) {
				if st.Status.Active != 0 || *st.Status.Ready != 0 || st.Status.StartTime == nil {
					t.Errorf("status %+v still counts pods, or lost its startTime (Kueue resets it)", st.Status)
				}
			}},
		},
		"queued, Retry, nothing counted: waits for Kueue to queue it again": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.CheckState(kueue.CheckStateRetry))), want: policy.StepShowWaiting,
			checks: []check{wantWaiting(policy.ReasonQueued, "Kueue queues it again")},
		},
		"queued, deactivated by Kueue after jobferry's check rejected it: the Job keeps saying why": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued, func(j *batchv1.Job) {
				j.Status, _ = policy.PendingStatus(j.Status, policy.WaitingForWorker(policy.ReasonNoWorkerCanRun, "no worker cluster could ever run this Job"), policytest.Now)
			}), policytest.WorkloadView(policytest.Deactivated)),
			want: policy.StepNone,
		},
		"queued, deactivated by its administrator: says so": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.Deactivated)), want: policy.StepShowWaiting,
			checks: []check{wantWaiting(policy.ReasonQueued, "Kueue does not queue it (deactivated: spec.active is false)")},
		},
		"queued, Rejected: says no worker can run it": {
			state: policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView(policytest.CheckState(kueue.CheckStateRejected), func(v *workload.View) { v.Message = "no worker cluster could ever run this Job" })),
			want:  policy.StepShowWaiting, checks: []check{wantWaiting(policy.ReasonNoWorkerCanRun, "could ever run")},
		},
		"queued, seen for the first time: recorded as queued before anything else": {
			state: func() policy.State {
				s := policytest.QueuedState(policytest.Job(policytest.Queued), policytest.WorkloadView())
				s.RecordedQueue = ""
				return s
			}(),
			want: policy.StepRecord, checks: []check{func(t *testing.T, st policy.Step) {
				if st.RecordQueue != "team" || st.MirrorUID != "" {
					t.Errorf("records queue %q (mirror UID %q), want team only", st.RecordQueue, st.MirrorUID)
				}
			}},
		},
		"seen queued, its queue label removed while it waits: never dispatched outside Kueue": {
			state: func() policy.State {
				s := policytest.QueuedState(policytest.Job(), nil)
				s.Queue = nil
				return s
			}(),
			want: policy.StepShowWaiting, checks: []check{wantWaiting(policy.ReasonQueueLabelRemoved, "was queued in Kueue's LocalQueue team and its label kueue.x-k8s.io/queue-name was removed")},
		},
		"seen queued and placed, its label removed before Kueue admitted it: not activated, no mirror": {
			state: func() policy.State {
				s := policytest.QueuedPlacedState(policytest.Job(policytest.QueuedPlaced, func(j *batchv1.Job) { j.Annotations[v1alpha1.HeldForPlacementAnnotation] = "true" }), nil, policytest.WorkloadView())
				s.Queue = nil
				return s
			}(),
			want: policy.StepShowWaiting, checks: []check{wantWaiting(policy.ReasonQueueLabelRemoved, "set the label again (kueue.x-k8s.io/queue-name=team)")},
		},
		"seen queued, its label removed, the manager no longer runs with Kueue: dispatched as any Job": {
			state: func() policy.State {
				s := policytest.QueuedState(policytest.Job(), nil)
				s.Queue, s.KueueMode = nil, false
				return s
			}(),
			want: policy.StepPlace,
		},
		"queued and placed, unsuspended while Kueue evicts it (Admitted kept while evicting): no mirror": {
			state: poolGeneral(policytest.QueuedPlacedState(policytest.Job(policytest.Queued, policytest.QueuedPlaced, policytest.Unsuspended), nil, policytest.WorkloadView(policytest.Reserved, policytest.Admitted, policytest.Evicted, policytest.CheckState(kueue.CheckStateReady)))),
			want:  policy.StepNone, checks: []check{wantRequeue(5 * time.Second)},
		},
		"queued, its mirror suspended by Kueue's eviction, unsuspended by its tenant: the mirror stays suspended": {
			state: func() policy.State {
				job := policytest.Job(policytest.Queued, policytest.QueuedPlaced, policytest.Unsuspended)
				m := policytest.MirrorOf(t, job, func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) })
				return policytest.QueuedPlacedState(job, m, policytest.WorkloadView(policytest.Reserved, policytest.Admitted, policytest.Evicted, policytest.CheckState(kueue.CheckStateReady)))
			}(),
			want: policy.StepNone,
		},
		"seen queued, its label removed, its mirror suspended; unsuspended and grown by its tenant: neither carried": {
			state: func() policy.State {
				job := policytest.Job(policytest.QueuedPlaced, policytest.Unsuspended, func(j *batchv1.Job) { j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](100), ptr.To[int32](100) })
				m := policytest.MirrorOf(t, policytest.Job(policytest.QueuedPlaced), func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) })
				s := policytest.QueuedPlacedState(job, m, policytest.WorkloadView())
				s.Queue = nil
				return s
			}(),
			want: policy.StepNone,
		},
		"queued and placed, unsuspended by its tenant before Kueue admitted it: no mirror": {
			state: poolGeneral(policytest.QueuedPlacedState(policytest.Job(policytest.Queued, policytest.QueuedPlaced, policytest.Unsuspended), nil, policytest.WorkloadView(policytest.Reserved, policytest.CheckState(kueue.CheckStateReady)))),
			want:  policy.StepNone, checks: []check{wantRequeue(5 * time.Second)},
		},
		"queued and placed, still suspended: the check turns Ready with the worker's directives": {
			state: poolGeneral(policytest.QueuedPlacedState(policytest.Job(policytest.Queued, policytest.QueuedPlaced), nil, policytest.WorkloadView(policytest.Reserved))),
			want:  policy.StepSetCheck, checks: []check{wantCheck(kueue.CheckStateReady, "placed on worker cluster w1"), func(t *testing.T, st policy.Step) {
				u := st.Check.Updates
				if len(u) != 1 || u[0].Name != kueue.DefaultPodSetName || u[0].NodeSelector["pool"] != "general" || u[0].Annotations[v1alpha1.WorkerAnnotation] != "w1" {
					t.Errorf("pod set updates %+v, want w1's nodeSelector and the worker annotation on pod set main", u)
				}
			}},
		},
		"queued and placed, the check Ready: waits for Kueue to admit it": {
			state: func() policy.State {
				s := poolGeneral(policytest.QueuedPlacedState(policytest.Job(policytest.Queued, policytest.QueuedPlaced), nil, policytest.WorkloadView(policytest.Reserved, policytest.CheckState(kueue.CheckStateReady))))
				s.Queue.Updates = workload.PlacementUpdates(s.Queue.PodSets, "w1", s.WorkerCluster.Spec.Scheduling)
				return s
			}(),
			want: policy.StepNone,
		},
		"queued and placed, Kueue took the quota back before it started: the placement goes": {
			state: policytest.QueuedPlacedState(policytest.Job(policytest.Queued, policytest.QueuedPlaced), nil, policytest.WorkloadView(policytest.CheckState(kueue.CheckStatePending))),
			want:  policy.StepRequeue, checks: []check{wantWhy("Kueue took back the quota of Workload job-train-1", "attempt 1 on w1")},
		},
		"queued and admitted: the mirror is created": {
			state: policytest.QueuedPlacedState(policytest.Job(policytest.Queued, policytest.QueuedPlaced, policytest.Unsuspended), nil, policytest.WorkloadView(policytest.Reserved, policytest.Admitted, policytest.CheckState(kueue.CheckStateReady))),
			want:  policy.StepCreateMirror,
		},
		"queued and still marked held for placement, suspended by Kueue: its mirror stays suspended": {
			state: func() policy.State {
				job := policytest.Job(policytest.Queued, policytest.QueuedPlaced, policytest.Running, func(j *batchv1.Job) { j.Annotations[v1alpha1.HeldForPlacementAnnotation] = "true" })
				return policytest.QueuedPlacedState(job, policytest.MirrorOf(t, job, func(m *batchv1.Job) { m.Spec.Suspend = ptr.To(true) }, policytest.Running),
					policytest.WorkloadView(policytest.Reserved, policytest.Admitted, policytest.CheckState(kueue.CheckStateReady)))
			}(),
			want: policy.StepNone, checks: []check{wantInSync},
		},
		"queued, suspended by Kueue while its mirror runs: the mirror is suspended": {
			state: func() policy.State {
				job := policytest.Job(policytest.Queued, policytest.QueuedPlaced, policytest.Running)
				return policytest.QueuedPlacedState(job, policytest.MirrorOf(t, job, policytest.Unsuspended), policytest.WorkloadView(policytest.CheckState(kueue.CheckStatePending)))
			}(),
			want: policy.StepUpdateMirror, checks: []check{func(t *testing.T, st policy.Step) {
				if !ptr.Deref(st.Mirror.Spec.Suspend, false) {
					t.Error("the mirror is not suspended")
				}
			}},
		},
		"queued, evicted, the suspended mirror still has pods: its status is copied, nothing goes": {
			state: func() policy.State {
				job := policytest.Job(policytest.Queued, policytest.QueuedPlaced, policytest.Running)
				return policytest.QueuedPlacedState(job, policytest.MirrorOf(t, job, policytest.Running), policytest.WorkloadView(policytest.CheckState(kueue.CheckStatePending)))
			}(),
			want: policy.StepNone, checks: []check{wantInSync},
		},
		"queued, evicted, the suspended mirror drained: it and the placement go": {
			state: func() policy.State {
				job := policytest.Job(policytest.Queued, policytest.QueuedPlaced)
				return policytest.QueuedPlacedState(job, policytest.MirrorOf(t, job), policytest.WorkloadView(policytest.CheckState(kueue.CheckStatePending)))
			}(),
			want: policy.StepRequeue, checks: []check{func(t *testing.T, st policy.Step) {
				if st.Mirror == nil {
					t.Error("the drained mirror is not deleted with the placement")
				}
			}},
		},
	}
	covered := map[policy.Kind]bool{}
	for _, tc := range cases {
		covered[tc.want] = true
	}
	for _, kind := range policy.Kinds() {
		if !covered[kind] {
			t.Errorf("no case decides %s", kind)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.state.Job.DeepCopy()
			cfg := policytest.Config
			if tc.config != nil {
				tc.config(&cfg)
			}
			st := policy.Next(tc.state, cfg)
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

// poolGeneral gives w1 the scheduling directive nodeSelector pool=general.
func poolGeneral(s policy.State) policy.State {
	s.WorkerCluster.Spec.Scheduling.NodeSelector = map[string]string{"pool": "general"}
	return s
}

func wantCheck(state kueue.CheckState, part string) func(*testing.T, policy.Step) {
	return func(t *testing.T, st policy.Step) {
		if st.Check.State != state || !strings.Contains(st.Check.Message, part) {
			t.Errorf("check %s %q, want %s saying %q", st.Check.State, st.Check.Message, state, part)
		}
	}
}

func wantInSync(t *testing.T, st policy.Step) {
	if !st.InSync {
		t.Errorf("step %s is not in sync", st.Kind)
	}
}

// overBudget is s of a Job the cache keeps as its identity only.
func overBudget(s policy.State) policy.State {
	s.OverBudget = "metadata.labels takes what the manager would keep of it to ..."
	return s
}
