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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/eventtime"
)

func newDescribeCommand(o *options) *cobra.Command {
	describe := &cobra.Command{Use: "describe", Short: "Describe a manager Job across the manager and its worker"}
	describe.AddCommand(&cobra.Command{
		Use:               "job NAME",
		ValidArgsFunction: completeJobs(o, false),
		Short:             "The manager Job, its placement history, its mirror on the worker, the mirror's pods and the worker's Events",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			m, err := o.manager()
			if err != nil {
				return err
			}
			d, err := readDescription(cmd.Context(), m, ns, args[0])
			if err != nil {
				return err
			}
			printDescription(o.streams.Out, d, time.Now())
			return nil
		},
	})
	return describe
}

// description is what `describe job` reads on both clusters. What could
// not be read on the worker is said in the *Note fields, not fatal: the
// manager side is still worth seeing.
type description struct {
	Job *batchv1.Job
	// Events of the manager Job: its placement history.
	Events []corev1.Event
	Worker string
	// Mirror on the worker; nil with MirrorNote saying why.
	Mirror     *batchv1.Job
	MirrorNote string
	Pods       []corev1.Pod
	PodsNote   string
	// WorkerEvents of the mirror and its pods.
	WorkerEvents []corev1.Event
	EventsNote   string
}

func readDescription(ctx context.Context, m *managerClients, ns, name string) (*description, error) {
	job, err := m.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading Job %s/%s on the manager: %w", ns, name, err)
	}
	d := &description{Job: job, Worker: job.Annotations[v1alpha1.WorkerAnnotation]}
	events, err := m.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(job.UID)).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the Events of Job %s/%s on the manager: %w", ns, name, err)
	}
	d.Events = sortEvents(events.Items)
	inspection, err := m.inspect(ctx, ns, name)
	if err != nil {
		d.MirrorNote = err.Error()
		return d, nil
	}
	d.fromInspection(inspection)
	return d, nil
}

// fromInspection fills in the worker side the manager served.
func (d *description) fromInspection(in *inspectionv1alpha1.JobInspection) {
	if in.Worker != "" {
		d.Worker = in.Worker
	}
	d.Mirror, d.MirrorNote = in.Mirror, in.Notes.Mirror
	d.Pods, d.PodsNote = in.Pods, in.Notes.Pods
	d.WorkerEvents, d.EventsNote = in.Events, in.Notes.Events
}

// sortEvents orders Events by when they last happened.
func sortEvents(events []corev1.Event) []corev1.Event {
	eventtime.Sort(events)
	return events
}

func printDescription(out io.Writer, d *description, now time.Time) {
	job := d.Job
	row := jobRowOf(job, now)
	fmt.Fprintf(out, "Name:         %s\nNamespace:    %s\nStatus:       %s\nCompletions:  %s\nPods:         %d active / %d succeeded / %d failed\n",
		job.Name, job.Namespace, row.Status, row.Completions, job.Status.Active, job.Status.Succeeded, job.Status.Failed)
	fmt.Fprintf(out, "Managed by:   %s\n", ptr.Deref(job.Spec.ManagedBy, "<kube-controller-manager>"))
	fmt.Fprintf(out, "Worker:       %s\nAttempt:      %s\n", row.Worker, row.Attempt)
	if excluded := job.Annotations[v1alpha1.ExcludedWorkersAnnotation]; excluded != "" {
		fmt.Fprintf(out, "Excluded:     %s (a same-named Job not created by jobferry is there)\n", excluded)
	}
	if selector := job.Annotations[v1alpha1.ClusterSelectorAnnotation]; selector != "" {
		fmt.Fprintf(out, "Cluster selector: %s\n", selector)
	}
	printConditions(out, "", "Conditions:", job.Status.Conditions)
	printEvents(out, "Events on the manager (placement history, Warnings forwarded from the worker):", d.Events, false, now)

	fmt.Fprintf(out, "\nMirror on worker %s:\n", row.Worker)
	if d.Mirror == nil {
		fmt.Fprintf(out, "  %s\n", d.MirrorNote)
		return
	}
	m := d.Mirror
	fmt.Fprintf(out, "  Job:        %s/%s (uid %s, attempt %s)\n  Status:     %s, %d active / %d succeeded / %d failed\n",
		m.Namespace, m.Name, m.UID, m.Labels[v1alpha1.DispatchAttemptLabel], kubectlJobStatus(m), m.Status.Active, m.Status.Succeeded, m.Status.Failed)
	fmt.Fprintf(out, "  Managed by: %s\n", ptr.Deref(m.Spec.ManagedBy, "<kube-controller-manager>"))
	printConditions(out, "  ", "Conditions:", m.Status.Conditions)

	fmt.Fprintf(out, "\nPods on worker %s:\n", row.Worker)
	if d.PodsNote != "" {
		fmt.Fprintf(out, "  %s\n", d.PodsNote)
	}
	switch {
	case len(d.Pods) > 0:
		w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
		fmt.Fprintln(w, "  NAME\tPHASE\tNODE\tREASON\tAGE")
		for _, p := range d.Pods {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", p.Name, p.Status.Phase, orNone(p.Spec.NodeName), podReason(&p), age(p.CreationTimestamp, now))
		}
		w.Flush()
		printContainers(out, d.Pods)
	case d.PodsNote == "":
		fmt.Fprintln(out, "  <none>")
	}
	title := fmt.Sprintf("Events on worker %s (mirror and pods):", row.Worker)
	if d.EventsNote != "" {
		title += "\n  " + d.EventsNote
		if len(d.WorkerEvents) == 0 {
			fmt.Fprintf(out, "\n%s\n", title)
			return
		}
	}
	printEvents(out, title, d.WorkerEvents, true, now)
}

