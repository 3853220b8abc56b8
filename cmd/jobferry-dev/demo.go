package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

const demoNamespace = "demo"

func newDemoCommand() *cobra.Command {
	var dir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a manager and two workers, dispatch sample Jobs from the manager and show them run; leaves the clusters up",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), dir, timeout)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultDevDir(), "directory holding the clusters' state, kubeconfigs and logs")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the sample Jobs to finish")
	return cmd
}

// demoJobs are 20 ordinary Jobs; the gpu ones fit only worker-1's gpu pool.
func demoJobs() []*batchv1.Job {
	var jobs []*batchv1.Job
	for i := 1; i <= 6; i++ {
		jobs = append(jobs, sampleJob(fmt.Sprintf("etl-%d", i), 2, 2, "2", time.Duration(2+i%3)*time.Second))
	}
	for i := 1; i <= 4; i++ {
		gpu := sampleJob(fmt.Sprintf("train-gpu-%d", i), 2, 1, "4", 4*time.Second)
		spec := &gpu.Spec.Template.Spec
		spec.NodeSelector = map[string]string{"accelerator": "example-gpu"}
		spec.Tolerations = []corev1.Toleration{{Key: devenv.GPUTaint.Key, Operator: corev1.TolerationOpEqual, Value: devenv.GPUTaint.Value, Effect: devenv.GPUTaint.Effect}}
		spec.Containers[0].Resources.Requests[devenv.GPUResource] = resource.MustParse("1")
		spec.Containers[0].Resources.Limits = corev1.ResourceList{devenv.GPUResource: resource.MustParse("1")}
		jobs = append(jobs, gpu)
	}
	for i := 1; i <= 6; i++ {
		jobs = append(jobs, sampleJob(fmt.Sprintf("report-%d", i), 1, 1, "1", time.Duration(1+i%2)*time.Second))
	}
	for i := 1; i <= 4; i++ {
		indexed := sampleJob(fmt.Sprintf("indexed-%d", i), 4, 2, "1", 2*time.Second)
		indexed.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		jobs = append(jobs, indexed)
	}
	return jobs
}

// realNodeDemoJobs are 8 Jobs whose busybox containers print what they do:
// on real nodes (two CPUs each, the host's) they run for real.
func realNodeDemoJobs() []*batchv1.Job {
	var jobs []*batchv1.Job
	for i := 1; i <= 4; i++ {
		jobs = append(jobs, realJob(fmt.Sprintf("etl-%d", i), 2, 2, fmt.Sprintf("echo \"etl-%d: extracting a batch on $(hostname)\"; sleep %d; echo \"etl-%d: done\"", i, 2+i%3, i)))
	}
	for i := 1; i <= 2; i++ {
		job := realJob(fmt.Sprintf("indexed-%d", i), 4, 2, fmt.Sprintf("echo \"indexed-%d: shard $JOB_COMPLETION_INDEX of 4 on $(hostname)\"; sleep 2", i))
		job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		jobs = append(jobs, job)
	}
	for i := 1; i <= 2; i++ {
		jobs = append(jobs, realJob(fmt.Sprintf("report-%d", i), 1, 1, fmt.Sprintf("echo \"report-%d: $(seq 1 100 | wc -l) rows summed on $(hostname)\"", i)))
	}
	return jobs
}

// realJob runs script in busybox (imported into every real node).
func realJob(name string, completions, parallelism int32, script string) *batchv1.Job {
	job := sampleJob(name, completions, parallelism, "100m", 0)
	job.Spec.Template.Annotations = nil
	c := &job.Spec.Template.Spec.Containers[0]
	c.Image = localcluster.BusyboxImage
	c.Command = []string{"sh", "-c", script}
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("16Mi")
	return job
}

