// Package managedjobs finds the manager Jobs jobferry still has to run:
// what removing a worker waits for (kubectl jobferry remove) and what
// uninstalling the manager would strand (the chart's uninstall check), as
// their spec.managedBy is immutable and nothing else will ever run them.
package managedjobs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// Job is an unfinished manager Job.
type Job struct {
	Namespace, Name string
	// Worker is the WorkerCluster it is placed on; empty while unplaced.
	Worker string
	// Phase is jobstatus.Phase of its status.
	Phase string
}

func (j Job) String() string {
	where := "not placed yet"
	if j.Worker != "" {
		where = "on worker " + j.Worker
	}
	return fmt.Sprintf("%s/%s (%s, %s)", j.Namespace, j.Name, j.Phase, where)
}

// placed reports whether jobferry manages job, on worker unless worker is
// empty.
func placed(job *batchv1.Job, worker string) bool {
	if ptr.Deref(job.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy {
		return false
	}
	return worker == "" || job.Annotations[v1alpha1.WorkerAnnotation] == worker
}

// pageSize bounds each list call: a cluster may hold many Jobs.
const pageSize = 100

// List pages through every Job of the cluster and returns the unfinished
// Jobs jobferry manages (placed on worker only, unless worker is empty), by
// namespace and name, and how many of them are finished.
func List(ctx context.Context, kube kubernetes.Interface, worker string) (unfinished []Job, finished int, err error) {
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		page, err := kube.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, 0, fmt.Errorf("listing Jobs: %w", err)
		}
		for i := range page.Items {
			job := &page.Items[i]
			switch {
			case !placed(job, worker):
			case jobstatus.Finished(job.Status):
				finished++
			default:
				unfinished = append(unfinished, Job{Namespace: job.Namespace, Name: job.Name, Worker: job.Annotations[v1alpha1.WorkerAnnotation], Phase: jobstatus.Phase(job.Status)})
			}
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	sort.Slice(unfinished, func(i, j int) bool {
		if unfinished[i].Namespace != unfinished[j].Namespace {
			return unfinished[i].Namespace < unfinished[j].Namespace
		}
		return unfinished[i].Name < unfinished[j].Name
	})
	return unfinished, finished, nil
}

// Lines lists jobs one per line, indented, at most max of them (then how
// many more).
func Lines(jobs []Job, max int) string {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.String()
	}
	return Indented(names, max)
}

// Indented lists lines one per line, indented, at most max of them (then
// how many more): how removal and the uninstall check name what they wait
// for.
func Indented(lines []string, max int) string {
	var b strings.Builder
	for i, l := range lines {
		if i == max {
			fmt.Fprintf(&b, "  ... and %d more\n", len(lines)-max)
			break
		}
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}
