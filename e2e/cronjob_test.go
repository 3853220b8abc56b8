//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A CronJob in an opted-in namespace of the manager works as on any cluster:
// the manager's cronjob-controller creates its Jobs every minute, jobferry
// dispatches them, the CronJob sees them complete (lastSuccessfulTime), and
// its history limit deletes the older manager Jobs, whose mirrors are gone
// from the workers. Cron schedules have a one-minute granularity, so this
// runs in parallel with the other slow tests.
func TestCronJobJobsAreDispatched(t *testing.T) {
	t.Parallel()
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	rec := recordWorkers(ctx, t, d, ns)
	template := sleepJob(ns, "", time.Second)
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec: batchv1.CronJobSpec{
			Schedule:                   "* * * * *",
			SuccessfulJobsHistoryLimit: ptr.To[int32](1),
			JobTemplate:                batchv1.JobTemplateSpec{Spec: template.Spec},
		},
	}
	if _, err := d.manager.BatchV1().CronJobs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Two runs (up to two minutes and a bit), each dispatched and complete.
	seen := map[types.UID]*batchv1.Job{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		jobs, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range jobs.Items {
			j := &jobs.Items[i]
			if hasCondition(j, batchv1.JobComplete) != nil {
				seen[j.UID] = j.DeepCopy()
			}
		}
		return len(seen) >= 2, nil
	})
	if err != nil {
		t.Fatalf("%d CronJob runs completed on the manager, want 2: %v", len(seen), err)
	}
	for _, j := range seen {
		if w := j.Annotations[v1alpha1.WorkerAnnotation]; w == "" || ptr.Deref(j.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy {
			t.Errorf("CronJob run %s was not dispatched: worker %q, managedBy %v", j.Name, w, j.Spec.ManagedBy)
		}
	}

	var last *batchv1.CronJob
	var left []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if last, err = d.manager.BatchV1().CronJobs(ns).Get(ctx, cron.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		jobs, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		finished := 0
		left = left[:0]
		for i := range jobs.Items {
			left = append(left, jobs.Items[i].Name)
			if hasCondition(&jobs.Items[i], batchv1.JobComplete) != nil {
				finished++
			}
		}
		return last.Status.LastSuccessfulTime != nil && finished <= 1, nil
	})
	if err != nil {
		t.Fatalf("lastSuccessfulTime %v and finished Jobs %v, want it set and at most one kept by the history limit: %v", last.Status.LastSuccessfulTime, left, err)
	}
	if err := d.manager.BatchV1().CronJobs(ns).Delete(ctx, cron.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoMirrors(ctx, t, d, ns)
	rec.close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for uid, j := range seen {
		if len(rec.mirrors[uid]) != 1 {
			t.Errorf("CronJob run %s had %d mirrors, want 1", j.Name, len(rec.mirrors[uid]))
		}
	}
	t.Logf("CronJob runs %d, lastSuccessfulTime %s, kept %v", len(seen), last.Status.LastSuccessfulTime, left)
}
