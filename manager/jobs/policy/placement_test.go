package policy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
)

func TestPlacedJob(t *testing.T) {
	gpu := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "gpu"},
		Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	cpu := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "cpu"}}
	userSelector := func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} }

	t.Run("a held Job: placed, directives in its template, unsuspended, in one write", func(t *testing.T) {
		job := policytest.Job(userSelector)
		got, err := policy.PlacedJob(job, "w1", gpu)
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations[v1alpha1.WorkerAnnotation] != "w1" || got.Annotations[v1alpha1.DispatchAttemptAnnotation] != "1" {
			t.Errorf("annotations %v: want worker w1, attempt 1", got.Annotations)
		}
		if got.Labels[v1alpha1.WorkerLabel] != "w1" {
			t.Errorf("labels %v: want the worker as a label too, for kubectl get -l", got.Labels)
		}
		if ptr.Deref(got.Spec.Suspend, true) || policy.NeedsActivation(got) {
			t.Errorf("suspend=%v held=%t, want unsuspended and no longer held", got.Spec.Suspend, policy.NeedsActivation(got))
		}
		if diff := cmp.Diff(map[string]string{"zone": "a", "pool": "gpu"}, got.Spec.Template.Spec.NodeSelector); diff != "" {
			t.Errorf("nodeSelector (-want +got):\n%s", diff)
		}
		if len(got.Spec.Template.Spec.Tolerations) != 1 {
			t.Errorf("tolerations %v, want the worker's", got.Spec.Template.Spec.Tolerations)
		}
		if got.Annotations[v1alpha1.UserSchedulingAnnotation] != `{"nodeSelector":{"zone":"a"}}` {
			t.Errorf("user scheduling recorded as %q", got.Annotations[v1alpha1.UserSchedulingAnnotation])
		}
		if _, ok := got.Annotations[v1alpha1.InjectedDirectivesAnnotation]; ok {
			t.Errorf("the directives are in the template, yet recorded as going into the mirror only")
		}
		if job.Annotations[v1alpha1.WorkerAnnotation] != "" || !ptr.Deref(job.Spec.Suspend, false) {
			t.Errorf("the input Job was modified")
		}
	})

	t.Run("a Job its user resumed: directives recorded as going into the mirror only", func(t *testing.T) {
		job := policytest.Job(userSelector, func(j *batchv1.Job) {
			delete(j.Annotations, v1alpha1.HeldForPlacementAnnotation)
			j.Spec.Suspend = ptr.To(false)
		})
		got, err := policy.PlacedJob(job, "w1", gpu)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(job.Spec.Template, got.Spec.Template); diff != "" {
			t.Errorf("the immutable template changed:\n%s", diff)
		}
		if got.Annotations[v1alpha1.InjectedDirectivesAnnotation] == "" || ptr.Deref(got.Spec.Suspend, true) {
			t.Errorf("annotations %v suspend %v: want the injected directives recorded, still running", got.Annotations, got.Spec.Suspend)
		}
	})

	t.Run("released before it ran and placed again: the next worker's directives go onto the user's template", func(t *testing.T) {
		first, err := policy.PlacedJob(policytest.Job(userSelector), "w1", gpu)
		if err != nil {
			t.Fatal(err)
		}
		released := policy.ReleasedJob(first)
		if released.Annotations[v1alpha1.WorkerAnnotation] != "" || !policy.NeedsActivation(released) || !ptr.Deref(released.Spec.Suspend, false) {
			t.Fatalf("released: annotations %v suspend %v, want unplaced and held again", released.Annotations, released.Spec.Suspend)
		}
		if _, labelled := released.Labels[v1alpha1.WorkerLabel]; labelled {
			t.Errorf("released: labels %v, want the worker label gone with the placement", released.Labels)
		}
		evaluated := policy.AsUserWroteIt(released)
		if diff := cmp.Diff(map[string]string{"zone": "a"}, evaluated.Spec.Template.Spec.NodeSelector); diff != "" || len(evaluated.Spec.Template.Spec.Tolerations) != 0 {
			t.Errorf("placement evaluates nodeSelector (-want +got):\n%s tolerations %v", diff, evaluated.Spec.Template.Spec.Tolerations)
		}
		second, err := policy.PlacedJob(released, "w2", cpu)
		if err != nil {
			t.Fatalf("placing again where the first worker's directives would conflict: %v", err)
		}
		if diff := cmp.Diff(map[string]string{"zone": "a", "pool": "cpu"}, second.Spec.Template.Spec.NodeSelector); diff != "" {
			t.Errorf("nodeSelector on the second worker (-want +got):\n%s", diff)
		}
		if len(second.Spec.Template.Spec.Tolerations) != 0 {
			t.Errorf("the first worker's tolerations stayed: %v", second.Spec.Template.Spec.Tolerations)
		}
		if second.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" {
			t.Errorf("attempt %q, want 2", second.Annotations[v1alpha1.DispatchAttemptAnnotation])
		}
	})

	t.Run("a Job that ran is released as it is: its template stays the one it ran with", func(t *testing.T) {
		first, err := policy.PlacedJob(policytest.Job(userSelector), "w1", gpu)
		if err != nil {
			t.Fatal(err)
		}
		policytest.Running(first)
		released := policy.ReleasedJob(first)
		if policy.NeedsActivation(released) || ptr.Deref(released.Spec.Suspend, false) {
			t.Errorf("a Job that ran was held again: suspend %v", released.Spec.Suspend)
		}
		if policy.AsUserWroteIt(released) != released {
			t.Errorf("placement would evaluate a template other than the one the Job runs with")
		}
	})

	t.Run("a user's Job that jobferry never unsuspended stays as the user left it", func(t *testing.T) {
		job := policytest.Job(policytest.Placed, func(j *batchv1.Job) { j.Annotations[v1alpha1.InjectedDirectivesAnnotation] = "{}" })
		released := policy.ReleasedJob(job)
		if policy.NeedsActivation(released) || ptr.Deref(released.Spec.Suspend, false) {
			t.Errorf("released as held: %v", released.Annotations)
		}
	})
}

// A Job schedules as its user wrote it until a worker's directives are
// merged in; released, it keeps them in its template (its user's recorded
// beside them) until it is placed again or its user writes theirs back.
func TestSchedulingAsUserWrote(t *testing.T) {
	gpu := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "gpu"}}
	userSelector := func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} }
	fresh := policytest.Job(userSelector)
	placed, err := policy.PlacedJob(fresh, "w1", gpu)
	if err != nil {
		t.Fatal(err)
	}
	released := policy.ReleasedJob(placed)
	rewritten := released.DeepCopy()
	rewritten.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
	changed := released.DeepCopy()
	changed.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "b"}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		want bool
	}{
		{"as created", fresh, true},
		{"placed: the worker's directives in its template", placed, false},
		{"released: the worker's directives still in its template", released, false},
		{"released, its user's scheduling written back", rewritten, true},
		{"released, its user's scheduling changed", changed, false},
	} {
		if got := policy.SchedulingAsUserWrote(tc.job); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}
