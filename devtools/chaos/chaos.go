// Package chaos runs jobferry under faults drawn at random from a seed (the
// nemesis) while a workload of the Job shapes users send runs; it records
// every change of every manager Job, mirror and pod on every cluster from
// watches (the history) and checks the history against what jobferry
// promises (the checker), in the manner of etcd's robustness tests.
//
// A seed fixes the plan (which faults, when, for how long, on which target;
// which Jobs, when, of which shape, with which user actions); what the
// processes do within it is timing, so a replay meets the same faults at the
// same offsets, not the same interleaving.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// Options configure a run.
type Options struct {
	Seed uint64
	// Span is how long Jobs are sent and faults injected; the run then
	// waits for its Jobs to finish (Bounds.TerminalAfterFaults at most).
	Span time.Duration
	// Rate is how many Jobs the workload sends per second.
	Rate float64
	// MeanFaultGap is the mean time between two faults' starts.
	MeanFaultGap time.Duration
	// Workers is how many workers the environment has (3 by default).
	Workers int
	// Faults are the kinds the nemesis draws from (every kind that applies
	// when empty): to chase one failure.
	Faults []FaultKind
	// Kueue runs Kueue on the manager and queues some Jobs. RealNodes runs
	// each worker on a real node (kubelet and containerd, as root: `make
	// nodes`), the Jobs' pods busybox scripts that do what KWOK's stages
	// play (onRealNodes), and leaves out the faults of KWOK's nodes.
	Kueue, RealNodes bool
	// Dir holds the environment and the run's record (history.json,
	// facts.json, report.txt).
	Dir      string
	Progress io.Writer
	Bounds   Bounds
	// ManagerArgs are extra flags for the manager (a broken build's switch,
	// say, to show the checker fails it).
	ManagerArgs []string
}

// SeedOfTheDay is the seed a run takes unless told: the date (20261130),
// so that the runs of one day meet the same plan and a failure is replayed
// with the seed it printed.
func SeedOfTheDay(now time.Time) uint64 {
	seed, _ := strconv.ParseUint(now.UTC().Format("20060102"), 10, 64)
	return seed
}

// Timing of the environment the run starts: the faults are drawn against it.
var runTiming = Timing{WorkerLostTimeout: 8 * time.Second}

func (o *Options) defaults() {
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.Rate == 0 {
		o.Rate = 1.5
	}
	if o.MeanFaultGap == 0 {
		o.MeanFaultGap = 6 * time.Second
	}
	if o.Bounds == (Bounds{}) {
		o.Bounds = DefaultBounds
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Run starts an environment, runs the workload under the nemesis, checks
// the history, writes the record into Dir and returns the report. An error
// is a run that could not be carried out (the environment did not start, a
// fault could not be healed); a broken promise is a violation in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	// A real node's kubelet runs in a root of its own, where a path relative
	// to this process's directory means nothing.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	for _, kind := range o.Faults {
		if specOf(kind) == nil {
			return nil, fmt.Errorf("no fault %q in the catalogue (docs/concepts/reliability.md lists them)", kind)
		}
	}
	faults := Plan(o.Seed, o, runTiming, o.Span, o.MeanFaultGap)
	work := planWorkload(o.Seed, o, o.Span)
	fmt.Fprintf(o.Progress, "chaos: seed %d: %d faults and %d Jobs over %s (replay: jobferry-dev chaos --seed=%d --span=%s)\n",
		o.Seed, len(faults), len(work), o.Span, o.Seed, o.Span)

	workers := devenv.DevWorkers(o.Workers)
	if o.RealNodes {
		workers = devenv.RealNodeWorkers(o.Workers)
	}
	opts := devenv.Options{
		Dir: filepath.Join(o.Dir, "env"), Workers: workers, Progress: o.Progress, ManagerReplicas: 2,
		// Collection every 20 s rather than every minute, and namespaces
		// collected 20 s after the manager's is gone rather than 10 min:
		// the run settles sooner, and the collector runs more often while
		// faults last.
		ManagerArgs: append([]string{"--worker-health-interval=2s", fmt.Sprintf("--worker-lost-timeout=%s", runTiming.WorkerLostTimeout),
			"--gc-interval=20s", "--worker-namespace-grace=20s"}, o.ManagerArgs...),
	}
	if o.Kueue {
		opts.Kueue = &localcluster.KueueOptions{}
	}
	if err := os.RemoveAll(opts.Dir); err != nil {
		return nil, err
	}
	env, err := devenv.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the environment: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(o.Progress, "chaos: stopping the environment: %v\n", err)
		}
	}()
	r, err := newRun(ctx, env, o)
	if err != nil {
		return nil, err
	}
	return r.carryOut(ctx, faults, work)
}

// run is one run in its environment.
type run struct {
	o       Options
	env     *runEnv
	history *History
	user    *user
	canary  int
}

// Kueue mode's ClusterQueue and LocalQueue, and the ClusterQueue's CPU
// quota in millicores.
const (
	kueueQueue = "chaos"
	kueueQuota = 1000
)

