//go:build integration

package jobs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
	"github.com/jobferry/jobferry/internal/statusrecording"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/mirror"
)

// Every status the manager writes on a Job of its own, as the Job goes
// through it, is accepted by a real kube-apiserver: while it waits (the
// Suspended condition, its message refreshed, held or suspended by its
// user), then released and running the recorded kube-controller-manager
// sequences copied from its mirror (mirror/testdata), and, for Jobs with
// nothing to run, the completion written at once, suspended or not.
func TestIntegrationManagerStatusWrites(t *testing.T) {
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	files, err := filepath.Glob(filepath.Join("..", "..", "mirror", "testdata", "*.json"))
	if err != nil || len(files) < 6 {
		t.Fatalf("want the recorded scenarios in mirror/testdata/, found %v (%v)", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run("waits-then-runs-"+name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var rec statusrecording.Recording
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			// As the opt-in webhook admits it: suspended, and held for
			// placement unless its user suspended it.
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "waits-" + name}, Spec: rec.Spec}
			job.Spec.ManagedBy = ptr.To(v1alpha1.ManagerManagedBy)
			job.Spec.Suspend = ptr.To(true)
			UserSuspended := rec.Steps[0].Suspend
			if !UserSuspended {
				job.Annotations = map[string]string{v1alpha1.HeldForPlacementAnnotation: "true"}
			}
			job, err = c.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			waits := []policy.Waiting{policy.WaitingForWorker(policy.ReasonNoWorkerFits, "no worker fits"), policy.WaitingForWorker(policy.ReasonNoWorkerFits, "no worker fits; w: needs 2 cpu"), policy.WaitingForMirror(policy.ReasonWaitingForMirror, "w", "CreateMirror refused: forbidden")}
			if UserSuspended {
				waits = []policy.Waiting{policy.UserSuspendedWaiting()}
			}
			for i, w := range waits {
				status, changed := policy.PendingStatus(job.Status, w, now.Add(time.Duration(i)*time.Second))
				if !changed {
					t.Fatalf("waiting %d (%s) was not written", i, w.Reason)
				}
				job.Status = status
				if job, err = c.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("the API server rejected the waiting condition %s: %v", w.Reason, err)
				}
			}
			for i, step := range rec.Steps {
				if ptr.Deref(job.Spec.Suspend, false) != step.Suspend {
					// The first is activate's write (held) or the user's resume.
					job.Spec.Suspend = ptr.To(step.Suspend)
					delete(job.Annotations, v1alpha1.HeldForPlacementAnnotation)
					if job, err = c.BatchV1().Jobs(job.Namespace).Update(ctx, job, metav1.UpdateOptions{}); err != nil {
						t.Fatalf("step %d: setting suspend=%v: %v", i, step.Suspend, err)
					}
				}
				job.Status = mirror.Status(job, step.Status)
				if job, err = c.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("step %d: the API server rejected the copied status: %v", i, err)
				}
				if i == 0 && !step.Suspend {
					if cond := suspendedOf(job); cond != nil && cond.Reason == policy.ReasonNoWorkerFits {
						t.Errorf("the waiting condition survived the first copy from the mirror: %+v", cond)
					}
				}
			}
		})
	}

	for _, suspend := range []bool{false, true} {
		name := "nothing-to-run-suspended"
		if !suspend {
			name = "nothing-to-run-running"
		}
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}, Spec: batchv1.JobSpec{
				ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(suspend), Completions: ptr.To[int32](0),
				Template: sleepTemplate(),
			}}
			job, err := c.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			job.Status, _ = policy.PendingStatus(job.Status, policy.WaitingForWorker(policy.ReasonNoWorkerFits, "no worker fits"), time.Now())
			if job, err = c.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			job.Status = policy.CompletedWithoutPods(job, time.Now())
			if _, err = c.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("the API server rejected the completion of a Job with nothing to run: %v", err)
			}
		})
	}
}

func suspendedOf(job *batchv1.Job) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == batchv1.JobSuspended {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func sleepTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "registry.example/sleep:1"}}}}
}
