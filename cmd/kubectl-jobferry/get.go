package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes/scheme"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/kubectl/pkg/cmd/get"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// getJobsOptions are the flags of `get jobs`: kubectl's printing
// (PrintFlags for json, yaml, name and the templates; custom-columns;
// jobferry's own table, with wide and --no-headers), a label selector,
// paging and --watch.
type getJobsOptions struct {
	print         *genericclioptions.PrintFlags
	customColumns *get.CustomColumnsPrintFlags
	noHeaders     bool
	allNamespaces bool
	selector      string
	chunkSize     int64
	watch         bool
}

func newGetCommand(o *options) *cobra.Command {
	g := &getJobsOptions{print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme), customColumns: get.NewCustomColumnsPrintFlags()}
	get := &cobra.Command{
		Use:   "get",
		Short: "List manager Jobs with the worker each runs on",
	}
	jobs := &cobra.Command{
		Use:               "jobs [NAME...]",
		ValidArgsFunction: completeJobs(o, true),
		Aliases:           []string{"job"},
		Short:             "Like `kubectl get jobs`, with the WORKER and dispatch ATTEMPT of each Job",
		Example: `  kubectl jobferry get jobs -A
  kubectl jobferry get jobs -n team-a -l app=train -o wide
  kubectl jobferry get jobs -n team-a train -o jsonpath='{.metadata.annotations.jobferry\.dev/worker}'
  kubectl jobferry get jobs -A -o custom-columns=NAME:.metadata.name,WORKER:.metadata.annotations.jobferry\.dev/worker
  kubectl jobferry get jobs -n team-a --watch`,
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := g.printer()
			if err != nil {
				return err
			}
			if len(args) > 0 && g.selector != "" {
				return errors.New("name cannot be provided when a selector is specified")
			}
			return g.run(cmd.Context(), o, args, printer)
		},
	}
	g.print.AddFlags(jobs)
	jobs.Flag("output").Usage = "output format: wide, json, yaml, name, jsonpath=..., jsonpath-file=..., go-template=..., go-template-file=..., custom-columns=..., custom-columns-file=... (default: a table)"
	jobs.Flags().BoolVar(&g.noHeaders, "no-headers", false, "print the table without its header")
	jobs.Flags().BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "list the Jobs of every namespace")
	jobs.Flags().StringVarP(&g.selector, "selector", "l", "", "label selector, as kubectl get's -l (e.g. -l app=train,tier!=batch)")
	jobs.Flags().Int64Var(&g.chunkSize, "chunk-size", 500, "read Jobs in pages of this many, printed as they come; 0: all in one request")
	jobs.Flags().BoolVarP(&g.watch, "watch", "w", false, "after listing, print each change of the Jobs until interrupted")
	get.AddCommand(jobs)
	return get
}

// jobPrinter prints Jobs: one at a time (a table row, an object) or, for
// the formats that print one document, the whole list at the end.
type jobPrinter struct {
	// table is jobferry's own: wide adds columns.
	table, wide, noHeaders bool
	// each prints one object (name, templates); list, set for json, yaml
	// and custom-columns, is given the Jobs as one List (its columns
	// aligned over all), or one Job alone as the Job when oneAsItself.
	each        printers.ResourcePrinter
	list        printers.ResourcePrinter
	oneAsItself bool
}

// printer is what -o asks for; an unknown format is an error that lists
// the known ones, as kubectl's.
func (g *getJobsOptions) printer() (*jobPrinter, error) {
	format := strings.ToLower(ptr.Deref(g.print.OutputFormat, ""))
	switch {
	case format == "" || format == "wide":
		return &jobPrinter{table: true, wide: format == "wide", noHeaders: g.noHeaders}, nil
	case strings.HasPrefix(format, "custom-columns"):
		g.customColumns.NoHeaders = g.noHeaders
		p, err := g.customColumns.ToPrinter(*g.print.OutputFormat)
		if err != nil {
			return nil, err
		}
		return &jobPrinter{list: p}, nil
	}
	p, err := g.print.ToPrinter()
	if err != nil {
		return nil, fmt.Errorf("%w (or wide, custom-columns=..., custom-columns-file=...)", err)
	}
	if format == "json" || format == "yaml" {
		return &jobPrinter{list: p, oneAsItself: true}, nil
	}
	return &jobPrinter{each: p}, nil
}

