package workercluster

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// recordingQueue records the WorkerClusters asked for, and after how long.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []string
	after []time.Duration
}

func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.added = append(q.added, r.Name)
	q.after = append(q.after, d)
}

// managerJob is manager Job name, placed on worker ("": not placed),
// changed by change.
func managerJob(name, worker string, change ...func(*batchv1.Job)) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(name), Annotations: map[string]string{}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)}}
	if worker != "" {
		job.Annotations[v1alpha1.WorkerAnnotation] = worker
	}
	for _, c := range change {
		c(job)
	}
	return job
}

// Changes of a Job the counts read.
var (
	active = func(j *batchv1.Job) { j.Status.Active = 1 }
	done   = func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	}
	local = func(j *batchv1.Job) { j.Spec.ManagedBy = nil }
)

// A worker's counts are refreshed, countsRefresh later, when a manager Job
// placed there changes what they count — and only then.
func TestJobCountsHandler(t *testing.T) {
	on := func(worker string, change ...func(*batchv1.Job)) *batchv1.Job {
		return managerJob("train", worker, change...)
	}
	labelled := func(j *batchv1.Job) { j.Labels = map[string]string{"team": "a"} }
	workers := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(
		&v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w2"}}).Build()
	h := jobCountsHandler{reader: workers, tally: newJobTally()}
	ctx := context.Background()
	cases := map[string]struct {
		send func(q *recordingQueue)
		want []string
	}{
		"a Job created placed":   {func(q *recordingQueue) { h.Create(ctx, event.CreateEvent{Object: on("w1")}, q) }, []string{"w1"}},
		"a Job created unplaced": {func(q *recordingQueue) { h.Create(ctx, event.CreateEvent{Object: on("")}, q) }, nil},
		"placed":                 {func(q *recordingQueue) { h.Update(ctx, event.UpdateEvent{ObjectOld: on(""), ObjectNew: on("w1")}, q) }, []string{"w1"}},
		"moved to another worker": {func(q *recordingQueue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: on("w1"), ObjectNew: on("w2")}, q)
		}, []string{"w1", "w2"}},
		"started": {func(q *recordingQueue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: on("w1"), ObjectNew: on("w1", active)}, q)
		}, []string{"w1"}},
		"finished": {func(q *recordingQueue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: on("w1", active), ObjectNew: on("w1", done)}, q)
		}, []string{"w1"}},
		"a change the counts do not see": {func(q *recordingQueue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: on("w1", active), ObjectNew: on("w1", active, labelled)}, q)
		}, nil},
		"deleted": {func(q *recordingQueue) { h.Delete(ctx, event.DeleteEvent{Object: on("w1", active)}, q) }, []string{"w1"}},
		"a Job this cluster runs itself": {func(q *recordingQueue) {
			h.Create(ctx, event.CreateEvent{Object: on("w1", local)}, q)
		}, nil},
		"a worker that is no WorkerCluster (as its writer says)": {func(q *recordingQueue) {
			h.Create(ctx, event.CreateEvent{Object: on("made-up")}, q)
		}, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := &recordingQueue{}
			tc.send(q)
			if diff := cmp.Diff(tc.want, q.added); diff != "" {
				t.Errorf("WorkerClusters asked for (-want +got):\n%s", diff)
			}
			for _, d := range q.after {
				if d != countsRefresh {
					t.Errorf("asked for after %s, want %s", d, countsRefresh)
				}
			}
		})
	}
}
