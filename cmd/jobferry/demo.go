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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/spf13/cobra"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/localcluster"
)

const demoNamespace = "demo"

func newDemoCommand() *cobra.Command {
	var dir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a manager and two workers and run sample Jobs to completion; leaves the clusters up for a look",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), dir, timeout)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultDevDir(), "directory holding the clusters' state, kubeconfigs and logs")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the sample Jobs to finish")
	return cmd
}

// demoJob is a sample Job and the worker it runs on.
type demoJob struct {
	worker string
	job    *batchv1.Job
}

// demoJobs runs directly on the workers: dispatch from the manager is not
// built yet, so the demo shows the real stack each worker offers.
func demoJobs() []demoJob {
	gpu := sampleJob("train-gpu", 4, 2, 3*time.Second)
	gpu.Spec.Template.Spec.NodeSelector = map[string]string{jobferryv1alpha1.DefaultPoolLabel: "gpu"}
	gpu.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: gpuTaint.Key, Operator: corev1.TolerationOpEqual, Value: gpuTaint.Value, Effect: gpuTaint.Effect}}
	gpu.Spec.Template.Spec.Containers[0].Resources.Requests[gpuResource] = resource.MustParse("1")
	gpu.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{gpuResource: resource.MustParse("1")}
	return []demoJob{
		{"worker-1", gpu},
		{"worker-1", sampleJob("etl", 3, 3, 2*time.Second)},
		{"worker-2", sampleJob("report", 2, 1, 2*time.Second)},
	}
}

func sampleJob(name string, completions, parallelism int32, runFor time.Duration) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: name},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions),
			Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
					// How long KWOK keeps the pod running before it succeeds.
					"pod-complete.stage.kwok.x-k8s.io/delay": runFor.String(),
				}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:  "main",
						Image: "registry.example/" + name + ":1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("1"),
							corev1.ResourceMemory: resource.MustParse("1Gi"),
						}},
					}},
				},
			},
		},
	}
}

func runDemo(ctx context.Context, out io.Writer, dir string, timeout time.Duration) error {
	if stopped, err := localcluster.StopEnvironment(dir); err != nil {
		return err
	} else if stopped > 0 {
		fmt.Fprintf(out, "stopped the %d cluster(s) a previous run left in %s\n", stopped, dir)
	}
	env, err := startDev(ctx, dir, 2, out)
	if err != nil {
		if env != nil {
			_ = env.Stop()
		}
		return err
	}
	// Until the demo ends, Ctrl-C stops every cluster (localcluster tracks
	// them); once it ends they are left running for a look.
	clients := map[string]kubernetes.Interface{}
	for _, w := range env.Workers {
		c, err := kubernetes.NewForConfig(w.RESTConfig())
		if err != nil {
			return errors.Join(err, env.Stop())
		}
		clients[w.Name] = c
	}
	if err := runSampleJobs(ctx, out, clients, timeout); err != nil {
		fmt.Fprintf(out, "\nthe clusters are still up for a look: logs in %s/<cluster>/logs; stop them with `make demo-down`\n", dir)
		env.Release()
		return err
	}
	env.Release()
	fmt.Fprintf(out, "\nevery sample Job is Complete. The clusters stay up; look around:\n  %s\n  %s\n  %s\nstop everything with: make demo-down\n",
		kubectlHint(dir, "manager", "get workerclusters"),
		kubectlHint(dir, "worker-1", "get jobs,pods -n demo -o wide"),
		kubectlHint(dir, "worker-1", "get nodes -L jobferry.dev/pool"))
	return nil
}

func runSampleJobs(ctx context.Context, out io.Writer, clients map[string]kubernetes.Interface, timeout time.Duration) error {
	jobs := demoJobs()
	for worker, c := range clients {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s on %s: %w", demoNamespace, worker, err)
		}
	}
	fmt.Fprintf(out, "\ncreating %d sample Jobs directly on the workers (dispatch from the manager is not built yet)\n", len(jobs))
	for _, j := range jobs {
		if _, err := clients[j.worker].BatchV1().Jobs(demoNamespace).Create(ctx, j.job, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Job %s on %s: %w", j.job.Name, j.worker, err)
		}
	}
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		rows, allDone, err := jobRows(ctx, clients, jobs)
		if err != nil {
			return false, err
		}
		table := renderTable(rows)
		if table != last {
			fmt.Fprintf(out, "\n[%4.1fs]\n%s", time.Since(start).Seconds(), table)
			last = table
		}
		return allDone, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the sample Jobs: %w", err)
	}
	return nil
}

type jobRow struct {
	worker, job, pools              string
	active, succeeded, failed, want int32
	status                          string
}

func jobRows(ctx context.Context, clients map[string]kubernetes.Interface, jobs []demoJob) ([]jobRow, bool, error) {
	allDone := true
	rows := make([]jobRow, 0, len(jobs))
	for _, j := range jobs {
		c := clients[j.worker]
		job, err := c.BatchV1().Jobs(demoNamespace).Get(ctx, j.job.Name, metav1.GetOptions{})
		if err != nil {
			return nil, false, err
		}
		pools, err := podPools(ctx, c, job.Name)
		if err != nil {
			return nil, false, err
		}
		status := jobStatusWord(job)
		if status == "Failed" {
			return nil, false, fmt.Errorf("sample Job %s on %s failed: %s", job.Name, j.worker, job.Status.Conditions)
		}
		allDone = allDone && status == "Complete"
		rows = append(rows, jobRow{
			worker: j.worker, job: job.Name, pools: pools,
			active: job.Status.Active, succeeded: job.Status.Succeeded, failed: job.Status.Failed,
			want: ptr.Deref(job.Spec.Completions, 1), status: status,
		})
	}
	return rows, allDone, nil
}

// podPools lists the pools (node pool labels) the Job's pods were scheduled to.
func podPools(ctx context.Context, c kubernetes.Interface, job string) (string, error) {
	pods, err := c.CoreV1().Pods(demoNamespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return "", err
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	poolOf := map[string]string{}
	for _, n := range nodes.Items {
		poolOf[n.Name] = n.Labels[jobferryv1alpha1.DefaultPoolLabel]
	}
	var pools []string
	for _, p := range pods.Items {
		if pool, ok := poolOf[p.Spec.NodeName]; ok && !slices.Contains(pools, pool) {
			pools = append(pools, pool)
		}
	}
	if len(pools) == 0 {
		return "-", nil
	}
	slices.Sort(pools)
	return strings.Join(pools, ","), nil
}

func jobStatusWord(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return string(c.Type)
		}
	}
	if job.Status.Active > 0 {
		return "Running"
	}
	return "Pending"
}

func renderTable(rows []jobRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "WORKER\tJOB\tPOOL\tACTIVE\tSUCCEEDED\tFAILED\tSTATUS")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d/%d\t%d\t%s\n", r.worker, r.job, r.pools, r.active, r.succeeded, r.want, r.failed, r.status)
	}
	w.Flush()
	return b.String()
}
