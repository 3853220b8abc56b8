package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

type logsOptions struct {
	follow    bool
	allPods   bool
	container string
}

func newLogsCommand(o *options) *cobra.Command {
	l := &logsOptions{}
	logs := &cobra.Command{Use: "logs", Short: "Read the logs of a manager Job's pods on its worker"}
	job := &cobra.Command{
		Use:   "job NAME",
		Short: "The logs of the mirror's pods on the worker the Job runs on, through that worker's API (pods/log)",
		Long: `logs job reads the logs of the pods of the Job's mirror on its worker, through
the worker's API server with the manager's credential there (the worker chart
grants it with managerIdentity.allowInspection=true). By default one pod: a
running one if there is any, else the newest; --all-pods reads every pod, each
line prefixed with [pod/NAME/CONTAINER].`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return l.run(cmd.Context(), o, args[0])
		},
	}
	job.Flags().BoolVarP(&l.follow, "follow", "f", false, "stream the logs as they are written")
	job.Flags().BoolVar(&l.allPods, "all-pods", false, "the logs of every pod of the mirror, not one")
	job.Flags().StringVarP(&l.container, "container", "c", "", "container to read (default: every container of the pod)")
	logs.AddCommand(job)
	return logs
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
	job, err := m.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Job %s/%s on the manager: %w", ns, name, err)
	}
	workerName := job.Annotations[v1alpha1.WorkerAnnotation]
	if workerName == "" {
		return fmt.Errorf("job %s/%s is on no worker yet: it has no pods to read", ns, name)
	}
	worker, err := m.workerClient(ctx, o.systemNamespace, workerName)
	if err != nil {
		return err
	}
	mirror, err := worker.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && mirror.Labels[v1alpha1.OriginUIDLabel] != string(job.UID)) {
		note := ""
		if finishedJob(job) {
			note = ": it finished, and a manager run with --delete-finished-mirrors deletes a finished mirror with its pods"
		}
		return fmt.Errorf("job %s/%s has no mirror on worker %s%s", ns, name, workerName, note)
	}
	if err != nil {
		return fmt.Errorf("reading the mirror of %s/%s on worker %s: %w", ns, name, workerName, err)
	}
	pods, err := mirrorPods(ctx, worker, mirror)
	if err != nil {
		return inspectionError(workerName, "list the mirror's pods", err)
	}
	if len(pods) == 0 {
		return fmt.Errorf("the mirror of %s/%s on worker %s has no pods", ns, name, workerName)
	}
	targets := logTargets(pods, l.container, l.allPods)
	if len(targets) == 0 {
		return fmt.Errorf("no pod of the mirror of %s/%s has a container %q", ns, name, l.container)
	}
	prefix := l.allPods || len(targets) > 1
	if !l.follow {
		for _, t := range targets {
			if err := streamLog(ctx, worker, workerName, t, false, prefix, o.streams.Out); err != nil {
				return err
			}
		}
		return nil
	}
	// Following several containers: all at once, lines whole.
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make([]error, len(targets))
	out := &lockedWriter{w: o.streams.Out, mu: &mu}
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = streamLog(ctx, worker, workerName, t, true, prefix, out)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// logTarget is one container of one pod.
type logTarget struct {
	pod       corev1.Pod
	container string
}

// logTargets picks the containers to read: of every pod, or of one pod (a
// running one, else the newest), and of one container or all.
func logTargets(pods []corev1.Pod, container string, allPods bool) []logTarget {
	chosen := pods
	if !allPods {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		if i < 0 {
			i = len(pods) - 1
		}
		chosen = pods[i : i+1]
	}
	var out []logTarget
	for _, p := range chosen {
		for _, c := range p.Spec.Containers {
			if container == "" || c.Name == container {
				out = append(out, logTarget{pod: p, container: c.Name})
			}
		}
	}
	return out
}

func streamLog(ctx context.Context, worker kubernetes.Interface, workerName string, t logTarget, follow, prefix bool, out io.Writer) error {
	stream, err := worker.CoreV1().Pods(t.pod.Namespace).GetLogs(t.pod.Name, &corev1.PodLogOptions{Container: t.container, Follow: follow}).Stream(ctx)
	if err != nil {
		return inspectionError(workerName, fmt.Sprintf("read the logs of pod %s/%s, container %s", t.pod.Namespace, t.pod.Name, t.container), err)
	}
	defer stream.Close()
	scanner := bufio.NewScanner(stream)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if prefix {
			line = fmt.Sprintf("[pod/%s/%s] %s", t.pod.Name, t.container, line)
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			return err
		}
	}
	if err := scanner.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the logs of pod %s/%s on worker %s: %w", t.pod.Namespace, t.pod.Name, workerName, err)
	}
	return nil
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
