// Command record-status runs Jobs on a real local cluster (kube-apiserver,
// kube-controller-manager, KWOK) and records every distinct status the Job
// controller writes, into mirror/testdata/<scenario>.json. The integration
// test of package mirror replays them onto a manager Job through the status
// subresource of a real API server. Run: go run ./hack/record-status
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/internal/statusrecording"
)

// Recording is one scenario: the Job's spec and the statuses it went through,
// each with the spec.suspend in force when it was written.
type Recording = statusrecording.Recording

type scenario struct {
	name string
	job  func(*batchv1.Job)
	// act runs once the Job has pods, e.g. to suspend and resume it.
	act func(ctx context.Context, c kubernetes.Interface, job *batchv1.Job) error
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "record-status:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	ctx := context.Background()
	cluster, err := localcluster.Start(ctx, localcluster.Spec{Name: "recorder", Pools: []localcluster.Pool{{Name: "general", Nodes: 2}}},
		localcluster.Options{Dir: filepath.Join(root, "_output", "record-status"), Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	c, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		return err
	}
	for _, s := range scenarios() {
		rec, err := record(ctx, c, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		data, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			return err
		}
		path := filepath.Join(root, "mirror", "testdata", s.name+".json")
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %d statuses -> %s\n", s.name, len(rec.Steps), path)
	}
	return nil
}

func scenarios() []scenario {
	indexed := func(completions, parallelism int32) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Completions, j.Spec.Parallelism = ptr.To(completions), ptr.To(parallelism)
		}
	}
	return []scenario{
		{name: "nonindexed", job: func(j *batchv1.Job) { j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](2) }},
		{name: "indexed", job: indexed(4, 2)},
		{name: "backofflimitperindex", job: func(j *batchv1.Job) {
			indexed(3, 3)(j)
			j.Spec.BackoffLimit = nil
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
			j.Spec.Template.Annotations["pod-index-failed.stage.jobferry.dev/index"] = "1"
		}},
		{name: "podfailurepolicy-failjob", job: func(j *batchv1.Job) {
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}},
			}}}
			j.Spec.Template.Labels = map[string]string{"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}
		}},
		{name: "successpolicy", job: func(j *batchv1.Job) {
			indexed(4, 4)(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
			j.Spec.Template.Annotations["pod-index-failed.stage.jobferry.dev/index"] = "3"
		}},
		{name: "suspended", job: func(j *batchv1.Job) { j.Spec.Template.Annotations["pod-complete.stage.kwok.x-k8s.io/delay"] = "4s" },
			act: func(ctx context.Context, c kubernetes.Interface, job *batchv1.Job) error {
				if err := setSuspend(ctx, c, job, true); err != nil {
					return err
				}
				time.Sleep(2 * time.Second) // recording: let the suspension settle before resuming
				return setSuspend(ctx, c, job, false)
			}},
	}
}

func setSuspend(ctx context.Context, c kubernetes.Interface, job *batchv1.Job, suspend bool) error {
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	_, err := c.BatchV1().Jobs(job.Namespace).Patch(ctx, job.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	return err
}

func record(ctx context.Context, c kubernetes.Interface, s scenario) (*Recording, error) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: s.name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "main", Image: "registry.example/x:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				}}},
			},
		},
	}
	s.job(job)
	w, err := c.BatchV1().Jobs(job.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + job.Name})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	created, err := c.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	rec := &Recording{Spec: created.Spec}
	rec.Spec.Selector = nil
	rec.Spec.Template.Labels = nil
	acted := s.act == nil
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, fmt.Errorf("watch closed")
			}
			if ev.Type == watch.Error {
				return nil, fmt.Errorf("watch error: %v", ev.Object)
			}
			j := ev.Object.(*batchv1.Job)
			step := statusrecording.RecordedStep{Suspend: ptr.Deref(j.Spec.Suspend, false), Status: j.Status}
			if n := len(rec.Steps); n == 0 || !equality.Semantic.DeepEqual(rec.Steps[n-1], step) {
				rec.Steps = append(rec.Steps, step)
			}
			if !acted && j.Status.Active > 0 && ptr.Deref(j.Status.Ready, 0) > 0 {
				acted = true
				go func() { _ = s.act(ctx, c, j) }()
			}
			if jobstatus.Finished(j.Status) {
				return rec, nil
			}
		case <-deadline:
			return nil, fmt.Errorf("the Job did not finish within 2 minutes")
		}
	}
}
