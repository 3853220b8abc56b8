package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

func newGetCommand(o *options) *cobra.Command {
	var allNamespaces bool
	var output string
	get := &cobra.Command{
		Use:   "get",
		Short: "List manager Jobs with the worker each runs on",
	}
	jobs := &cobra.Command{
		Use:     "jobs [NAME...]",
		Aliases: []string{"job"},
		Short:   "Like `kubectl get jobs`, with the WORKER and dispatch ATTEMPT of each Job",
		Example: `  kubectl jobferry get jobs -A
  kubectl jobferry get jobs -n team-a -o yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"", "wide", "json", "yaml", "name"}, output) {
				return fmt.Errorf("--output %q: use wide, json, yaml or name", output)
			}
			return getJobs(cmd.Context(), o, args, allNamespaces, output)
		},
	}
	jobs.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the Jobs of every namespace")
	jobs.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json, yaml or name (default: a table)")
	get.AddCommand(jobs)
	return get
}

func getJobs(ctx context.Context, o *options, names []string, allNamespaces bool, output string) error {
	m, err := o.manager()
	if err != nil {
		return err
	}
	ns := ""
	if !allNamespaces {
		if ns, err = o.namespace(); err != nil {
			return err
		}
	}
	list, err := m.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Jobs on the manager: %w", err)
	}
	jobs := list.Items
	if len(names) > 0 {
		jobs = slices.DeleteFunc(jobs, func(j batchv1.Job) bool { return !slices.Contains(names, j.Name) })
		for _, name := range names {
			if !slices.ContainsFunc(jobs, func(j batchv1.Job) bool { return j.Name == name }) {
				return fmt.Errorf("job %q not found in namespace %q", name, ns)
			}
		}
	}
	slices.SortFunc(jobs, func(a, b batchv1.Job) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	out := o.streams.Out
	switch output {
	case "json", "yaml":
		items := &batchv1.JobList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
		for _, j := range jobs {
			j.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
			items.Items = append(items.Items, j)
		}
		var p printers.ResourcePrinter = &printers.JSONPrinter{}
		if output == "yaml" {
			p = &printers.YAMLPrinter{}
		}
		return p.PrintObj(items, out)
	case "name":
		for _, j := range jobs {
			fmt.Fprintf(out, "job.batch/%s\n", j.Name)
		}
		return nil
	}
	if len(jobs) == 0 {
		if allNamespaces {
			fmt.Fprintln(o.streams.ErrOut, "No resources found")
		} else {
			fmt.Fprintf(o.streams.ErrOut, "No resources found in %s namespace.\n", ns)
		}
		return nil
	}
	printJobTable(out, jobs, allNamespaces, output == "wide", time.Now())
	return nil
}

// jobRow is one line of `get jobs`: kubectl's columns and jobferry's.
type jobRow struct {
	Namespace, Name, Status, Completions, Duration, Age string
	Worker, Attempt, Dispatched                         string
}

// jobRowOf renders a manager Job as kubectl's Job printer does (status,
// completions, duration, age), plus where it runs: WORKER is the
// WorkerCluster it is placed on ("<none>" while it waits), ATTEMPT its
// dispatch attempt, DISPATCHED whether jobferry manages it at all.
func jobRowOf(job *batchv1.Job, now time.Time) jobRow {
	row := jobRow{
		Namespace: job.Namespace, Name: job.Name, Status: kubectlJobStatus(job),
		Completions: completions(job), Age: age(job.CreationTimestamp, now),
		Worker: "<none>", Attempt: "<none>", Dispatched: "no",
	}
	if job.Status.StartTime != nil {
		end := now
		if job.Status.CompletionTime != nil {
			end = job.Status.CompletionTime.Time
		}
		row.Duration = duration.HumanDuration(end.Sub(job.Status.StartTime.Time))
	}
	if ptr.Deref(job.Spec.ManagedBy, "") == v1alpha1.ManagerManagedBy {
		row.Dispatched = "yes"
	}
	if w := job.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
		row.Worker = w
	}
	if a := job.Annotations[v1alpha1.DispatchAttemptAnnotation]; a != "" {
		row.Attempt = a
	}
	return row
}

// kubectlJobStatus is the STATUS column of `kubectl get jobs`.
func kubectlJobStatus(job *batchv1.Job) string {
	switch {
	case conditionTrue(job, batchv1.JobComplete):
		return "Complete"
	case conditionTrue(job, batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case conditionTrue(job, batchv1.JobSuspended):
		return "Suspended"
	case conditionTrue(job, batchv1.JobFailureTarget):
		return "FailureTarget"
	case conditionTrue(job, batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	default:
		return "Running"
	}
}

func conditionTrue(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return jobstatus.ConditionTrue(job.Status, t)
}

// completions is the COMPLETIONS column of `kubectl get jobs`.
func completions(job *batchv1.Job) string {
	if job.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", job.Status.Succeeded, *job.Spec.Completions)
	}
	parallelism := ptr.Deref(job.Spec.Parallelism, 0)
	if parallelism > 1 {
		return fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, parallelism)
	}
	return fmt.Sprintf("%d/1", job.Status.Succeeded)
}

func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func printJobTable(out io.Writer, jobs []batchv1.Job, withNamespace, wide bool, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	header := []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "WORKER", "ATTEMPT"}
	if withNamespace {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "DISPATCHED")
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for i := range jobs {
		r := jobRowOf(&jobs[i], now)
		cells := []string{r.Name, r.Status, r.Completions, r.Duration, r.Age, r.Worker, r.Attempt}
		if withNamespace {
			cells = append([]string{r.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, r.Dispatched)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	w.Flush()
}
