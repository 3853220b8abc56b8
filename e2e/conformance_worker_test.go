//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// With --manage-unmanaged-jobs the worker runs ordinary Jobs, for control
// planes without kube-controller-manager's Job controller (the
// conformance-worker cluster is one). The default worker is stopped first:
// two controllers must never run the same Jobs.
func testManageUnmanagedJobs(t *testing.T, worker *conformanceSide) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := worker.stop(); err != nil {
		t.Fatal(err)
	}
	startWorkerBinary(ctx, t, worker.cluster, "jobferry-worker-unmanaged", "--manage-unmanaged-jobs", "--metrics-bind-address=0")
	ns := createNamespace(ctx, t, worker.client)
	job := conformanceJob("ordinary", ptr.To[int32](2), ptr.To[int32](2))()
	job.Namespace = ns
	job.Spec.Template.Spec.NodeSelector = noNode
	if _, err := worker.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, worker.client, ns, job.Name, time.Minute, "two pods", func(j *batchv1.Job) bool { return j.Status.Active == 2 })
	r := &run{side: worker, ns: ns, name: job.Name}
	if err := r.each(ctx, -1, isActivePod, r.statusOf(corev1.PodSucceeded)); err != nil {
		t.Fatal(err)
	}
	done := pollJob(ctx, t, worker.client, ns, job.Name, time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	if done.Status.Succeeded != 2 {
		t.Errorf("ordinary Job finished with %s, want succeeded=2", describeStatus(done))
	}
}