func printConditions(out io.Writer, indent, title string, conds []batchv1.JobCondition) {
	fmt.Fprintln(out, indent+title)
	if len(conds) == 0 {
		fmt.Fprintln(out, indent+"  <none>")
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, indent+"  TYPE\tSTATUS\tREASON\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(w, "%s  %s\t%s\t%s\t%s\n", indent, c.Type, c.Status, orNone(c.Reason), c.Message)
	}
	w.Flush()
}

func printEvents(out io.Writer, title string, events []corev1.Event, withObject bool, now time.Time) {
	fmt.Fprintf(out, "\n%s\n", title)
	if len(events) == 0 {
		fmt.Fprintln(out, "  <none>")
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	header := "  LAST SEEN\tTYPE\tREASON\t"
	if withObject {
		header += "OBJECT\t"
	}
	fmt.Fprintln(w, header+"MESSAGE")
	for _, e := range events {
		line := fmt.Sprintf("  %s\t%s\t%s\t", duration.HumanDuration(now.Sub(eventtime.Last(e))), e.Type, e.Reason)
		if withObject {
			line += strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name + "\t"
		}
		fmt.Fprintln(w, line+strings.TrimSpace(e.Message))
	}
	w.Flush()
}

// printContainers shows, as kubectl describe pod does, the containers
// worth a look: those waiting, ended with a non-zero exit code, or
// restarted, with their state, exit code, restarts and last state.
func printContainers(out io.Writer, pods []corev1.Pod) {
	var rows []string
	for _, p := range pods {
		statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
		for _, c := range statuses {
			if !ofNote(c) {
				continue
			}
			exit := "<none>"
			if t := c.State.Terminated; t != nil {
				exit = fmt.Sprint(t.ExitCode)
			}
			last := "<none>"
			if t := c.LastTerminationState.Terminated; t != nil {
				last = fmt.Sprintf("Terminated (%s), exit code %d", orNone(t.Reason), t.ExitCode)
			}
			rows = append(rows, fmt.Sprintf("  %s\t%s\t%s\t%s\t%d\t%s\t%s", p.Name, c.Name, containerState(c.State), exit, c.RestartCount, last, stateMessage(c.State)))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(out, "\nContainers that failed, wait or restarted:")
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "  POD\tCONTAINER\tSTATE\tEXIT CODE\tRESTARTS\tLAST STATE\tMESSAGE")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	w.Flush()
}

// ofNote: a container waiting, ended with a non-zero exit code, or
// restarted.
func ofNote(c corev1.ContainerStatus) bool {
	return c.State.Waiting != nil || (c.State.Terminated != nil && c.State.Terminated.ExitCode != 0) ||
		c.RestartCount > 0 || c.LastTerminationState.Terminated != nil
}

// containerState is a container's state as kubectl describe pod names it,
// with its reason.
func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "Waiting (" + orNone(s.Waiting.Reason) + ")"
	case s.Terminated != nil:
		return "Terminated (" + orNone(s.Terminated.Reason) + ")"
	case s.Running != nil:
		return "Running"
	}
	return "<unknown>"
}

func stateMessage(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil && s.Waiting.Message != "":
		return s.Waiting.Message
	case s.Terminated != nil && s.Terminated.Message != "":
		return s.Terminated.Message
	}
	return ""
}

// podReason is why a pod is where it is: a waiting or terminated
// container's reason, else the pod's.
func podReason(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "":
			return s.State.Waiting.Reason
		case s.State.Terminated != nil && s.State.Terminated.Reason != "":
			return s.State.Terminated.Reason
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason
		}
	}
	return orNone(p.Status.Reason)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
