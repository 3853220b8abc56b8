package simworker

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// next walks a Job through its statuses, each due at the right time; a
// held Job stays running; a suspended Job that never started waits.
func TestNextStatuses(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timing := Timing{Start: time.Second, RunFor: 5 * time.Second}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	job.Spec.Template.Annotations = map[string]string{RunForAnnotation: "3s"}

	start, ok := next(job, timing)
	if !ok || !start.at.Equal(created.Add(time.Second)) || start.status.Active != 1 || ptr.Deref(start.status.Ready, 0) != 1 || !start.status.StartTime.Time.Equal(start.at) {
		t.Fatalf("the start: %+v, %t", start, ok)
	}
	job.Status = start.status
	if _, ok := next(job, Timing{Start: time.Second, RunFor: time.Second, Hold: true}); ok {
		t.Error("a held running Job moved on")
	}
	done, ok := next(job, timing)
	if !ok || !done.at.Equal(start.at.Add(3*time.Second)) || done.status.Active != 0 || done.status.Succeeded != 1 ||
		!condition(done.status, batchv1.JobSuccessCriteriaMet) || !condition(done.status, batchv1.JobComplete) || !done.status.CompletionTime.Time.Equal(done.at) {
		t.Fatalf("the end, after the template's 3 s: %+v, %t", done, ok)
	}
	job.Status = done.status
	if _, ok := next(job, timing); ok {
		t.Error("a finished Job moved on")
	}

	suspended := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}, Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}
	first, ok := next(suspended, timing)
	if !ok || !condition(first.status, batchv1.JobSuspended) || first.status.StartTime != nil {
		t.Fatalf("a suspended Job first: %+v, %t", first, ok)
	}
	suspended.Status = first.status
	if _, ok := next(suspended, timing); ok {
		t.Error("a suspended Job with its Suspended condition moved on")
	}
	failing := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	failing.Spec.Template.Labels = map[string]string{FailLabel: "true"}
	s, _ := next(failing, timing)
	failing.Status = s.status
	if f, _ := next(failing, timing); f.status.Failed != 1 || !condition(f.status, batchv1.JobFailureTarget) || !condition(f.status, batchv1.JobFailed) ||
		conditionOf(f.status, batchv1.JobComplete) != nil || f.status.Ready == nil || *f.status.Ready != 0 {
		t.Errorf("a failing Job's end: %+v", f.status)
	}
}
