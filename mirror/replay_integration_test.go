//go:build integration

package mirror_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
	"github.com/jobferry/jobferry/internal/statusrecording"
	"github.com/jobferry/jobferry/mirror"
)

// Every status sequence a real kube-controller-manager wrote (recorded by
// hack/record-status into testdata/) is copied onto a manager Job through the
// status subresource of a real kube-apiserver: every write must be accepted,
// and the manager ends with the worker's final status.
func TestIntegrationReplayRecordedStatuses(t *testing.T) {
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) < 6 {
		t.Fatalf("want the six recorded scenarios in testdata/, found %v (%v)", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var rec statusrecording.Recording
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}, Spec: rec.Spec}
			job.Spec.ManagedBy = ptr.To(v1alpha1.ManagerManagedBy)
			job.Spec.Suspend = ptr.To(rec.Steps[0].Suspend)
			job, err = client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range rec.Steps {
				if ptr.Deref(job.Spec.Suspend, false) != step.Suspend {
					job.Spec.Suspend = ptr.To(step.Suspend)
					if job, err = client.BatchV1().Jobs(job.Namespace).Update(ctx, job, metav1.UpdateOptions{}); err != nil {
						t.Fatalf("step %d: setting suspend=%v: %v", i, step.Suspend, err)
					}
				}
				job.Status = mirror.Status(job, step.Status)
				if job, err = client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("step %d: the API server rejected the copied status: %v", i, err)
				}
			}
			last := rec.Steps[len(rec.Steps)-1].Status
			if diff := cmp.Diff(summary(last), summary(job.Status)); diff != "" {
				t.Errorf("final manager status differs from the worker's (-worker +manager):\n%s", diff)
			}
		})
	}
}

func summary(s batchv1.JobStatus) map[string]any {
	var conds []string
	for _, c := range s.Conditions {
		conds = append(conds, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	return map[string]any{
		"active": s.Active, "ready": ptr.Deref(s.Ready, 0), "terminating": ptr.Deref(s.Terminating, 0),
		"succeeded": s.Succeeded, "failed": s.Failed,
		"completedIndexes": s.CompletedIndexes, "failedIndexes": ptr.Deref(s.FailedIndexes, ""),
		"conditions": conds, "startTime": timeString(s.StartTime), "completionTime": timeString(s.CompletionTime),
	}
}

func timeString(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().String()
}
