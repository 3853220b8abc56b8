//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// A tenant's limits on the manager cross to the workers (issue 45, item 2),
// on real control planes, acting as the tenant alice:
//   - team-limits has a LimitRange (containers: default limit 500m cpu, at
//     most 1): a Job asking for a 2-cpu limit waits, never dispatched, with
//     the LimitRange's own message in its condition and an Event; a Job that
//     sets no limit runs on a worker with the default limit of 500m;
//   - team-quota has a ResourceQuota of 2 pods, filled by the manager
//     cluster's quota controller: five Jobs of one pod each run at most two
//     at a time, the waiting ones say which quota holds them, and all five
//     complete.
func TestTenantLimitsCrossToWorkers(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	enabled := map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled, psaEnforce: "restricted"}
	managerNamespace(ctx, t, d, "team-limits", enabled)
	managerNamespace(ctx, t, d, "team-quota", enabled)
	alice := tenantClient(ctx, t, d, "team-limits", "team-quota")

	limits := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "containers"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type:    corev1.LimitTypeContainer,
		Default: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("500m")},
		Max:     corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("1")},
	}}}}
	if _, err := d.manager.CoreV1().LimitRanges("team-limits").Create(ctx, limits, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "two-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resourceQuantity("2")}}}
	if _, err := d.manager.CoreV1().ResourceQuotas("team-quota").Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("limitrange-maximum", func(t *testing.T) {
		big := restrictedJob("team-limits", "too-big")
		big.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("2")}
		if _, err := alice.BatchV1().Jobs("team-limits").Create(ctx, big, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := "maximum cpu usage per Container is 1, but limit is 2"
		job := pollJob(ctx, t, d.manager, "team-limits", "too-big", time.Minute, "waiting, its pods refused", func(j *batchv1.Job) bool {
			c := hasCondition(j, batchv1.JobSuspended)
			return c != nil && c.Reason == policy.ReasonPodsNotAdmitted && containsAll(c.Message, want)
		})
		if w := job.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
			t.Errorf("placed on %s", w)
		}
		e := waitEvent(ctx, t, d.manager, "team-limits", "too-big", policy.ReasonPodsNotAdmitted, 30*time.Second, "namespace team-limits of this cluster does not admit its pods", want)
		t.Logf("condition: %s", hasCondition(job, batchv1.JobSuspended).Message)
		t.Logf("Event %s: %s", e.Reason, e.Message)
		for name, w := range d.workers {
			if _, err := w.BatchV1().Jobs("team-limits").Get(ctx, "too-big", metav1.GetOptions{}); err == nil {
				t.Errorf("a mirror of too-big exists on %s", name)
			}
		}
	})

	t.Run("limitrange-default", func(t *testing.T) {
		if _, err := alice.BatchV1().Jobs("team-limits").Create(ctx, restrictedJob("team-limits", "defaulted"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		done := pollJob(ctx, t, d.manager, "team-limits", "defaulted", time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
		worker := done.Annotations[v1alpha1.WorkerAnnotation]
		m, err := d.workers[worker].BatchV1().Jobs("team-limits").Get(ctx, "defaulted", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the mirror on %s: %v", worker, err)
		}
		got := m.Spec.Template.Spec.Containers[0].Resources
		if got.Limits.Cpu().String() != "500m" || got.Requests.Cpu().String() != "100m" {
			t.Errorf("the mirror's resources %v, want the 100m request as written and the LimitRange's default limit of 500m", got)
		}
	})

	t.Run("quota-of-two-pods", func(t *testing.T) {
		names := make([]string, 5)
		for i := range names {
			names[i] = fmt.Sprintf("quota-%d", i)
			if _, err := alice.BatchV1().Jobs("team-quota").Create(ctx, sleepJobRestricted("team-quota", names[i], 6*time.Second), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Watch how many are dispatched and unfinished at once.
		most := 0
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := d.manager.BatchV1().Jobs("team-quota").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			running, complete := 0, 0
			for i := range list.Items {
				j := &list.Items[i]
				switch {
				case hasCondition(j, batchv1.JobComplete) != nil:
					complete++
				case j.Annotations[v1alpha1.WorkerAnnotation] != "":
					running++
				}
			}
			most = max(most, running)
			return complete == len(names), nil
		})
		if err != nil {
			t.Fatalf("the five Jobs did not all complete: %v", err)
		}
		if most > 2 {
			t.Errorf("%d Jobs of team-quota were dispatched and unfinished at once, over its quota of 2 pods", most)
		}
		if most < 2 {
			t.Errorf("at most %d Job ran at once, want the quota's 2", most)
		}
		found := false
		for _, name := range names {
			events, err := d.manager.CoreV1().Events("team-quota").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.Reason == policy.ReasonQuotaExceeded && containsAll(e.Message, "ResourceQuota two-pods in namespace team-quota: pods would be 3, over its hard limit of 2") {
					if !found {
						t.Logf("Event on %s %s: %s", name, e.Reason, e.Message)
					}
					found = true
				}
			}
		}
		if !found {
			t.Error("no Job that waited has a QuotaExceeded Event naming the quota")
		}
		used, err := d.manager.CoreV1().ResourceQuotas("team-quota").Get(ctx, "two-pods", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, filled := used.Status.Used[corev1.ResourcePods]; !filled {
			t.Errorf("the manager cluster's quota controller did not fill the quota's status: %+v", used.Status)
		}
	})
}

// sleepJobRestricted is restrictedJob running for runFor.
func sleepJobRestricted(ns, name string, runFor time.Duration) *batchv1.Job {
	job := restrictedJob(ns, name)
	job.Spec.Template.Annotations[completeDelayAnnotation] = runFor.String()
	return job
}
