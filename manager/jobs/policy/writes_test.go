package policy_test

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
)

// Every Write the reconciler can remember as refused is one Next consults:
// for each, a Job for which Next chooses a step that makes it, and the same
// Job with that Write refused, for which it does not. A Write without a
// case here fails the test. (Activation and mirror deletion were once
// remembered, announced as "not retried until the Job changes", and made
// again on every reconcile; a mirror deletion is now tried again after a
// while instead, as its Event says.)
func TestEveryRefusedWriteIsHeldBack(t *testing.T) {
	pt := policytest.Job
	cases := map[policy.Write]struct {
		state  policy.State
		config func(*policy.Config)
	}{
		policy.WritePlacement: {state: policy.State{Now: policytest.Now, Job: pt()}},
		policy.WriteActivation: {state: policytest.ConnectedState(pt(func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w1" }),
			policytest.MirrorOf(t, pt(policytest.Placed)))},
		policy.WriteNamespace: {state: policytest.ConnectedState(pt(policytest.Placed), nil)},
		policy.WriteMirror:    {state: policytest.ConnectedState(pt(policytest.Placed), nil)},
		policy.WriteMirrorSpec: {state: policytest.ConnectedState(pt(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }),
			policytest.MirrorOf(t, pt(policytest.Placed, policytest.Running), policytest.Running))},
		policy.WriteJob:        {state: policy.State{Now: policytest.Now, Job: pt(func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](0) })}},
		policy.WriteCheck:      {state: policytest.QueuedState(pt(policytest.Queued), policytest.WorkloadView(policytest.CheckState(kueue.CheckStateReady)))},
		policy.NoticeUntrusted: {state: policy.State{Now: policytest.Now, Job: pt(policytest.Placed), Untrusted: []string{v1alpha1.WorkerAnnotation}}},
		policy.NoticeStray: {state: policy.State{Now: policytest.Now, Job: pt(policytest.Placed),
			Stray: &policy.StrayMirror{Worker: "w2", Attempt: 2, UID: "later"}}},
		policy.NoticeOverBudget: {state: policy.State{Now: policytest.Now, Job: pt(), OverBudget: "its template holds 3 MiB"}},
	}
	for _, w := range policy.Writes() {
		if w.RetryAfter > 0 {
			// Tried again after a while, never remembered as refused
			// (TestRefusedWithRetryAfterIsNotHeldBack in package jobs).
			continue
		}
		tc, ok := cases[w]
		if !ok {
			t.Errorf("no case refuses %s (%s)", w.Action, w.Reason)
			continue
		}
		t.Run(w.Reason, func(t *testing.T) {
			cfg := policytest.Config
			if tc.config != nil {
				tc.config(&cfg)
			}
			st := policy.Next(tc.state, cfg)
			if !slices.Contains(policy.Makes(st), w) {
				t.Fatalf("Next chose %s, which does not make %s: the case tests nothing", st.Kind, w.Action)
			}
			refused := tc.state
			refused.Blocked = map[policy.Write]bool{w: true}
			if again := policy.Next(refused, cfg); slices.Contains(policy.Makes(again), w) {
				t.Errorf("with %s refused for the Job as it is, Next chose %s again", w.Action, again.Kind)
			}
		})
	}
}

// Each Write a step makes is one the reconciler looks up (Writes), and
// each of those is made by some step.
func TestWritesAndTheStepsThatMakeThemAgree(t *testing.T) {
	made := map[policy.Write]bool{}
	for _, k := range policy.Kinds() {
		for _, w := range policy.Makes(policy.Step{Kind: k, Changed: []string{"template"}}) {
			if !slices.Contains(policy.Writes(), w) {
				t.Errorf("step %s makes %s, which is not declared", k, w.Action)
			}
			made[w] = true
		}
	}
	for _, w := range policy.Writes() {
		if !made[w] {
			t.Errorf("no step makes %s (%s)", w.Action, w.Reason)
		}
	}
}

// A Job whose activation was refused waits for a change: it is suspended
// only by jobferry's hold, which is not its user's suspension to carry to
// the running mirror.
func TestRefusedActivationLeavesTheMirrorRunning(t *testing.T) {
	job := policytest.Job(func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w1" })
	s := policytest.ConnectedState(job, policytest.MirrorOf(t, policytest.Job(policytest.Placed), policytest.Running))
	s.Blocked = map[policy.Write]bool{policy.WriteActivation: true}
	if st := policy.Next(s, policytest.Config); st.Kind != policy.StepNone {
		t.Errorf("Next chose %s (%v), want %s", st.Kind, st.Changed, policy.StepNone)
	}
}