func sampleJob(name string, completions, parallelism int32, cpu string, runFor time.Duration) *batchv1.Job {
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
							corev1.ResourceCPU:    resource.MustParse(cpu),
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
	// Real nodes when this machine can run them (root, `make nodes`).
	realNodes := false
	binDir, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	if why := localcluster.RealNodesUnavailable(binDir); why != nil {
		fmt.Fprintf(out, "the demo runs on KWOK's fake nodes, not real ones: %v\n", why)
	} else {
		realNodes = true
	}
	env, err := startDev(ctx, dir, 2, false, realNodes, out)
	if err != nil {
		return err
	}
	// Until the demo ends, Ctrl-C stops every cluster (localcluster tracks
	// them); once it ends they are left running for a look.
	defer env.Release()
	manager, err := kubernetes.NewForConfig(env.Manager.RESTConfig())
	if err != nil {
		return err
	}
	jobs := demoJobs()
	if realNodes {
		jobs = realNodeDemoJobs()
	}
	if err := runSampleJobs(ctx, out, manager, jobs, timeout); err != nil {
		fmt.Fprintf(out, "\nthe clusters are still up for a look: logs in %s/<cluster>/logs; stop them with `make demo-down`\n", dir)
		return err
	}
	if !realNodes {
		fmt.Fprintf(out, "\nevery sample Job is Complete on the manager. The clusters stay up; look around:\n  %s\n  %s\n  %s\n  %s\n  %s\nstop everything with: make demo-down\n",
			pluginHint(dir, "status"),
			pluginHint(dir, "get jobs -A"),
			kubectlHint(dir, "manager", "get workerclusters"),
			kubectlHint(dir, "manager", "describe job -n demo train-gpu-1"),
			kubectlHint(dir, "worker-1", "get jobs,pods -n demo -o wide"))
		return nil
	}
	// One Job's real output, read on its worker through the manager.
	args := "logs job -n demo etl-1 --all-pods"
	fmt.Fprintf(out, "\nevery sample Job is Complete on the manager. What etl-1's containers printed on their worker:\n$ %s\n", pluginHint(dir, args))
	logs := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl-jobferry"), append([]string{"--kubeconfig", env.Manager.KubeconfigPath}, strings.Fields(args)...)...)
	logs.Stdout, logs.Stderr = out, out
	if err := logs.Run(); err != nil {
		return fmt.Errorf("reading etl-1's logs through the manager: %w", err)
	}
	fmt.Fprintf(out, "\nThe clusters stay up; look around:\n  %s\n  %s\n  %s\nstop everything with: make demo-down\n",
		pluginHint(dir, "status"),
		pluginHint(dir, "get jobs -A"),
		kubectlHint(dir, "worker-1", "get jobs,pods -n demo -o wide"))
	return nil
}

func runSampleJobs(ctx context.Context, out io.Writer, manager kubernetes.Interface, jobs []*batchv1.Job, timeout time.Duration) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace, Labels: map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled}}}
	if _, err := manager.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s on the manager: %w", demoNamespace, err)
	}
	fmt.Fprintf(out, "\ncreating %d ordinary Jobs in namespace %s (labelled %s=%s) on the manager\n", len(jobs), demoNamespace, v1alpha1.DispatchNamespaceLabel, v1alpha1.DispatchEnabled)
	for _, j := range jobs {
		if _, err := manager.BatchV1().Jobs(demoNamespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Job %s: %w", j.Name, err)
		}
	}
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := manager.BatchV1().Jobs(demoNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		table, done, failed := renderTable(list.Items)
		if table != last {
			fmt.Fprintf(out, "\n[%4.1fs]\n%s", time.Since(start).Seconds(), table)
			last = table
		}
		if failed != "" {
			return false, fmt.Errorf("sample Job %s failed", failed)
		}
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the sample Jobs: %w", err)
	}
	return nil
}

// renderTable shows the manager Jobs; done when every one is Complete.
func renderTable(jobs []batchv1.Job) (table string, done bool, failed string) {
	slices.SortFunc(jobs, func(a, b batchv1.Job) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tWORKER\tACTIVE\tSUCCEEDED\tFAILED\tSTATUS")
	done = len(jobs) > 0
	for _, job := range jobs {
		status := jobStatusWord(&job)
		done = done && status == "Complete"
		if status == "Failed" {
			failed = job.Name
		}
		worker := job.Annotations[v1alpha1.WorkerAnnotation]
		if worker == "" {
			worker = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d/%d\t%d\t%s\n", job.Name, worker, job.Status.Active, job.Status.Succeeded, ptr.Deref(job.Spec.Completions, 1), job.Status.Failed, status)
	}
	w.Flush()
	return b.String(), done, failed
}

// jobStatusWord is the Job's phase, but Complete for Succeeded and
// Dispatched for a placed Job no pod of which is active yet.
func jobStatusWord(job *batchv1.Job) string {
	switch phase := jobstatus.Phase(job.Status); {
	case phase == jobstatus.PhaseSucceeded:
		return "Complete"
	case phase == jobstatus.PhasePending && job.Annotations[v1alpha1.WorkerAnnotation] != "":
		return "Dispatched"
	default:
		return phase
	}
}
