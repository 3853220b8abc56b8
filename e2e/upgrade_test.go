//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/devenv"
	"github.com/jobferry/jobferry/e2e/localcluster"
)

// TestUpgradeWithJobsInFlight installs the previous release
// (hack/previous-release, built from git history) on the real-node tier,
// runs a stream of short Jobs and some long ones, and upgrades to the
// tree's release as docs/compatibility.md says, while they run: the CRDs
// first, then worker-2's chart (a worker before the manager), the
// manager's, and worker-1's (the manager a release ahead of a worker
// meanwhile). Every Job completes exactly once — one attempt, one pod, no
// restart — the long ones dispatched by the old manager finish under the
// new one with the mirror and pod they started with, and no Job creation is
// refused while the manager's Deployment rolls. Then the manager is rolled
// back (a downgrade) and a Job still runs.
func TestUpgradeWithJobsInFlight(t *testing.T) {
	ctx := t.Context()
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.RealNodesUnavailable(bin); err != nil {
		t.Fatalf("the real-node tier cannot run here: %v", err)
	}
	currentDir, err := devenv.E2EReleaseDir()
	if err != nil {
		t.Fatal(err)
	}
	current, err := devenv.FindRelease(currentDir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := devenv.ReadPreviousRelease()
	if err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	previous, err := devenv.BuildPreviousRelease(ctx, p, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the previous release %s (commit %s) built in %s; upgrading to %s", previous.Version, p.Commit, time.Since(built).Round(time.Second), current.Version)

	dir := outputDir(t)
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	env, err := localcluster.StartEnvironment(startCtx, localcluster.EnvironmentSpec{
		Manager: localcluster.Spec{Name: "manager", RealNode: true},
		Workers: []localcluster.Spec{
			// Audited: the workers' logs show one mirror created per Job.
			{Name: "worker-1", RealNode: true, Audit: true},
			{Name: "worker-2", RealNode: true, Audit: true},
		},
	}, localcluster.EnvironmentOptions{Dir: dir, BinDir: bin, Registry: true})
	if err != nil {
		t.Fatal(err)
	}
	index := env.Network.Index
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
		assertNoLeftovers(t, dir, index)
	})
	const ns = devenv.SystemNamespace
	workerValues := []string{"--set", "managerIdentity.allowNamespaceCreation=true"}
	managerValues := []string{"--set", "dispatch.workerHealthInterval=2s"}
	inst, err := devenv.InstallRelease(ctx, env, bin, devenv.InstallOptions{
		Release: previous, WorkerValues: workerValues, ManagerValues: managerValues, Out: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(env.Manager.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	managerClient, err := client.New(env.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	workers := map[string]kubernetes.Interface{}
	for _, w := range env.Workers {
		if workers[w.Name], err = kubernetes.NewForConfig(w.RESTConfig()); err != nil {
			t.Fatal(err)
		}
	}
	// The previous release's plugin joins the workers: worker-2's mirrors
	// run under the worker chart's Job controller, which is upgraded
	// while they run too.
	usePlugin(inst.Kubeconfig, inst.Plugin)
	joinWorker(ctx, t, inst.Kubeconfig, managerClient, "worker-1", "")
	joinWorker(ctx, t, inst.Kubeconfig, managerClient, "worker-2", v1alpha1.JobControllerWorker)
	if err := devenv.WaitConnected(ctx, managerClient, len(env.Workers), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	d := &dispatchEnv{Env: &devenv.Env{Environment: env}, manager: admin, managerClient: managerClient, workers: workers}
	jobsNS := d.optedInNamespace(ctx, t)

	tl := &upgradeTimeline{start: time.Now()}
	// Long Jobs, two on each worker, dispatched by the previous release
	// and running through the whole upgrade.
	long := map[string]string{}
	for i, worker := range []string{"worker-1", "worker-1", "worker-2", "worker-2"} {
		name := fmt.Sprintf("long-%d", i)
		d.dispatchTo(ctx, t, realJob(jobsNS, name, "sleep 150; echo long done"), worker)
		long[name] = worker
		tl.created(name, time.Now(), nil)
	}
	before := map[string]podRun{}
	for name, worker := range long {
		before[name] = waitMirrorPodRunning(ctx, t, workers[worker], jobsNS, name)
	}

	// A steady stream of short Jobs, one every streamEvery, from now until
	// the upgrade is over: as many as two real nodes sharing this machine's
	// CPUs with three control planes start without a backlog.
	streamCtx, stopStream := context.WithCancel(ctx)
	var streamDone sync.WaitGroup
	streamDone.Go(func() {
		tick := time.NewTicker(streamEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-streamCtx.Done():
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("short-%03d", i)
			_, err := admin.BatchV1().Jobs(jobsNS).Create(streamCtx, realJob(jobsNS, name, "echo short"), metav1.CreateOptions{})
			if streamCtx.Err() != nil {
				return
			}
			tl.created(name, time.Now(), err)
		}
	})
	stream := func(d time.Duration, why string) {
		t.Logf("%s: %s of the stream", why, d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	stream(6*time.Second, "the previous release everywhere")

	// CRDs first (helm upgrades none), then worker-2 before the manager.
	tl.mark("publish and CRDs start")
	if err := inst.Publish(ctx, current); err != nil {
		t.Fatal(err)
	}
	if err := inst.ApplyCRDs(ctx, env.Manager, devenv.ManagerRelease, current); err != nil {
		t.Fatal(err)
	}
	for _, w := range env.Workers {
		if err := inst.ApplyCRDs(ctx, w, devenv.WorkerRelease, current); err != nil {
			t.Fatal(err)
		}
	}
	tl.mark("worker-2's upgrade starts")
	if err := inst.Helm(ctx, env.Workers[1], "helm", "upgrade", devenv.WorkerRelease, current, workerValues); err != nil {
		t.Fatal(err)
	}
	stream(6*time.Second, "worker-2 ahead of the manager")
	tl.mark("the manager's upgrade starts")
	if err := inst.Helm(ctx, env.Manager, "helm", "upgrade", devenv.ManagerRelease, current, managerValues); err != nil {
		t.Fatal(err)
	}
	tl.mark("the manager upgraded (worker-1 previous)")
	runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
	stream(9*time.Second, "the manager ahead of worker-1")
	tl.mark("worker-1's upgrade starts")
	if err := inst.Helm(ctx, env.Workers[0], "helm", "upgrade", devenv.WorkerRelease, current, workerValues); err != nil {
		t.Fatal(err)
	}
	tl.mark("worker-1 upgraded")
	stream(6*time.Second, "the release everywhere")
	stopStream()
	streamDone.Wait()
	tl.mark("stream stopped")

	// Every Job completes exactly once.
	names := tl.names()
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := admin.BatchV1().Jobs(jobsNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		finished := 0
		for i := range list.Items {
			j := &list.Items[i]
			if c := hasCondition(j, batchv1.JobComplete); c != nil {
				tl.completed(j.Name, c.LastTransitionTime.Time)
				finished++
			} else if hasCondition(j, batchv1.JobFailed) != nil {
				finished++
			}
		}
		return finished == len(names), nil
	})
	if err != nil {
		t.Errorf("not every Job finished: %v", err)
	}
	t.Logf("the upgrade's timeline (10 s buckets; created, create refused, completed):\n%s", tl.table())
	for _, name := range names {
		checkCompletedOnce(ctx, t, admin, workers, jobsNS, name)
	}
	checkRanOnce(ctx, t, admin, env, jobsNS, len(names))
	for name, worker := range long {
		after := podOf(ctx, t, workers[worker], jobsNS, name)
		if after.jobUID != before[name].jobUID || after.podUID != before[name].podUID {
			t.Errorf("%s on %s: mirror %s pod %s before the upgrade, mirror %s pod %s after", name, worker, before[name].jobUID, before[name].podUID, after.jobUID, after.podUID)
		}
	}
	if refused := tl.refused(); len(refused) > 0 {
		t.Errorf("%d Job creates refused during the upgrade: %v", len(refused), refused)
	}
	for _, w := range []string{"worker-1", "worker-2"} {
		wc := &v1alpha1.WorkerCluster{}
		if err := managerClient.Get(ctx, client.ObjectKey{Name: w}, wc); err != nil {
			t.Fatal(err)
		}
		if wc.Status.KubernetesVersion == "" {
			t.Errorf("the upgraded manager shows no Kubernetes version of %s", w)
		}
	}

	t.Run("downgrade-the-manager", func(t *testing.T) {
		// helm rollback to the previous release's revision: the older
		// manager reads what the newer wrote (CRDs and all) and runs Jobs.
		helm(ctx, t, env.Manager.KubeconfigPath, "rollback", devenv.ManagerRelease, "1", "-n", ns, "--wait", "--timeout", "3m")
		pods := runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
		for _, p := range pods {
			if !strings.HasSuffix(p.Spec.Containers[0].Image, ":"+previous.Version) {
				t.Errorf("after the rollback, manager pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
			}
		}
		for _, worker := range []string{"worker-1", "worker-2"} {
			name := "after-rollback-" + worker
			d.dispatchTo(ctx, t, realJob(jobsNS, name, "echo after the rollback"), worker)
			pollJob(ctx, t, admin, jobsNS, name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
			checkCompletedOnce(ctx, t, admin, workers, jobsNS, name)
		}
	})
}

// streamEvery is how often the upgrade test creates a short Job.
const streamEvery = 3 * time.Second

// podRun identifies a Job's mirror on its worker and that mirror's pod.
type podRun struct {
	jobUID, podUID types.UID
}

// waitMirrorPodRunning waits until the Job's one pod runs on its worker.
func waitMirrorPodRunning(ctx context.Context, t *testing.T, worker kubernetes.Interface, ns, name string) podRun {
	t.Helper()
	var run podRun
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false, err
		}
		run = podOf(ctx, t, worker, ns, name)
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: no running pod: %v", name, err)
	}
	return run
}

func podOf(ctx context.Context, t *testing.T, worker kubernetes.Interface, ns, name string) podRun {
	t.Helper()
	mirror, err := worker.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%s: %d pods on its worker, want 1", name, len(pods.Items))
	}
	return podRun{jobUID: mirror.UID, podUID: pods.Items[0].UID}
}

// checkCompletedOnce: the manager Job is Complete after one dispatch
// attempt, and its worker ran one pod for it to success, without a
// restart. A pod the node failed to start (runc's StartError on a loaded
// machine), which the worker's Job controller replaced, is the node's
// doing, not the upgrade's: it is logged, not failed.
func checkCompletedOnce(ctx context.Context, t *testing.T, manager kubernetes.Interface, workers map[string]kubernetes.Interface, ns, name string) {
	t.Helper()
	job, err := manager.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if hasCondition(job, batchv1.JobComplete) == nil || job.Status.Succeeded != 1 {
		t.Errorf("%s: %s, want Complete with one pod succeeded", name, describeStatus(job))
	}
	if attempt := job.Annotations[v1alpha1.DispatchAttemptAnnotation]; attempt != "1" {
		t.Errorf("%s: dispatch attempt %q, want 1", name, attempt)
	}
	worker := workers[job.Annotations[v1alpha1.WorkerAnnotation]]
	if worker == nil {
		t.Errorf("%s: on worker %q", name, job.Annotations[v1alpha1.WorkerAnnotation])
		return
	}
	pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var succeeded []corev1.Pod
	var seen []string
	for _, p := range pods.Items {
		seen = append(seen, p.Name+"="+string(p.Status.Phase))
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded = append(succeeded, p)
		case p.Status.Phase == corev1.PodFailed && startError(p):
			t.Logf("%s: pod %s failed to start on its node (%s), replaced by the worker's Job controller", name, p.Name, startErrorMessage(p))
		default:
			t.Errorf("%s: pod %s %s on %s", name, p.Name, p.Status.Phase, job.Annotations[v1alpha1.WorkerAnnotation])
		}
	}
	if len(succeeded) != 1 {
		t.Errorf("%s: pods %v on %s, want one Succeeded", name, seen, job.Annotations[v1alpha1.WorkerAnnotation])
		return
	}
	for _, c := range succeeded[0].Status.ContainerStatuses {
		if c.RestartCount != 0 {
			t.Errorf("%s: container %s restarted %d times", name, c.Name, c.RestartCount)
		}
	}
}

// startError: the pod's container never started (the runtime's
// StartError, exit code 128).
func startError(p corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if term := c.State.Terminated; term != nil && term.Reason == "StartError" {
			return true
		}
	}
	return false
}

func startErrorMessage(p corev1.Pod) string {
	for _, c := range p.Status.ContainerStatuses {
		if term := c.State.Terminated; term != nil && term.Reason == "StartError" {
			return term.Message
		}
	}
	return ""
}

// upgradeTimeline records the Jobs an upgrade test created, the creates
// refused, the Jobs completed, and the steps of the upgrade, in time.
type upgradeTimeline struct {
	start time.Time
	mu    sync.Mutex
	// creates are the Jobs created (err nil) and the creates refused.
	creates []timedCreate
	done    map[string]time.Time
	marks   []timedMark
}

type timedCreate struct {
	name string
	at   time.Time
	err  error
}

type timedMark struct {
	what string
	at   time.Time
}

func (tl *upgradeTimeline) created(name string, at time.Time, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.creates = append(tl.creates, timedCreate{name, at, err})
}

func (tl *upgradeTimeline) completed(name string, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.done == nil {
		tl.done = map[string]time.Time{}
	}
	tl.done[name] = at
}

func (tl *upgradeTimeline) mark(what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.marks = append(tl.marks, timedMark{what, time.Now()})
}

// names are the Jobs created.
func (tl *upgradeTimeline) names() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []string
	for _, c := range tl.creates {
		if c.err == nil {
			out = append(out, c.name)
		}
	}
	return out
}

// refused are the creates refused, with their times and errors.
func (tl *upgradeTimeline) refused() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []string
	for _, c := range tl.creates {
		if c.err != nil {
			out = append(out, fmt.Sprintf("%s at +%s: %v", c.name, c.at.Sub(tl.start).Round(100*time.Millisecond), c.err))
		}
	}
	return out
}

// table is the timeline in 10 s buckets, each with the steps that began
// in it.
func (tl *upgradeTimeline) table() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	bucket := func(at time.Time) int { return int(at.Sub(tl.start) / (10 * time.Second)) }
	type row struct {
		created, refused, completed int
		marks                       []string
	}
	rows := map[int]*row{}
	get := func(b int) *row {
		if rows[b] == nil {
			rows[b] = &row{}
		}
		return rows[b]
	}
	for _, c := range tl.creates {
		if c.err != nil {
			get(bucket(c.at)).refused++
		} else {
			get(bucket(c.at)).created++
		}
	}
	for _, at := range tl.done {
		get(bucket(at)).completed++
	}
	for _, m := range tl.marks {
		r := get(bucket(m.at))
		r.marks = append(r.marks, fmt.Sprintf("%s (+%.1fs)", m.what, m.at.Sub(tl.start).Seconds()))
	}
	keys := make([]int, 0, len(rows))
	for b := range rows {
		keys = append(keys, b)
	}
	sort.Ints(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s %7s %7s %9s  %s\n", "seconds", "created", "refused", "completed", "steps")
	for _, k := range keys {
		r := rows[k]
		fmt.Fprintf(&b, "%3d-%-5d %7d %7d %9d  %s\n", k*10, k*10+10, r.created, r.refused, r.completed, strings.Join(r.marks, "; "))
	}
	return b.String()
}