// workerSelectorLabel on each WorkerCluster names it, so a canary can be
// sent to the worker a fault hit.
const workerSelectorLabel = "chaos.jobferry.dev/worker"

func newRun(ctx context.Context, env *devenv.Env, o Options) (*run, error) {
	manager, err := kubernetes.NewForConfig(env.Manager.RESTConfig())
	if err != nil {
		return nil, err
	}
	managed, err := client.New(env.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		return nil, err
	}
	e := &runEnv{Env: env, managerClient: manager, workerClients: map[string]kubernetes.Interface{}}
	for _, w := range env.Workers {
		c, err := kubernetes.NewForConfig(w.RESTConfig())
		if err != nil {
			return nil, err
		}
		e.workerClients[w.Name] = c
		wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
		label := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, workerSelectorLabel, w.Name)))
		if err := managed.Patch(ctx, wc, label); err != nil {
			return nil, fmt.Errorf("labelling WorkerCluster %s: %w", w.Name, err)
		}
	}
	ns, err := manager.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "chaos-", Labels: map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	e.namespace = ns.Name
	queue := ""
	if o.Kueue {
		// A quota of 1 CPU: ten of the queued Jobs' pods (100m each) at
		// once, so that some wait for it.
		queue = kueueQueue
		kc, err := devenv.NewKueueClient(env.Manager.RESTConfig())
		if err != nil {
			return nil, err
		}
		if err := devenv.SetUpKueueCheck(ctx, kc, time.Minute); err != nil {
			return nil, err
		}
		cq := devenv.KueueClusterQueue(kueueQueue, corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(kueueQuota, resource.DecimalSI)})
		if err := kc.Create(ctx, cq); err != nil {
			return nil, err
		}
		if err := kc.Create(ctx, devenv.KueueLocalQueue(ns.Name, queue, kueueQueue)); err != nil {
			return nil, err
		}
	}
	return &run{o: o, env: e, history: &History{}, user: newUser(manager, ns.Name, queue, o.RealNodes)}, nil
}

func (r *run) carryOut(ctx context.Context, faults []Fault, work []plannedJob) (*Report, error) {
	o := r.o
	rec := newRecorder(r.history)
	if err := rec.watchManager(r.env.Manager.RESTConfig(), r.env.namespace); err != nil {
		return nil, err
	}
	if o.Kueue {
		if err := rec.watchKueue(r.env.Manager.RESTConfig(), r.env.namespace); err != nil {
			return nil, err
		}
	}
	for _, w := range r.env.Workers {
		if err := rec.watchWorker(w.RESTConfig(), w.Name); err != nil {
			return nil, err
		}
	}
	defer rec.close()
	if err := rec.waitSynced(ctx); err != nil {
		return nil, err
	}

	n := &nemesis{env: r.env, out: o.Progress, plan: faults, held: map[string]bool{}, canary: r.sendCanary}
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	superviseCtx, stopSupervising := context.WithCancel(ctx)
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		n.supervise(superviseCtx)
	}()
	// Stopped before the environment is, which it would start again.
	defer func() {
		stopSupervising()
		<-supervised
	}()
	cron := cronJob(r.env.namespace)
	r.user.forNodes(&cron.Spec.JobTemplate.Spec.Template)
	if _, err := r.env.managerClient.BatchV1().CronJobs(r.env.namespace).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the CronJob: %w", err)
	}
	n.abort = stop
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		r.user.run(runCtx, start, work)
	}()
	n.run(runCtx, start)
	healErr := n.wait()
	<-sent
	r.user.actions.Wait()
	fmt.Fprintf(o.Progress, "chaos: %s every fault healed; waiting for the Jobs to finish\n", stamp(time.Now()))
	if healErr != nil {
		return nil, fmt.Errorf("the environment could not be healed, the run is void: %w", healErr)
	}
	if err := r.stopCronJob(ctx); err != nil {
		return nil, err
	}
	facts := Facts{Faults: n.faults(), Bounds: o.Bounds, WorkerLostTimeout: runTiming.WorkerLostTimeout}
	if o.Kueue {
		facts.Quota = map[string]int64{kueueQueue: kueueQuota}
	}
	r.waitFinished(ctx, facts.lastFaultEnd().Add(o.Bounds.TerminalAfterFaults))
	facts.Settled = time.Now()
	leftovers, err := r.cleanUp(ctx)
	if err != nil {
		return nil, err
	}
	facts.Leftovers = leftovers
	r.user.mu.Lock()
	facts.UserDeleted, facts.LastUserAction = maps.Clone(r.user.deleted), maps.Clone(r.user.lastAction)
	created, refused, refusedBy := maps.Clone(r.user.created), r.user.refused, maps.Clone(r.user.refusedBy)
	r.user.mu.Unlock()

	stopSupervising()
	<-supervised
	changes := r.history.Changes()
	violations, observed := Check(changes, facts)
	report := newReport(o, facts, changes, violations, observed, created, refused, refusedBy, time.Since(start))
	report.ManagerRestarts = n.restarts
	if err := r.keep(changes, facts, report); err != nil {
		return report, err
	}
	return report, nil
}

