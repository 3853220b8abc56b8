package jobs

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestPlacedJob(t *testing.T) {
	gpu := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "gpu"},
		Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	cpu := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "cpu"}}
	userSelector := func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} }

	t.Run("a held Job: placed, directives in its template, unsuspended, in one write", func(t *testing.T) {
		job := stepJob(userSelector)
		got, err := PlacedJob(job, "w1", gpu)
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations[v1alpha1.WorkerAnnotation] != "w1" || got.Annotations[v1alpha1.DispatchAttemptAnnotation] != "1" {
			t.Errorf("annotations %v: want worker w1, attempt 1", got.Annotations)
		}
		if ptr.Deref(got.Spec.Suspend, true) || NeedsActivation(got) {
			t.Errorf("suspend=%v held=%t, want unsuspended and no longer held", got.Spec.Suspend, NeedsActivation(got))
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
		job := stepJob(userSelector, func(j *batchv1.Job) {
			delete(j.Annotations, v1alpha1.HeldForPlacementAnnotation)
			j.Spec.Suspend = ptr.To(false)
		})
		got, err := PlacedJob(job, "w1", gpu)
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
		first, err := PlacedJob(stepJob(userSelector), "w1", gpu)
		if err != nil {
			t.Fatal(err)
		}
		released := ReleasedJob(first)
		if released.Annotations[v1alpha1.WorkerAnnotation] != "" || !NeedsActivation(released) || !ptr.Deref(released.Spec.Suspend, false) {
			t.Fatalf("released: annotations %v suspend %v, want unplaced and held again", released.Annotations, released.Spec.Suspend)
		}
		evaluated := AsUserWroteIt(released)
		if diff := cmp.Diff(map[string]string{"zone": "a"}, evaluated.Spec.Template.Spec.NodeSelector); diff != "" || len(evaluated.Spec.Template.Spec.Tolerations) != 0 {
			t.Errorf("placement evaluates nodeSelector (-want +got):\n%s tolerations %v", diff, evaluated.Spec.Template.Spec.Tolerations)
		}
		second, err := PlacedJob(released, "w2", cpu)
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
		first, err := PlacedJob(stepJob(userSelector), "w1", gpu)
		if err != nil {
			t.Fatal(err)
		}
		running(first)
		released := ReleasedJob(first)
		if NeedsActivation(released) || ptr.Deref(released.Spec.Suspend, false) {
			t.Errorf("a Job that ran was held again: suspend %v", released.Spec.Suspend)
		}
		if AsUserWroteIt(released) != released {
			t.Errorf("placement would evaluate a template other than the one the Job runs with")
		}
	})

	t.Run("a user's Job that jobferry never unsuspended stays as the user left it", func(t *testing.T) {
		job := stepJob(placed, func(j *batchv1.Job) { j.Annotations[v1alpha1.InjectedDirectivesAnnotation] = "{}" })
		released := ReleasedJob(job)
		if NeedsActivation(released) || ptr.Deref(released.Spec.Suspend, false) {
			t.Errorf("released as held: %v", released.Annotations)
		}
	})
}

// The patch of a placement write is the same from the Jobs without what
// both hold alike as from the whole Jobs, the status apart (never written
// through the Job itself, so always left out).
func TestWithoutWhatBothHoldKeepsThePatch(t *testing.T) {
	base := func() *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", ResourceVersion: "7", Annotations: map[string]string{"a": "1"}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}},
			Status: batchv1.JobStatus{Active: 1}}
		return j
	}
	cases := map[string]func(*batchv1.Job){
		"annotations":           func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w1"; delete(j.Annotations, "a") },
		"unsuspended":           func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) },
		"directives in the pod": func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"} },
		"nothing":               func(*batchv1.Job) {},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			before, after := base(), base()
			change(after)
			want, err := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}).Data(after)
			if err != nil {
				t.Fatal(err)
			}
			after.Status.Active = 2 // left out either way
			from, to := withoutWhatBothHold(before, after)
			got, err := client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}).Data(to)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("patch %s, want %s", got, want)
			}
			if before.Status.Active != 1 || after.Status.Active != 2 || len(after.Spec.Template.Spec.Containers) != 1 {
				t.Error("the Jobs themselves changed")
			}
		})
	}
}

