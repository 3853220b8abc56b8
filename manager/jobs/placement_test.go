package jobs

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

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