// sendCanary creates a one-second Job on worker (any worker when empty)
// and returns when the manager shows it finished; zero when it did not
// within two minutes.
func (r *run) sendCanary(ctx context.Context, worker string) time.Time {
	r.user.mu.Lock()
	r.canary++
	name := fmt.Sprintf("canary-%03d", r.canary)
	r.user.mu.Unlock()
	job := baseJob(r.env.namespace, name, ShapeCanary, time.Second)
	r.user.forNodes(&job.Spec.Template)
	if worker != "" {
		job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerSelectorLabel + "=" + worker}
	}
	jobs := r.env.managerClient.BatchV1().Jobs(r.env.namespace)
	if err := retryOnAPIErrors(ctx, func(ctx context.Context) error {
		_, err := jobs.Create(ctx, job, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return time.Time{}
	}
	var done time.Time
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if terminal(j) != "" {
			done = time.Now()
			return true, nil
		}
		return false, nil
	})
	return done
}

func terminal(j *batchv1.Job) batchv1.JobConditionType {
	return JobFactsOf(j).Terminal
}

// stopCronJob suspends the CronJob so it makes no Job while the run settles.
func (r *run) stopCronJob(ctx context.Context) error {
	cronJobs := r.env.managerClient.BatchV1().CronJobs(r.env.namespace)
	return retryOnAPIErrors(ctx, func(ctx context.Context) error {
		cj, err := cronJobs.Get(ctx, "every-minute", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cj.Spec.Suspend = ptr.To(true)
		_, err = cronJobs.Update(ctx, cj, metav1.UpdateOptions{})
		return err
	})
}

// waitFinished waits until every manager Job of the run is finished, or
// deadline (the checker then names the ones that were not).
func (r *run) waitFinished(ctx context.Context, deadline time.Time) {
	jobs := r.env.managerClient.BatchV1().Jobs(r.env.namespace)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := jobs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		unfinished := 0
		for i := range list.Items {
			if terminal(&list.Items[i]) == "" && list.Items[i].DeletionTimestamp == nil {
				unfinished++
			}
		}
		return unfinished == 0, nil
	})
}

// cleanUp deletes the run's manager namespace, as a user would once done,
// waits for the workers to hold nothing of it, and returns what they still
// hold after two minutes: mirrors, pods, and the namespaces jobferry made.
func (r *run) cleanUp(ctx context.Context) ([]string, error) {
	if err := retryOnAPIErrors(ctx, func(ctx context.Context) error {
		err := r.env.managerClient.CoreV1().Namespaces().Delete(ctx, r.env.namespace, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return nil, err
	}
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = nil
		for _, w := range r.env.Workers {
			held, err := r.heldBy(ctx, w.Name)
			if err != nil {
				left = append(left, fmt.Sprintf("%s: %v", w.Name, err))
				continue
			}
			left = append(left, held...)
		}
		return len(left) == 0, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return nil, err
	}
	return left, nil
}

func (r *run) heldBy(ctx context.Context, worker string) ([]string, error) {
	c := r.env.workerClients[worker]
	var held []string
	mirrors, err := c.BatchV1().Jobs("").List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.OriginLabel})
	if err != nil {
		return nil, err
	}
	for _, m := range mirrors.Items {
		held = append(held, fmt.Sprintf("%s: mirror %s/%s (UID %s)", worker, m.Namespace, m.Name, m.UID))
	}
	pods, err := c.CoreV1().Pods(r.env.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		held = append(held, fmt.Sprintf("%s: pod %s/%s", worker, p.Namespace, p.Name))
	}
	ns, err := c.CoreV1().Namespaces().Get(ctx, r.env.namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	case ns.Labels[v1alpha1.ManagerIDLabel] != "":
		held = append(held, fmt.Sprintf("%s: namespace %s jobferry made (phase %s)", worker, ns.Name, ns.Status.Phase))
	}
	return held, nil
}

// The run's record, in its directory: what CheckRecord reads again.
const (
	historyFile = "history.json"
	factsFile   = "facts.json"
	reportFile  = "report.txt"
)

// keep writes the run's record: the history, the facts (the faults among
// them), the report.
func (r *run) keep(changes []Change, facts Facts, report *Report) error {
	if err := os.MkdirAll(r.o.Dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for name, v := range map[string]any{historyFile: changes, factsFile: facts} {
		data, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(r.o.Dir, name), data, 0o644))
	}
	errs = append(errs, os.WriteFile(filepath.Join(r.o.Dir, reportFile), []byte(report.String()), 0o644))
	return errors.Join(errs...)
}

// CheckRecord runs the checker again over a run's record (the history and
// facts it kept in dir): the violations of that run, as the checker sees
// them now.
func CheckRecord(dir string) ([]Violation, Observed, error) {
	var changes []Change
	var facts Facts
	for name, v := range map[string]any{historyFile: &changes, factsFile: &facts} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, Observed{}, fmt.Errorf("reading the run's record: %w", err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			return nil, Observed{}, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	violations, observed := Check(changes, facts)
	return violations, observed, nil
}