// A write's patch does to the Job what the merge patch of the whole Jobs
// does, the status apart, whether it comes from the annotations and labels
// alone or from the Jobs' JSON; it is locked to the Job's resourceVersion.
func TestJobPatchDoesWhatTheWholeJobsPatchDoes(t *testing.T) {
	base := func() *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", ResourceVersion: "7",
			Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"a": "1", "b": "2"}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}},
			Status: batchv1.JobStatus{Active: 1}}
	}
	cases := map[string]func(*batchv1.Job){
		"an annotation added, one changed, one removed": func(j *batchv1.Job) {
			j.Annotations[v1alpha1.MirrorUIDAnnotation] = "u1"
			j.Annotations["a"] = "3"
			delete(j.Annotations, "b")
		},
		"every annotation removed":               func(j *batchv1.Job) { j.Annotations = nil },
		"a label and an annotation":              func(j *batchv1.Job) { j.Labels["x"] = "y"; j.Annotations["c"] = "" },
		"unsuspended and placed":                 func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false); j.Annotations[v1alpha1.WorkerAnnotation] = "w1" },
		"directives in the pod":                  func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"} },
		"a finalizer removed with an annotation": func(j *batchv1.Job) { j.Finalizers = nil; j.Annotations["a"] = "4" },
		"nothing":                                func(*batchv1.Job) {},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			before, after := base(), base()
			before.Finalizers = []string{"jobferry.dev/old"}
			after.Finalizers = []string{"jobferry.dev/old"}
			change(after)
			want, err := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}).Data(after)
			if err != nil {
				t.Fatal(err)
			}
			after.Status.Active = 2 // never written through the Job
			got, err := jobPatch(before, after)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := json.Marshal(before)
			if err != nil {
				t.Fatal(err)
			}
			wantDoc, err := jsonpatch.MergePatch(doc, want)
			if err != nil {
				t.Fatal(err)
			}
			gotDoc, err := jsonpatch.MergePatch(doc, got)
			if err != nil {
				t.Fatalf("patch %s: %v", got, err)
			}
			if !jsonpatch.Equal(gotDoc, wantDoc) {
				t.Errorf("patch %s makes\n%s\nwant (from %s)\n%s", got, gotDoc, want, wantDoc)
			}
			var lock struct {
				Metadata struct{ ResourceVersion string } `json:"metadata"`
			}
			if err := json.Unmarshal(got, &lock); err != nil || lock.Metadata.ResourceVersion != "7" {
				t.Errorf("patch %s is not locked to resourceVersion 7", got)
			}
			if before.Status.Active != 1 || after.Status.Active != 2 || len(after.Spec.Template.Spec.Containers) != 1 {
				t.Error("the Jobs themselves changed")
			}
		})
	}
}

// The Job controller's copy of a WorkerCluster holds all it reads — name,
// labels, spec, conditions — but not the capacity and credential of its
// status, and shares nothing with the cache's object.
func TestWithoutCapacityCopiesAllButTheCapacity(t *testing.T) {
	cached := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"region": "eu"}},
		Spec: v1alpha1.WorkerClusterSpec{Namespaces: []string{"team-a"}, Scheduling: v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "batch"}}},
		Status: v1alpha1.WorkerClusterStatus{
			Conditions:     []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConnected}},
			Capacity:       &v1alpha1.ClusterCapacityStatus{Pools: []v1alpha1.NodePool{{Name: "general", Nodes: 3}}},
			Credential:     &v1alpha1.CredentialStatus{ServiceAccount: "jobferry-manager"},
			DispatchedJobs: 7, RunningJobs: 5,
		}}
	want := cached.DeepCopy()
	want.Status.Capacity, want.Status.Credential = nil, nil
	got := withoutCapacity(cached)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("copy %+v, want %+v", got, want)
	}
	got.Labels["region"] = "us"
	got.Spec.Scheduling.NodeSelector["pool"] = "other"
	got.Status.Conditions[0].Status = metav1.ConditionFalse
	if cached.Labels["region"] != "eu" || cached.Spec.Scheduling.NodeSelector["pool"] != "batch" || cached.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("writing the copy changed the cache's object: %+v", cached)
	}
}
