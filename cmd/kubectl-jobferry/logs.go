package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
)

type logsOptions struct {
	follow     bool
	allPods    bool
	container  string
	pod        string
	limitBytes int64
}

func newLogsCommand(o *options) *cobra.Command {
	l := &logsOptions{}
	logs := &cobra.Command{Use: "logs", Short: "Read the logs of a manager Job's pods on its worker"}
	job := &cobra.Command{
		Use:               "job NAME",
		ValidArgsFunction: completeJobs(o, false),
		Short:             "The logs of the mirror's pods on the worker the Job runs on, served by the manager",
		Long: `logs job reads the logs of the pods of the Job's mirror on its worker. The
manager reads them for you (the inspection API, inspection.jobferry.dev): you
need the right to get the Job and jobs/log in inspection.jobferry.dev in its
namespace on the manager cluster, and no access to the worker. By default one
pod: a running one if there is any, else the newest; --all-pods reads every
pod, each line prefixed with [pod/NAME/CONTAINER]. A followed log ends when
its pods end, or at the manager's limit on a stream's lifetime.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return l.run(cmd.Context(), o, args[0])
		},
	}
	job.Flags().BoolVarP(&l.follow, "follow", "f", false, "stream the logs as they are written")
	job.Flags().BoolVar(&l.allPods, "all-pods", false, "the logs of every pod of the mirror, not one")
	job.Flags().StringVarP(&l.container, "container", "c", "", "container to read (default: every container of the pod)")
	job.Flags().StringVar(&l.pod, "pod", "", "the pod of the mirror to read (default: a running one, else the newest)")
	job.Flags().Int64Var(&l.limitBytes, "limit-bytes", 0, "the most bytes to read (the manager caps it too)")
	logs.AddCommand(job)
	return logs
}

// params are the log subresource's query parameters.
func (l *logsOptions) params() map[string]string {
	p := map[string]string{}
	if l.follow {
		p[inspectionv1alpha1.LogFollow] = "true"
	}
	if l.allPods {
		p[inspectionv1alpha1.LogAllPods] = "true"
	}
	if l.container != "" {
		p[inspectionv1alpha1.LogContainer] = l.container
	}
	if l.pod != "" {
		p[inspectionv1alpha1.LogPod] = l.pod
	}
	if l.limitBytes > 0 {
		p[inspectionv1alpha1.LogLimitBytes] = strconv.FormatInt(l.limitBytes, 10)
	}
	return p
}

func (l *logsOptions) run(ctx context.Context, o *options, name string) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	m, err := o.manager()
	if err != nil {
		return err
	}
	// The Job first, as the user: a Job they may not read, or that does not
	// exist, is said by the API server in its own words.
	if _, err := m.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("reading Job %s/%s on the manager: %w", ns, name, err)
	}
	stream, err := m.logs(ctx, ns, name, l.params())
	if err != nil {
		return err
	}
	defer stream.Close()
	if _, err := io.Copy(o.streams.Out, stream); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the logs of Job %s/%s: %w", ns, name, err)
	}
	return nil
}
