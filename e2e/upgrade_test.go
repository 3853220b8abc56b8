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
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// TestUpgradeWithJobsInFlight installs the previous release
// (hack/previous-release, built from git history) on the real-node tier,
// runs a stream of short Jobs and some long ones, and upgrades to the
// tree's release as docs/tasks/upgrade.md says, while they run: the CRDs
// first, then worker-2's chart (a worker before the manager), the
// manager's, and worker-1's (the manager a release ahead of a worker
// meanwhile, and a Job run on each worker in each such moment). Every Job
// completes exactly once — one attempt, one mirror, one pod, no restart —
// the long ones dispatched by the old manager run through every step with
// the mirror, pod and sealed state they started with and finish under the
// new one once released; no Job create is refused, and the webhook admits
// a dry-run create every 200 ms through the manager's rollout; the previous
// release's plugin works against the new manager. Then every chart is
// rolled back, the workers first, with a Job running on each (a
// downgrade), and Jobs run.
func TestUpgradeWithJobsInFlight(t *testing.T) {
	ctx := t.Context()
	bin, current := realNodeTier(t)
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
	if !version.MustParseSemantic(previous.Version).LessThan(version.MustParseSemantic(current.Version)) {
		t.Fatalf("hack/previous-release names version %s, not below the tree's %s", previous.Version, current.Version)
	}

	dir := outputDir(t)
	// Audited: the workers' logs show one mirror created per Job.
	env := startRealNodeTier(ctx, t, dir, bin)
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
	// Long Jobs, two on each worker, dispatched by the previous release:
	// each waits until the test releases it (after the last step), so
	// they run through the whole upgrade whatever it takes.
	long := map[string]string{}
	for i, worker := range []string{"worker-1", "worker-1", "worker-2", "worker-2"} {
		name := fmt.Sprintf("long-%d", i)
		d.dispatchTo(ctx, t, waitingJob(jobsNS, name), worker)
		long[name] = worker
		tl.created(name, time.Now(), nil)
	}
	before := map[string]podRun{}
	for name, worker := range long {
		before[name] = waitMirrorPodRunning(ctx, t, workers[worker], jobsNS, name)
	}
	// What the previous manager wrote of them, for the new one to read.
	written := map[string]map[string]string{}
	for name := range long {
		j, err := admin.BatchV1().Jobs(jobsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		written[name] = map[string]string{}
		for _, key := range []string{v1alpha1.StateSealAnnotation, v1alpha1.MirrorUIDAnnotation, v1alpha1.DispatchAttemptAnnotation, v1alpha1.WorkerAnnotation} {
			written[name][key] = j.Annotations[key]
		}
		if written[name][v1alpha1.MirrorUIDAnnotation] != string(before[name].jobUID) {
			t.Fatalf("%s: the previous manager recorded mirror %s, the worker runs %s", name, written[name][v1alpha1.MirrorUIDAnnotation], before[name].jobUID)
		}
	}
	// The long Jobs still run their first pods, with the state the
	// previous manager sealed.
	stillRunning := func(step string) {
		t.Helper()
		for name, worker := range long {
			j, err := admin.BatchV1().Jobs(jobsNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if hasCondition(j, batchv1.JobComplete) != nil || hasCondition(j, batchv1.JobFailed) != nil {
				t.Fatalf("after %s: %s finished before it was released: %s", step, name, describeStatus(j))
			}
			if now := podOf(ctx, t, workers[worker], jobsNS, name); now != before[name] {
				t.Errorf("after %s: %s runs mirror %s pod %s, it ran mirror %s pod %s", step, name, now.jobUID, now.podUID, before[name].jobUID, before[name].podUID)
			}
			for key, value := range written[name] {
				if j.Annotations[key] != value {
					t.Errorf("after %s: %s's %s is %q, the previous manager wrote %q", step, name, key, j.Annotations[key], value)
				}
			}
		}
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
	// runOn runs a Job on the worker to completion: the skew of the moment
	// (a worker ahead of the manager, the manager ahead of a worker) works.
	runOn := func(name, worker string) {
		t.Helper()
		d.dispatchTo(ctx, t, realJob(jobsNS, name, "echo "+name), worker)
		tl.created(name, time.Now(), nil)
		pollJob(ctx, t, admin, jobsNS, name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	}
	runOn("before-the-upgrade", "worker-1")

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
	// upgradeWorker upgrades a worker's chart and checks what runs there.
	upgradeWorker := func(w *localcluster.Cluster) {
		t.Helper()
		tl.mark(w.Name + "'s upgrade starts")
		if err := inst.Helm(ctx, w, "helm", "upgrade", devenv.WorkerRelease, current, workerValues); err != nil {
			t.Fatal(err)
		}
		checkImages(ctx, t, workers[w.Name], "jobferry-worker", inst.Registry, current.Version)
		stillRunning(w.Name + "'s upgrade")
	}
	upgradeWorker(env.Workers[1])
	tl.mark("worker-2 ahead of the manager")
	runOn("worker-2-ahead-of-the-manager", "worker-2")

	// The manager's rollout, probed every probeEvery with a dry-run create
	// through its webhook.
	// The old pods stop as the previous release's chart says: from the
	// release whose manager keeps serving webhooks a moment after it
	// leaves the endpoints (a preStop sleep) on, no create may be refused
	// during the rollout; before, the gap is measured and shown.
	oldDeployment, err := admin.AppsV1().Deployments(ns).Get(ctx, "jobferry-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lc := oldDeployment.Spec.Template.Spec.Containers[0].Lifecycle
	gapless := lc != nil && lc.PreStop != nil
	rolloutStart := time.Now()
	tl.mark("the manager's upgrade starts")
	probeCtx, stopProbe := context.WithCancel(ctx)
	probes := make(chan []admissionProbe, 1)
	go func() { probes <- probeAdmission(probeCtx, admin, jobsNS) }()
	if err := inst.Helm(ctx, env.Manager, "helm", "upgrade", devenv.ManagerRelease, current, managerValues); err != nil {
		t.Fatal(err)
	}
	runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
	stopProbe()
	gap, refusedProbes, allProbes := longestRefusal(<-probes)
	tl.mark("the manager upgraded (worker-1 previous)")
	checkImages(ctx, t, admin, "jobferry-manager", inst.Registry, current.Version)
	t.Logf("the manager's rollout: %d dry-run creates through the webhook every %s, %d refused, the longest refused stretch %s", allProbes, probeEvery, refusedProbes, gap)
	rolloutEnd := time.Now()
	switch {
	case refusedProbes > 0 && gapless:
		t.Errorf("the webhook refused %d of %d Job creates during the manager's rollout (longest stretch %s)", refusedProbes, allProbes, gap)
	case refusedProbes > 0:
		t.Logf("the previous release's manager pods stop without a preStop delay: the gap above is theirs, gone from the next upgrade on")
	}
	stillRunning("the manager's upgrade")
	// The previous release's plugin, a release behind the manager now.
	if out := mustPlugin(ctx, t, inst.Kubeconfig, "status"); !containsAll(out, "worker-1", "worker-2", "True (Connected)") {
		t.Errorf("the previous release's kubectl jobferry status against the new manager:\n%s", out)
	}
	runOn("the-manager-ahead-of-worker-1", "worker-1")

	upgradeWorker(env.Workers[0])
	tl.mark("worker-1 upgraded")
	runOn("after-the-upgrade", "worker-2")
	stopStream()
	streamDone.Wait()
	tl.mark("stream stopped; the long Jobs released")
	for name, worker := range long {
		release(ctx, t, env, worker, jobsNS, name)
	}

	// Every Job completes exactly once.
	names := tl.names()
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := admin.BatchV1().Jobs(jobsNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		finished := 0
		for i := range list.Items {
			j := &list.Items[i]
			if !want[j.Name] {
				continue
			}
			if c := hasCondition(j, batchv1.JobComplete); c != nil {
				tl.completed(j.Name, c.LastTransitionTime.Time)
				finished++
			} else if hasCondition(j, batchv1.JobFailed) != nil {
				finished++
			}
		}
		return finished == len(want), nil
	})
	if err != nil {
		t.Errorf("not every Job finished: %v", err)
	}
	t.Logf("the upgrade's timeline (10 s buckets; created, create refused, completed):\n%s", tl.table())
	for _, name := range names {
		checkCompletedOnce(ctx, t, admin, workers, jobsNS, name)
	}
	checkOneMirrorEach(t, env, jobsNS, len(names))
	if refused := tl.refused(rolloutStart, rolloutEnd, gapless); len(refused) > 0 {
		t.Errorf("%d Job creates refused during the upgrade: %v", len(refused), refused)
	}
	events, err := admin.CoreV1().Events(jobsNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == policy.ReasonUntrustedState || e.Reason == policy.ReasonMirrorNotOurs {
			t.Errorf("%s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
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

	t.Run("roll-back", func(t *testing.T) {
		// helm rollback of each chart to the previous release, the
		// workers first, as docs/tasks/upgrade.md says, with a Job on each
		// worker running meanwhile: the older releases read what the
		// newer wrote (CRDs and all) and run Jobs.
		during := map[string]string{"during-rollback-1": "worker-1", "during-rollback-2": "worker-2"}
		for name, worker := range during {
			d.dispatchTo(ctx, t, waitingJob(jobsNS, name), worker)
			waitMirrorPodRunning(ctx, t, workers[worker], jobsNS, name)
		}
		for _, w := range env.Workers {
			helm(ctx, t, w.KubeconfigPath, "rollback", devenv.WorkerRelease, "1", "-n", ns, "--wait", "--timeout", "3m")
			checkImages(ctx, t, workers[w.Name], "jobferry-worker", inst.Registry, previous.Version)
		}
		helm(ctx, t, env.Manager.KubeconfigPath, "rollback", devenv.ManagerRelease, "1", "-n", ns, "--wait", "--timeout", "3m")
		runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
		checkImages(ctx, t, admin, "jobferry-manager", inst.Registry, previous.Version)
		for name, worker := range during {
			release(ctx, t, env, worker, jobsNS, name)
		}
		for name := range during {
			pollJob(ctx, t, admin, jobsNS, name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
			checkCompletedOnce(ctx, t, admin, workers, jobsNS, name)
		}
		for _, worker := range []string{"worker-1", "worker-2"} {
			name := "after-rollback-" + worker
			d.dispatchTo(ctx, t, realJob(jobsNS, name, "echo after the rollback"), worker)
			pollJob(ctx, t, admin, jobsNS, name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
			checkCompletedOnce(ctx, t, admin, workers, jobsNS, name)
		}
	})
}

// waitingJob is a one-pod Job that runs until release touches a file in
// its container.
func waitingJob(ns, name string) *batchv1.Job {
	return realJob(ns, name, "until [ -e /tmp/release ]; do sleep 1; done; echo released")
}

// release lets a waitingJob's pod on worker finish (kubectl exec, through
// the worker's API server to its node's kubelet).
func release(ctx context.Context, t *testing.T, env *localcluster.Environment, worker, ns, name string) {
	t.Helper()
	for _, w := range env.Workers {
		if w.Name != worker {
			continue
		}
		pod := strings.TrimSpace(kubectl(ctx, t, w.KubeconfigPath, "get", "pods", "-n", ns, "-l", batchv1.JobNameLabel+"="+name,
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[0].metadata.name}"))
		// The nodes' busybox has its shell's builtins, not every applet.
		kubectl(ctx, t, w.KubeconfigPath, "exec", "-n", ns, pod, "--", "sh", "-c", ": > /tmp/release")
		return
	}
	t.Fatalf("no worker %s", worker)
}

// checkImages: the chart's pods in the system namespace run the image of
// version from the registry.
func checkImages(ctx context.Context, t *testing.T, c kubernetes.Interface, chart, registry, version string) {
	t.Helper()
	want := registry + "/" + chart + ":" + version
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(devenv.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + chart})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != want {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("the %s pods do not all run %s: %v", chart, want, err)
	}
}

// probeEvery is how often the manager's admission is probed during its
// rollout.
const probeEvery = 200 * time.Millisecond

// admissionProbe is one dry-run create of a Job through the manager's
// webhook.
type admissionProbe struct {
	at  time.Time
	err error
}

// probeAdmission dry-run creates a Job in ns every probeEvery until ctx
// ends: what a user creating Jobs during the rollout would meet.
func probeAdmission(ctx context.Context, c kubernetes.Interface, ns string) []admissionProbe {
	var out []admissionProbe
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		_, err := c.BatchV1().Jobs(ns).Create(ctx, realJob(ns, "probe", "true"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if ctx.Err() != nil {
			return out
		}
		out = append(out, admissionProbe{time.Now(), err})
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// longestRefusal is the longest stretch of consecutive refused probes
// (from the first refused to the next accepted), and the counts.
func longestRefusal(probes []admissionProbe) (longest time.Duration, refused, all int) {
	var since time.Time
	for _, p := range probes {
		if p.err != nil {
			refused++
			if since.IsZero() {
				since = p.at
			}
			continue
		}
		if !since.IsZero() {
			longest = max(longest, p.at.Sub(since))
			since = time.Time{}
		}
	}
	if !since.IsZero() && len(probes) > 0 {
		longest = max(longest, probes[len(probes)-1].at.Sub(since))
	}
	return longest, refused, len(probes)
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

// refused are the creates refused, with their times and errors; but for
// those during the manager's rollout (from, to) when it may have a gap
// (!gapless), which probeAdmission measures.
func (tl *upgradeTimeline) refused(from, to time.Time, gapless bool) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []string
	for _, c := range tl.creates {
		if c.err != nil && !gapless && !c.at.Before(from) && !c.at.After(to) {
			continue
		}
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
