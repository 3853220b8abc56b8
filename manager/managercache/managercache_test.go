package managercache

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestTrimJobKeepsManagerJobsWholeAndOthersAsIdentity(t *testing.T) {
	job := func(managedBy *string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "team", Name: "j", UID: "u1", ResourceVersion: "7",
				Annotations:   map[string]string{v1alpha1.WorkerAnnotation: "worker-1"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			},
			Spec: batchv1.JobSpec{ManagedBy: managedBy, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
			Status: batchv1.JobStatus{Active: 1},
		}
	}
	got, err := trimJob(job(ptr.To(v1alpha1.ManagerManagedBy)))
	if err != nil {
		t.Fatal(err)
	}
	managed := got.(*batchv1.Job)
	if managed.ManagedFields != nil {
		t.Error("a manager Job keeps its managedFields in the cache")
	}
	if managed.Annotations[v1alpha1.WorkerAnnotation] != "worker-1" || len(managed.Spec.Template.Spec.Containers) != 1 || managed.Status.Active != 1 {
		t.Errorf("a manager Job lost more than its managedFields: %+v", managed)
	}

	got, err = trimJob(job(nil))
	if err != nil {
		t.Fatal(err)
	}
	other := got.(*batchv1.Job)
	if other.Name != "j" || other.Namespace != "team" || other.UID != "u1" || other.ResourceVersion != "7" {
		t.Errorf("another controller's Job lost its identity: %+v", other.ObjectMeta)
	}
	if v1alpha1.IsManagerJob(other) {
		t.Error("another controller's Job passes for a manager Job once trimmed")
	}
	if other.Annotations != nil || other.Spec.Template.Spec.Containers != nil || other.Status.Active != 0 || other.ManagedFields != nil {
		t.Errorf("another controller's Job keeps what no reader needs: %+v", other)
	}
}

func TestPlacementKeyTellsUnplacedFromPlaced(t *testing.T) {
	placed := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.WorkerAnnotation: "worker-2"}}}
	if got := placementKey(placed); got != "worker-2" {
		t.Errorf("placed Job indexed as %q", got)
	}
	if got := placementKey(&batchv1.Job{}); got != UnplacedKey {
		t.Errorf("unplaced Job indexed as %q, want %q", got, UnplacedKey)
	}
}

func TestUnfinishedPlacementKeysLeaveOutFinishedAndUnplacedJobs(t *testing.T) {
	onW1 := func(status batchv1.JobStatus) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.WorkerAnnotation: "w1"}}, Status: status}
	}
	cases := []struct {
		name string
		job  *batchv1.Job
		want []string
	}{
		{"running on w1", onW1(batchv1.JobStatus{Active: 1}), []string{"w1"}},
		{"finished on w1", onW1(batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}), nil},
		{"unplaced", &batchv1.Job{}, nil},
	}
	for _, tc := range cases {
		if got := unfinishedPlacementKeys(tc.job); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
