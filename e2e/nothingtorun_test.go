//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// upstreamShape is what a Job with nothing to run must look like on the
// manager exactly as under kube-controller-manager.
type upstreamShape struct {
	Suspend                  bool
	Conditions               []string
	StartTime, Completion    bool
	Active, Succeeded, Ready int32
}

func shapeOf(j *batchv1.Job) upstreamShape {
	s := upstreamShape{Suspend: ptr.Deref(j.Spec.Suspend, false), StartTime: j.Status.StartTime != nil, Completion: j.Status.CompletionTime != nil,
		Active: j.Status.Active, Succeeded: j.Status.Succeeded, Ready: ptr.Deref(j.Status.Ready, 0)}
	for _, c := range j.Status.Conditions {
		s.Conditions = append(s.Conditions, fmt.Sprintf("%s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return s
}

// A Job with completions 0 completes at once, as under kube-controller-
// manager (which checks succeeded >= completions before anything else):
// created running or suspended, it ends with the same conditions, spec and
// startTime as the same Job run by kube-controller-manager on a worker
// directly, and nothing is dispatched. A dispatched elastic Indexed Job
// scaled to nothing completes on its worker and the manager shows it — on
// each worker's Job controller.
func TestJobsWithNothingToRunCompleteAsUpstream(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	direct := d.workers["worker-1"]
	directNS := createNamespace(ctx, t, direct)
	for _, suspend := range []bool{false, true} {
		name := fmt.Sprintf("zero-suspend-%t", suspend)
		job := sleepJob(ns, name, time.Second)
		job.Spec.Completions, job.Spec.Suspend = ptr.To[int32](0), ptr.To(suspend)
		upstream := job.DeepCopy()
		upstream.Namespace = directNS
		if _, err := direct.BatchV1().Jobs(directNS).Create(ctx, upstream, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		complete := func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil }
		want := pollJob(ctx, t, direct, directNS, name, time.Minute, "Complete under kube-controller-manager", complete)
		got := pollJob(ctx, t, d.manager, ns, name, time.Minute, "Complete under jobferry", complete)
		if diff := cmp.Diff(shapeOf(want), shapeOf(got)); diff != "" {
			t.Errorf("%s: differs from kube-controller-manager (-upstream +jobferry):\n%s", name, diff)
		}
		if w := got.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
			t.Errorf("%s was dispatched to %s", name, w)
		}
		waitEvent(ctx, t, d.manager, ns, name, "Completed", 10*time.Second)
		t.Logf("%s: %+v", name, shapeOf(got))
	}
	for name, c := range d.workers {
		if mirrors, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err != nil || len(mirrors.Items) != 0 {
			t.Errorf("%s holds mirrors of Jobs with nothing to run: %v (%v)", name, mirrors, err)
		}
	}

	d.onEachWorker(t, func(t *testing.T, workerName string) {
		ctx := t.Context()
		ns := d.optedInNamespace(ctx, t)
		job := sleepJob(ns, "elastic-to-zero", time.Hour)
		job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](2), ptr.To[int32](2)
		d.dispatchTo(ctx, t, job, workerName)
		pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "2 pods running", func(j *batchv1.Job) bool { return j.Status.Active == 2 })
		mergePatchJob(ctx, t, d.manager, ns, job.Name, `{"spec":{"completions":0,"parallelism":0}}`)
		done := pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "Complete after scaling to nothing", func(j *batchv1.Job) bool {
			return hasCondition(j, batchv1.JobComplete) != nil
		})
		if c := hasCondition(done, batchv1.JobComplete); c.Reason != batchv1.JobReasonCompletionsReached || done.Status.Active != 0 || done.Status.Succeeded != 0 {
			t.Errorf("finished with %s (Complete reason %s), want CompletionsReached with nothing active or succeeded", describeStatus(done), c.Reason)
		}
		d.assertNoRejectedStatusWrites(t)
	})
}