func (g *getJobsOptions) run(ctx context.Context, o *options, names []string, p *jobPrinter) error {
	m, err := o.manager()
	if err != nil {
		return err
	}
	ns := ""
	if !g.allNamespaces || len(names) > 0 {
		if ns, err = o.namespace(); err != nil {
			return err
		}
	}
	jobs := m.kube.BatchV1().Jobs(ns)
	out := &jobOutput{printer: p, out: o.streams.Out, withNamespace: g.allNamespaces && len(names) == 0, now: time.Now()}
	resourceVersion := ""
	if len(names) > 0 {
		// One GET per name, as kubectl get jobs NAME: no list of the rest.
		for _, name := range names {
			job, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading Job %s/%s on the manager: %w", ns, name, err)
			}
			if err := out.add(job); err != nil {
				return err
			}
		}
	} else {
		// Page by page, each printed as it comes: at 100,000 Jobs one
		// request would be hundreds of MB.
		opts := metav1.ListOptions{LabelSelector: g.selector, Limit: g.chunkSize}
		for {
			list, err := jobs.List(ctx, opts)
			if err != nil {
				return fmt.Errorf("listing Jobs on the manager: %w", err)
			}
			for i := range list.Items {
				if err := out.add(&list.Items[i]); err != nil {
					return err
				}
			}
			resourceVersion = list.ResourceVersion
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
	}
	if err := out.flush(); err != nil {
		return err
	}
	if out.printed == 0 && !g.watch {
		if ns == "" {
			fmt.Fprintln(o.streams.ErrOut, "No resources found")
		} else {
			fmt.Fprintf(o.streams.ErrOut, "No resources found in %s namespace.\n", ns)
		}
		return nil
	}
	if !g.watch {
		return nil
	}
	return g.follow(ctx, jobs, names, resourceVersion, out)
}

// follow prints each change of the Jobs listed (or named) from
// resourceVersion on, until ctx ends or the server closes the watch.
func (g *getJobsOptions) follow(ctx context.Context, jobs batchv1client.JobInterface, names []string, resourceVersion string, out *jobOutput) error {
	opts := metav1.ListOptions{LabelSelector: g.selector, ResourceVersion: resourceVersion, AllowWatchBookmarks: false}
	if len(names) == 1 {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", names[0]).String()
	}
	w, err := jobs.Watch(ctx, opts)
	if err != nil {
		return fmt.Errorf("watching Jobs on the manager: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if e.Type == watch.Error {
				return fmt.Errorf("watching Jobs on the manager: %w", apierrors.FromObject(e.Object))
			}
			job, isJob := e.Object.(*batchv1.Job)
			if !isJob || (len(names) > 1 && !slices.Contains(names, job.Name)) {
				continue
			}
			out.now = time.Now()
			if err := out.add(job); err != nil {
				return err
			}
			if err := out.flush(); err != nil {
				return err
			}
		}
	}
}

// jobOutput prints Jobs with a jobPrinter: table rows under one header,
// objects one by one as they come, or a List of those added since the last
// flush.
type jobOutput struct {
	printer       *jobPrinter
	out           io.Writer
	withNamespace bool
	now           time.Time
	table         *tabwriter.Writer
	headed        bool
	pending       []batchv1.Job
	printed       int
}

func (o *jobOutput) add(job *batchv1.Job) error {
	o.printed++
	switch p := o.printer; {
	case p.table:
		if o.table == nil {
			o.table = tabwriter.NewWriter(o.out, 0, 0, 3, ' ', 0)
		}
		if !o.headed && !p.noHeaders {
			fmt.Fprintln(o.table, strings.Join(jobHeader(o.withNamespace, p.wide), "\t"))
		}
		o.headed = true
		fmt.Fprintln(o.table, strings.Join(jobCells(jobRowOf(job, o.now), o.withNamespace, p.wide), "\t"))
		return nil
	case p.list != nil:
		o.pending = append(o.pending, *job)
		return nil
	default:
		return p.each.PrintObj(job.DeepCopy(), o.out)
	}
}

// flush prints what waits: the table's aligned rows, or the List.
func (o *jobOutput) flush() error {
	if o.table != nil {
		return o.table.Flush()
	}
	if o.printer.list == nil || len(o.pending) == 0 && o.printed > 0 {
		return nil
	}
	items := &batchv1.JobList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, j := range o.pending {
		j.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
		items.Items = append(items.Items, j)
	}
	o.pending = nil
	if len(items.Items) == 1 && o.printer.oneAsItself {
		// One Job named prints as the Job, as kubectl get job NAME -o yaml.
		return o.printer.list.PrintObj(&items.Items[0], o.out)
	}
	return o.printer.list.PrintObj(items, o.out)
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

// jobHeader and jobCells are the table's columns: kubectl's, then
// jobferry's.
func jobHeader(withNamespace, wide bool) []string {
	header := []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "WORKER", "ATTEMPT"}
	if withNamespace {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "DISPATCHED")
	}
	return header
}

func jobCells(r jobRow, withNamespace, wide bool) []string {
	cells := []string{r.Name, r.Status, r.Completions, r.Duration, r.Age, r.Worker, r.Attempt}
	if withNamespace {
		cells = append([]string{r.Namespace}, cells...)
	}
	if wide {
		cells = append(cells, r.Dispatched)
	}
	return cells
}
