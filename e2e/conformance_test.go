//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// The differential conformance suite. Every scenario runs twice at once: on
// an ordinary Job run by kube-controller-manager, and on a Job with
// spec.managedBy jobferry.dev/worker run by the jobferry worker (in a
// cluster whose controller-manager has no Job controller). A scenario is a
// list of steps; each step acts (sets pod phases, deletes pods, suspends,
// restarts the controller...) and waits until the Job's status agrees with
// its pods and a step-specific condition holds. The observation made then —
// status counters, condition types/reasons/messages, start and completion
// times relative to the step, pods with their phase, index, hostname and
// finalizers — must be the same for both controllers, as must the set of
// Event reasons at the end. Pods stay unscheduled (their nodeSelector
// matches no node), so only the test moves their phases, as in
// test/integration/job of kubernetes.

// noNode keeps conformance pods unscheduled.
var noNode = map[string]string{"jobferry.dev/pool": "none"}

// podRef is "pod <namespace>/<name>" in a condition message.
var podRef = regexp.MustCompile(`(?i)pod [a-z0-9-]+/[a-z0-9-]+`)

// blockDeletionFinalizer keeps deleted pods visible as terminating until a
// step releases them (upstream tests use the same device).
const blockDeletionFinalizer = "e2e.jobferry.dev/block-deletion"

type observation struct {
	JobExists                                     bool
	Active, Ready, Succeeded, Failed, Terminating int32
	TerminatingNil                                bool
	Uncounted                                     int
	CompletedIndexes                              string
	FailedIndexes                                 string
	Conditions                                    []string
	StartTime, CompletionTime                     string
	Pods                                          []string
}

// podSummary says what of a pod both controllers must agree on.
func podSummary(p *corev1.Pod) string {
	indexEnv := false
	for _, e := range p.Spec.Containers[0].Env {
		indexEnv = indexEnv || e.Name == "JOB_COMPLETION_INDEX"
	}
	ctrl := "none"
	if ref := metav1.GetControllerOf(p); ref != nil {
		ctrl = ref.Kind
	}
	return fmt.Sprintf("%s index=%s/%s failures=%s phase=%s deleting=%t tracking=%t blocked=%t hostname=%q indexEnv=%t controller=%s",
		p.GenerateName, p.Annotations[batchv1.JobCompletionIndexAnnotation], p.Labels[batchv1.JobCompletionIndexAnnotation],
		p.Annotations[batchv1.JobIndexFailureCountAnnotation],
		p.Status.Phase, p.DeletionTimestamp != nil, slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer),
		slices.Contains(p.Finalizers, blockDeletionFinalizer), p.Spec.Hostname, indexEnv, ctrl)
}

// timeChange describes a start or completion time against the one seen at
// the previous step: the exact values differ between the runs, but whether
// the step set, kept, reset or cleared them must not.
func timeChange(prev, cur *metav1.Time) string {
	switch {
	case cur == nil && prev == nil:
		return "unset"
	case cur == nil:
		return "cleared"
	case prev == nil:
		return "set"
	case cur.Equal(prev):
		return "kept"
	}
	return "reset"
}

// consistent: the controller has caught up with the pods — its counts match
// them, nothing is uncounted, and no terminal pod still holds the finalizer.
func consistent(job *batchv1.Job, pods []corev1.Pod) bool {
	var active, ready, terminating int32
	for i := range pods {
		p := &pods[i]
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if terminal && slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			return false
		}
		switch {
		case !terminal && p.DeletionTimestamp == nil:
			active++
			if isPodReady(p) {
				ready++
			}
		case !terminal:
			terminating++
		}
	}
	s := job.Status
	u := s.UncountedTerminatedPods
	return s.Active == active && ptr.Deref(s.Ready, 0) == ready && ptr.Deref(s.Terminating, 0) == terminating &&
		(u == nil || len(u.Succeeded)+len(u.Failed) == 0)
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// run is one scenario on one side.
type run struct {
	side     *conformanceSide
	ns, name string
	// startTime and completionTime as seen at the previous step.
	startTime, completionTime *metav1.Time
}

func (r *run) job(ctx context.Context) (*batchv1.Job, error) {
	return r.side.client.BatchV1().Jobs(r.ns).Get(ctx, r.name, metav1.GetOptions{})
}

func (r *run) pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := r.side.client.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool { return podSummary(&pods[i]) < podSummary(&pods[j]) })
	return pods, nil
}

// observe reads the Job, then its pods: the pods are never older than the
// status, so a status write that follows pod changes (the tracking
// finalizer comes off before the counters move) is not seen without them.
func (r *run) observe(ctx context.Context) (observation, bool, error) {
	job, jobErr := r.job(ctx)
	if jobErr != nil && !apierrors.IsNotFound(jobErr) {
		return observation{}, false, jobErr
	}
	pods, err := r.pods(ctx)
	if err != nil {
		return observation{}, false, err
	}
	o := observation{TerminatingNil: true}
	for i := range pods {
		o.Pods = append(o.Pods, podSummary(&pods[i]))
	}
	if jobErr != nil {
		return o, true, nil
	}
	s := job.Status
	o.JobExists = true
	o.Active, o.Ready, o.Succeeded, o.Failed = s.Active, ptr.Deref(s.Ready, -1), s.Succeeded, s.Failed
	o.Terminating, o.TerminatingNil = ptr.Deref(s.Terminating, 0), s.Terminating == nil
	if u := s.UncountedTerminatedPods; u != nil {
		o.Uncounted = len(u.Succeeded) + len(u.Failed)
	}
	o.CompletedIndexes = s.CompletedIndexes
	o.FailedIndexes = ptr.Deref(s.FailedIndexes, "<nil>")
	for _, c := range s.Conditions {
		// podFailurePolicy messages name the pod, whose name differs.
		msg := podRef.ReplaceAllString(c.Message, "pod <pod>")
		o.Conditions = append(o.Conditions, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, msg))
	}
	o.StartTime = timeChange(r.startTime, s.StartTime)
	o.CompletionTime = timeChange(r.completionTime, s.CompletionTime)
	return o, consistent(job, pods), nil
}

// activePods are the pods the test may still move: not terminal, not deleted.
func (r *run) activePods(ctx context.Context) ([]corev1.Pod, error) {
	pods, err := r.pods(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}), nil
}

// setPodStatus changes a pod's status as a kubelet would.
func (r *run) setPodStatus(ctx context.Context, name string, change func(*corev1.PodStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := r.side.client.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&pod.Status)
		_, err = r.side.client.CoreV1().Pods(r.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

func setPhase(phase corev1.PodPhase) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) { s.Phase = phase }
}

func markReady(s *corev1.PodStatus) {
	s.Phase = corev1.PodRunning
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
}

// each applies change to the first n pods matching keep (n < 0: all).
func (r *run) each(ctx context.Context, n int, keep func(*corev1.Pod) bool, change func(context.Context, *corev1.Pod) error) error {
	pods, err := r.pods(ctx)
	if err != nil {
		return err
	}
	done := 0
	for i := range pods {
		if n >= 0 && done == n {
			break
		}
		if keep(&pods[i]) {
			if err := change(ctx, &pods[i]); err != nil {
				return err
			}
			done++
		}
	}
	if n >= 0 && done < n {
		return fmt.Errorf("only %d of %d pods to change", done, n)
	}
	return nil
}

func isActivePod(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func isDeletingPod(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func withIndex(ix string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		return isActivePod(p) && p.Annotations[batchv1.JobCompletionIndexAnnotation] == ix
	}
}

func (r *run) statusOf(phase corev1.PodPhase) func(context.Context, *corev1.Pod) error {
	return func(ctx context.Context, p *corev1.Pod) error { return r.setPodStatus(ctx, p.Name, setPhase(phase)) }
}

func (r *run) deletePod(ctx context.Context, p *corev1.Pod) error {
	return r.side.client.CoreV1().Pods(r.ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
}

func (r *run) unblock(ctx context.Context, p *corev1.Pod) error {
	patch := fmt.Sprintf(`{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, blockDeletionFinalizer)
	_, err := r.side.client.CoreV1().Pods(r.ns).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (r *run) patchJob(ctx context.Context, patch string) error {
	_, err := r.side.client.BatchV1().Jobs(r.ns).Patch(ctx, r.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (r *run) deleteJob(ctx context.Context, propagation metav1.DeletionPropagation) error {
	return r.side.client.BatchV1().Jobs(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{PropagationPolicy: &propagation})
}

func (r *run) eventReasons(ctx context.Context) ([]string, error) {
	list, err := r.side.client.CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == r.name {
			set[e.Reason] = true
		}
	}
	reasons := make([]string, 0, len(set))
	for reason := range set {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	return reasons, nil
}

type step struct {
	name string
	act  func(ctx context.Context, r *run) error
	// until must hold (besides consistency) before the step is observed.
	until func(o observation) bool
	// anyState skips the consistency requirement (the Job is gone, or
	// nobody runs it).
	anyState bool
}

type scenario struct {
	name string
	// port names the upstream integration test the scenario follows.
	port string
	job  func() *batchv1.Job
	// sequential scenarios restart the controller; they run alone so the
	// restart does not stretch the others.
	sequential bool
	steps      []step
	// lastEvent is the reason whose Event ends the scenario. Events are
	// written after the fact, by a broadcaster of their own: a scenario
	// that ends within a second (a Job deleted as soon as its pods exist)
	// names the last Event it expects, or one side's reasons may be read
	// before that side's Events are written (the likeliest cause of a CI
	// failure of background-deletion-finalizers, 0.46 s long, whose message
	// was not kept).
	lastEvent string
}

// playScenario runs the scenario on one side, returning what it observed.
func playScenario(ctx context.Context, side *conformanceSide, sc scenario) ([]observation, []string, error) {
	ns, err := side.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "conformance-"}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, err
	}
	job := sc.job()
	job.Namespace = ns.Name
	job.Spec.ManagedBy = side.managedBy
	job.Spec.Template.Spec.NodeSelector = noNode
	r := &run{side: side, ns: ns.Name, name: job.Name}
	if _, err := side.client.BatchV1().Jobs(ns.Name).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("creating Job: %w", err)
	}
	var observations []observation
	for _, st := range sc.steps {
		if st.act != nil {
			if err := st.act(ctx, r); err != nil {
				return observations, nil, fmt.Errorf("step %q: %w", st.name, err)
			}
		}
		var last observation
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			o, ok, err := r.observe(ctx)
			if err != nil {
				return false, err
			}
			last = o
			return (ok || st.anyState) && st.until(o), nil
		})
		if err != nil {
			return observations, nil, fmt.Errorf("step %q: %w; last observation: %+v", st.name, err, last)
		}
		observations = append(observations, last)
		if job, err := r.job(ctx); err == nil {
			r.startTime, r.completionTime = job.Status.StartTime, job.Status.CompletionTime
		}
	}
	var reasons []string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		reasons, err = r.eventReasons(ctx)
		return sc.lastEvent == "" || slices.Contains(reasons, sc.lastEvent), err
	}); err != nil {
		return observations, reasons, fmt.Errorf("waiting for Event %s: %w (have %v)", sc.lastEvent, err, reasons)
	}
	return observations, reasons, nil
}

func conformanceJob(name string, parallelism, completions *int32, mutate ...func(*batchv1.Job)) func() *batchv1.Job {
	return func() *batchv1.Job {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{
				Parallelism: parallelism,
				Completions: completions,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.example/sleep:1"}},
				}},
			},
		}
		for _, m := range mutate {
			m(job)
		}
		return job
	}
}

func indexed(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) }
func blockDeletion(j *batchv1.Job) {
	j.Spec.Template.Finalizers = append(j.Spec.Template.Finalizers, blockDeletionFinalizer)
}
func backoffLimit(n int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To(n) }
}
func replacement(p batchv1.PodReplacementPolicy) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(p) }
}
func suspendedAtCreation(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }

func hasCond(o observation, prefix string) bool {
	return slices.ContainsFunc(o.Conditions, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func counts(active, succeeded, failed int32) func(observation) bool {
	return func(o observation) bool { return o.Active == active && o.Succeeded == succeeded && o.Failed == failed }
}

func all(conds ...func(observation) bool) func(observation) bool {
	return func(o observation) bool {
		for _, c := range conds {
			if !c(o) {
				return false
			}
		}
		return true
	}
}

func cond(prefix string) func(observation) bool {
	return func(o observation) bool { return hasCond(o, prefix) }
}

func podCount(n int) func(observation) bool {
	return func(o observation) bool { return len(o.Pods) == n }
}

func terminating(n int32) func(observation) bool {
	return func(o observation) bool { return o.Terminating == n }
}

// deletingUntracked: every pod being deleted has lost its tracking
// finalizer. Both controllers remove it from the pods they stop, one pod at
// a time; an observation taken between two removals differs by timing
// alone (seen once in CI: success-policy, one side a pod ahead).
func deletingUntracked(o observation) bool {
	for _, p := range o.Pods {
		if strings.Contains(p, "deleting=true tracking=true") {
			return false
		}
	}
	return true
}

// act helpers: the first n active pods (or the given index) get a phase,
// are deleted, become ready...
func phaseOf(n int, phase corev1.PodPhase) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error { return r.each(ctx, n, isActivePod, r.statusOf(phase)) }
}

func phaseOfIndex(ix string, phase corev1.PodPhase) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error { return r.each(ctx, 1, withIndex(ix), r.statusOf(phase)) }
}

func deleteActive(n int) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error { return r.each(ctx, n, isActivePod, r.deletePod) }
}

func failDeleting(ctx context.Context, r *run) error {
	return r.each(ctx, -1, isDeletingPod, r.statusOf(corev1.PodFailed))
}

func unblockAll(ctx context.Context, r *run) error {
	return r.each(ctx, -1, func(p *corev1.Pod) bool { return slices.Contains(p.Finalizers, blockDeletionFinalizer) }, r.unblock)
}

func readyActive(n int) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		return r.each(ctx, n, isActivePod, func(ctx context.Context, p *corev1.Pod) error { return r.setPodStatus(ctx, p.Name, markReady) })
	}
}

func restartController(ctx context.Context, r *run) error { return r.side.restart(ctx) }

func then(acts ...func(context.Context, *run) error) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		for _, a := range acts {
			if err := a(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}
}

func conformanceScenarios() []scenario {
	one, two, three, four, five := ptr.To[int32](1), ptr.To[int32](2), ptr.To[int32](3), ptr.To[int32](4), ptr.To[int32](5)
	complete := cond("Complete=True")
	return []scenario{
		{
			name: "non-parallel", port: "TestNonParallelJob",
			job: conformanceJob("non-parallel", nil, nil),
			steps: []step{
				{name: "created", until: counts(1, 0, 0)},
				{name: "pod fails, replaced after back-off", act: phaseOf(1, corev1.PodFailed), until: counts(1, 0, 1)},
				{name: "pod succeeds", act: phaseOf(1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "parallel", port: "TestParallelJob",
			job: conformanceJob("parallel", five, nil),
			steps: []step{
				{name: "created", until: counts(5, 0, 0)},
				{name: "two ready", act: readyActive(2), until: func(o observation) bool { return o.Ready == 2 }},
				{name: "one fails", act: phaseOf(1, corev1.PodFailed), until: counts(5, 0, 1)},
				{name: "one succeeds, no replacement", act: phaseOf(1, corev1.PodSucceeded), until: counts(4, 1, 1)},
				{name: "the rest succeed", act: phaseOf(-1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "parallel-with-completions", port: "TestParallelJobWithCompletions",
			job: conformanceJob("parallel-completions", three, five),
			steps: []step{
				{name: "created", until: counts(3, 0, 0)},
				{name: "two succeed", act: phaseOf(2, corev1.PodSucceeded), until: counts(3, 2, 0)},
				{name: "three succeed", act: phaseOf(3, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "parallelism-change", port: "TestParallelJobChangingParallelism",
			job: conformanceJob("parallelism-change", five, nil),
			steps: []step{
				{name: "created", until: counts(5, 0, 0)},
				{name: "scaled down to 1, not counted failed", act: patchJob(`{"spec":{"parallelism":1}}`), until: all(counts(1, 0, 0), podCount(1))},
				{name: "scaled up to 3", act: patchJob(`{"spec":{"parallelism":3}}`), until: counts(3, 0, 0)},
				{name: "all succeed", act: phaseOf(-1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "indexed", port: "TestIndexedJob",
			job: conformanceJob("indexed", three, four, indexed),
			steps: []step{
				{name: "created", until: counts(3, 0, 0)},
				{name: "index 1 succeeds", act: phaseOfIndex("1", corev1.PodSucceeded), until: all(counts(3, 1, 0), func(o observation) bool { return o.CompletedIndexes == "1" })},
				{name: "index 2 fails, recreated", act: phaseOfIndex("2", corev1.PodFailed), until: counts(3, 1, 1)},
				{name: "all succeed", act: phaseOf(-1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "replacement-terminating-or-failed", port: "TestJobPodReplacementPolicy/TerminatingOrFailed",
			job: conformanceJob("terminating-or-failed", two, two, blockDeletion, replacement(batchv1.TerminatingOrFailed)),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "both deleted: failed and replaced at once", act: deleteActive(2), until: all(counts(2, 0, 2), terminating(2))},
				{name: "deleted pods fail", act: failDeleting, until: all(counts(2, 0, 2), terminating(0))},
				{name: "released", act: unblockAll, until: podCount(2)},
				{name: "all succeed", act: phaseOf(-1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "replacement-failed", port: "TestJobPodReplacementPolicy/Failed",
			job: conformanceJob("failed-policy", two, two, blockDeletion, replacement(batchv1.Failed)),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "both deleted: terminating, not replaced", act: deleteActive(2), until: all(counts(0, 0, 0), terminating(2))},
				{name: "deleted pods fail: counted and replaced", act: failDeleting, until: all(counts(2, 0, 2), terminating(0))},
				{name: "released", act: unblockAll, until: podCount(2)},
				{name: "all succeed", act: phaseOf(-1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "replacement-failed-indexed", port: "TestJobPodReplacementPolicy/Failed,Indexed",
			job: conformanceJob("failed-policy-indexed", two, two, indexed, blockDeletion, replacement(batchv1.Failed)),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "index 0 deleted: terminating, not replaced", act: func(ctx context.Context, r *run) error { return r.each(ctx, 1, withIndex("0"), r.deletePod) }, until: all(counts(1, 0, 0), terminating(1))},
				{name: "deleted pod fails: counted and replaced", act: failDeleting, until: all(counts(2, 0, 1), terminating(0))},
				{name: "released", act: unblockAll, until: podCount(2)},
				{name: "all succeed", act: phaseOf(-1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "suspend-resume", port: "TestSuspendJob, TestStartTimeUpdateOnResume",
			job: conformanceJob("suspend-resume", two, four),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "suspended: pods deleted, not failed, startTime cleared", act: patchJob(`{"spec":{"suspend":true}}`), until: all(counts(0, 0, 0), podCount(0), cond("Suspended=True"))},
				{name: "resumed: startTime reset", act: patchJob(`{"spec":{"suspend":false}}`), until: all(counts(2, 0, 0), cond("Suspended=False"))},
				{name: "two succeed", act: phaseOf(2, corev1.PodSucceeded), until: counts(2, 2, 0)},
				{name: "two more succeed", act: phaseOf(2, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "created-suspended", port: "TestSuspendJobControllerRestart",
			job: conformanceJob("created-suspended", two, two, suspendedAtCreation), sequential: true,
			steps: []step{
				{name: "created suspended: no pods", until: all(cond("Suspended=True"), podCount(0))},
				{name: "controller restarted: still no pods", act: restartController, until: all(cond("Suspended=True"), podCount(0))},
				{name: "resumed", act: patchJob(`{"spec":{"suspend":false}}`), until: counts(2, 0, 0)},
				{name: "all succeed", act: phaseOf(-1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "suspended-zero-completions", port: "TestSuspendJobWithZeroCompletions",
			job: conformanceJob("zero-completions", nil, ptr.To[int32](0), suspendedAtCreation),
			steps: []step{
				{name: "complete without starting", until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "delayed-failed", port: "TestDelayTerminalPhaseCondition/Failed",
			job: conformanceJob("delayed-failed", one, one, blockDeletion, backoffLimit(0)),
			steps: []step{
				{name: "created", until: counts(1, 0, 0)},
				{name: "deleted: FailureTarget while terminating", act: deleteActive(1), until: all(cond("FailureTarget=True"), terminating(1))},
				{name: "released: Failed", act: unblockAll, until: cond("Failed=True")},
			},
			lastEvent: "BackoffLimitExceeded",
		},
		{
			name: "delayed-complete", port: "TestDelayTerminalPhaseCondition/Complete",
			job: conformanceJob("delayed-complete", two, nil, blockDeletion),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "one succeeds", act: phaseOf(1, corev1.PodSucceeded), until: counts(1, 1, 0)},
				{name: "other deleted: SuccessCriteriaMet while terminating", act: deleteActive(1), until: all(cond("SuccessCriteriaMet=True"), terminating(1))},
				{name: "released: Complete", act: unblockAll, until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "backoff-limit-many-pods", port: "TestFinalizersClearedWhenBackoffLimitExceeded",
			job: conformanceJob("backoff-limit", ptr.To[int32](50), ptr.To[int32](100), backoffLimit(0)),
			steps: []step{
				{name: "created", until: counts(50, 0, 0)},
				{name: "one fails: all stopped and counted", act: phaseOf(1, corev1.PodFailed), until: cond("Failed=True")},
			},
			lastEvent: "BackoffLimitExceeded",
		},
		{
			name: "active-deadline", port: "unit TestPastDeadlineJobFinished",
			job: conformanceJob("deadline", one, one, func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](3) }),
			steps: []step{
				{name: "created", until: counts(1, 0, 0)},
				{name: "deadline passes: pod stopped and counted, Failed", until: cond("Failed=True")},
			},
			lastEvent: "DeadlineExceeded",
		},
		{
			name: "restart-policy-on-failure", port: "unit TestJobBackoffForOnFailure",
			job: conformanceJob("on-failure", one, one, backoffLimit(2), func(j *batchv1.Job) {
				j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			}),
			steps: []step{
				{name: "created", until: counts(1, 0, 0)},
				{name: "one container restart: below the limit", act: restarts(1), until: func(o observation) bool { return strings.Contains(strings.Join(o.Pods, " "), "phase=Running") }},
				{name: "two container restarts: backoff limit reached", act: restarts(2), until: cond("Failed=True")},
			},
			lastEvent: "BackoffLimitExceeded",
		},
		{
			name: "elastic-indexed", port: "TestElasticIndexedJob",
			job: conformanceJob("elastic", three, three, indexed),
			steps: []step{
				{name: "created", until: counts(3, 0, 0)},
				{name: "index 2 succeeds", act: phaseOfIndex("2", corev1.PodSucceeded), until: func(o observation) bool { return o.CompletedIndexes == "2" && o.Active == 2 }},
				{name: "scaled down to 1: index 1 removed, index 2 no longer counted", act: patchJob(`{"spec":{"completions":1,"parallelism":1}}`), until: all(counts(1, 0, 0), podCount(2))},
				{name: "index 0 succeeds", act: phaseOfIndex("0", corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "pod-failure-policy-fail-job", port: "TestJobPodFailurePolicy/FailJob",
			job: conformanceJob("pfp-fail-job", two, two, podFailurePolicy(batchv1.PodFailurePolicyRule{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
			})),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "exit code 42: FailJob, the other pod stopped and counted", act: failWith(42, false), until: cond("Failed=True")},
			},
			lastEvent: "PodFailurePolicy",
		},
		{
			name: "pod-failure-policy-ignore-count", port: "TestJobPodFailurePolicy/Ignore,Count",
			job: conformanceJob("pfp-ignore-count", one, one, podFailurePolicy(
				batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
				batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}},
			)),
			steps: []step{
				{name: "created", until: counts(1, 0, 0)},
				{name: "disrupted: ignored, replaced after back-off", act: failWith(137, true), until: all(counts(1, 0, 0), podCount(2))},
				{name: "exit code 1: counted, replaced", act: failWith(1, false), until: all(counts(1, 0, 1), podCount(3))},
				{name: "succeeds", act: phaseOf(1, corev1.PodSucceeded), until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "success-policy", port: "TestSuccessPolicy",
			job: conformanceJob("success-policy", three, three, indexed, blockDeletion, func(j *batchv1.Job) {
				j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
			}),
			steps: []step{
				{name: "created", until: counts(3, 0, 0)},
				{name: "index 0 succeeds: SuccessCriteriaMet, the others stopped", act: phaseOfIndex("0", corev1.PodSucceeded), until: all(cond("SuccessCriteriaMet=True"), terminating(2), deletingUntracked)},
				{name: "released: Complete", act: unblockAll, until: complete},
			},
			lastEvent: "Completed",
		},
		{
			name: "backoff-limit-per-index", port: "TestBackoffLimitPerIndex",
			job: conformanceJob("per-index", two, two, indexed, perIndex(1, nil)),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "index 0 fails: replaced after its back-off with the count carried", act: failIndexWith("0", 1), until: all(counts(2, 0, 1), podCount(3))},
				{name: "index 0 fails again: failed for good", act: failIndexWith("0", 1), until: func(o observation) bool { return o.FailedIndexes == "0" && o.Failed == 2 && o.Active == 1 }},
				{name: "index 1 succeeds: Job Failed with failed indexes", act: phaseOfIndex("1", corev1.PodSucceeded), until: cond("Failed=True")},
			},
			lastEvent: "FailedIndexes",
		},
		{
			name: "max-failed-indexes", port: "TestBackoffLimitPerIndex/maxFailedIndexes",
			job: conformanceJob("max-failed", three, three, indexed, perIndex(0, ptr.To[int32](0))),
			steps: []step{
				{name: "created", until: counts(3, 0, 0)},
				{name: "index 0 fails: too many failed indexes, the rest stopped", act: failIndexWith("0", 1), until: cond("Failed=True")},
			},
			lastEvent: "MaxFailedIndexesExceeded",
		},
		{
			name: "pod-failure-policy-fail-index", port: "TestBackoffLimitPerIndex/FailIndex",
			job: conformanceJob("fail-index", two, two, indexed, perIndex(3, nil), podFailurePolicy(batchv1.PodFailurePolicyRule{
				Action:      batchv1.PodFailurePolicyActionFailIndex,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
			})),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "index 0 exits 42: FailIndex, no retry", act: failIndexWith("0", 42), until: func(o observation) bool { return o.FailedIndexes == "0" && o.Failed == 1 }},
				{name: "index 1 succeeds: Job Failed", act: phaseOfIndex("1", corev1.PodSucceeded), until: cond("Failed=True")},
			},
			lastEvent: "FailedIndexes",
		},
		{
			name: "failed-with-interrupts", port: "TestJobFailedWithInterrupts",
			job: conformanceJob("interrupts", ptr.To[int32](10), ptr.To[int32](10), backoffLimit(0)), sequential: true,
			steps: []step{
				{name: "created", until: counts(10, 0, 0)},
				{name: "controller down: one fails, nine succeed; back up", act: func(ctx context.Context, r *run) error {
					if err := r.side.stop(); err != nil {
						return err
					}
					if err := then(phaseOf(1, corev1.PodFailed), phaseOf(9, corev1.PodSucceeded))(ctx, r); err != nil {
						return err
					}
					return r.side.start(ctx)
				}, until: cond("Failed=True")},
			},
			lastEvent: "BackoffLimitExceeded",
		},
		{
			name: "orphan-pods-finalizers", port: "TestOrphanPodsFinalizersClearedWithGC/Orphan",
			job: conformanceJob("orphan", two, nil),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "Job deleted, pods orphaned: finalizers cleared", act: deleteJobWith(metav1.DeletePropagationOrphan), anyState: true, until: noJobNoTracking},
			},
			lastEvent: "SuccessfulCreate",
		},
		{
			name: "background-deletion-finalizers", port: "TestOrphanPodsFinalizersClearedWithGC/Background",
			job: conformanceJob("background", two, nil),
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "Job deleted: pods gone", act: deleteJobWith(metav1.DeletePropagationBackground), anyState: true, until: all(noJobNoTracking, podCount(0))},
			},
			lastEvent: "SuccessfulCreate",
		},
		{
			name: "orphans-cleared-on-restart", port: "TestOrphanPodsFinalizersClearedOnRestart",
			job: conformanceJob("orphans-restart", two, nil), sequential: true,
			steps: []step{
				{name: "created", until: counts(2, 0, 0)},
				{name: "controller down, Job deleted, controller up: pods gone", act: func(ctx context.Context, r *run) error {
					if err := r.side.stop(); err != nil {
						return err
					}
					if err := r.deleteJob(ctx, metav1.DeletePropagationBackground); err != nil {
						return err
					}
					return r.side.start(ctx)
				}, anyState: true, until: all(noJobNoTracking, podCount(0))},
			},
		},
	}
}

func podFailurePolicy(rules ...batchv1.PodFailurePolicyRule) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: rules} }
}

func perIndex(limit int32, maxFailed *int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes = ptr.To(limit), maxFailed
	}
}

// failWith fails the first active pod with the exit code, optionally as
// disrupted (condition DisruptionTarget, as after a preemption).
func failWith(exitCode int32, disrupted bool) func(context.Context, *run) error {
	return failMatching(isActivePod, exitCode, disrupted)
}

// failIndexWith fails the active pod of an index with the exit code.
func failIndexWith(ix string, exitCode int32) func(context.Context, *run) error {
	return failMatching(withIndex(ix), exitCode, false)
}

func failMatching(keep func(*corev1.Pod) bool, exitCode int32, disrupted bool) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		return r.each(ctx, 1, keep, func(ctx context.Context, p *corev1.Pod) error {
			return r.setPodStatus(ctx, p.Name, func(s *corev1.PodStatus) {
				now := metav1.Now()
				s.Phase = corev1.PodFailed
				s.ContainerStatuses = []corev1.ContainerStatus{{
					Name: "main", Image: "registry.example/sleep:1", ImageID: "registry.example/sleep@sha256:1",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, StartedAt: now, FinishedAt: now}},
				}}
				if disrupted {
					s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", LastTransitionTime: now})
				}
			})
		})
	}
}

// restarts reports the first active pod running with n container restarts.
func restarts(n int32) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		return r.each(ctx, 1, isActivePod, func(ctx context.Context, p *corev1.Pod) error {
			return r.setPodStatus(ctx, p.Name, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodRunning
				s.ContainerStatuses = []corev1.ContainerStatus{{
					Name: "main", Image: "registry.example/sleep:1", ImageID: "registry.example/sleep@sha256:1",
					RestartCount: n, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
				}}
			})
		})
	}
}

func patchJob(patch string) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error { return r.patchJob(ctx, patch) }
}

func deleteJobWith(p metav1.DeletionPropagation) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error { return r.deleteJob(ctx, p) }
}

func noJobNoTracking(o observation) bool {
	if o.JobExists {
		return false
	}
	for _, p := range o.Pods {
		if strings.Contains(p, "tracking=true") {
			return false
		}
	}
	return true
}

// TestConformance runs every scenario on both controllers and compares; then
// checks that each controller leaves the other's Jobs alone; then the stress
// scenario; then what only the worker has (--manage-unmanaged-jobs).
func TestConformance(t *testing.T) {
	kcm, worker := startConformanceSides(t, "")
	t.Run("scenarios", func(t *testing.T) {
		// Subtests without t.Parallel run first, one by one; the parallel
		// ones start together once this function returns.
		for _, sc := range conformanceScenarios() {
			t.Run(sc.name, func(t *testing.T) {
				if !sc.sequential {
					t.Parallel()
				}
				compareScenario(t, kcm, worker, sc)
			})
		}
	})
	t.Run("managedBy-skipping", func(t *testing.T) { compareSkipping(t, kcm, worker) })
	t.Run("stress-1000-completions", func(t *testing.T) { testStress(t, kcm, worker) })
	// Last: it replaces the worker process.
	t.Run("worker-only/manage-unmanaged-jobs", func(t *testing.T) { testManageUnmanagedJobs(t, worker) })
}

// knownDifference is a step of a scenario where the two controllers'
// startTime differs by design (one's minor changed upstream semantics the
// other's has not): each side must show its own, and the rest of the step
// must agree.
type knownDifference struct {
	step, kcmStartTime, workerStartTime string
}

func compareScenario(t *testing.T, kcm, worker *conformanceSide, sc scenario, known ...knownDifference) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	type result struct {
		obs     []observation
		reasons []string
		err     error
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, side := range []*conformanceSide{kcm, worker} {
		wg.Go(func() {
			obs, reasons, err := playScenario(ctx, side, sc)
			results[i] = result{obs, reasons, err}
		})
	}
	wg.Wait()
	for i, side := range []string{kcm.name, worker.name} {
		if results[i].err != nil {
			t.Fatalf("%s (%s): %v", side, sc.port, results[i].err)
		}
	}
	same := true
	for i := range sc.steps {
		for _, k := range known {
			if k.step != sc.steps[i].name {
				continue
			}
			if got, want := results[0].obs[i].StartTime, k.kcmStartTime; got != want {
				t.Errorf("step %q: %s's startTime %s, want %s", k.step, kcm.name, got, want)
			}
			if got, want := results[1].obs[i].StartTime, k.workerStartTime; got != want {
				t.Errorf("step %q: %s's startTime %s, want %s", k.step, worker.name, got, want)
			}
			results[1].obs[i].StartTime = results[0].obs[i].StartTime
		}
		if diff := cmp.Diff(results[0].obs[i], results[1].obs[i]); diff != "" {
			same = false
			t.Errorf("step %q differs (-%s +%s):\n%s", sc.steps[i].name, kcm.name, worker.name, diff)
		}
	}
	if diff := cmp.Diff(results[0].reasons, results[1].reasons); diff != "" {
		same = false
		t.Errorf("event reasons differ (-%s +%s):\n%s", kcm.name, worker.name, diff)
	}
	if same {
		t.Logf("conformance %s (%s): %d steps, same observations; events %v; final %+v", sc.name, sc.port, len(sc.steps), results[0].reasons, results[0].obs[len(sc.steps)-1])
	}
}

// compareSkipping: on each side, a Job managed by the other controller next
// to one of its own. The other Job takes the name of one of the side's own
// Jobs, deleted just before, so a sync queued for the deleted Job meets the
// new one (upstream TestManagedBy_RecreatedJob). Once the side's own Job is
// Complete (so the controller has synced since), the other Job has no pods
// and an empty status: the controller skipped it (KEP-4368; TestManagedBy).
func compareSkipping(t *testing.T, kcm, worker *conformanceSide) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, pair := range [][2]*conformanceSide{{kcm, worker}, {worker, kcm}} {
		side, other := pair[0], pair[1]
		otherName := ptr.Deref(other.managedBy, "kube-controller-manager")
		ns := createNamespace(ctx, t, side.client)
		newJob := func(name string, managedBy *string) *batchv1.Job {
			j := conformanceJob(name, ptr.To[int32](1), nil)()
			j.Namespace, j.Spec.ManagedBy = ns, managedBy
			j.Spec.Template.Spec.NodeSelector = noNode
			created, err := side.client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return created
		}
		newJob("reused", side.managedBy)
		pollJob(ctx, t, side.client, ns, "reused", time.Minute, "own Job running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		background := metav1.DeletePropagationBackground
		if err := side.client.BatchV1().Jobs(ns).Delete(ctx, "reused", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Fatal(err)
		}
		foreign := newJob("reused", other.managedBy)
		newJob("own", side.managedBy)
		r := &run{side: side, ns: ns, name: "own"}
		pollJob(ctx, t, side.client, ns, "own", time.Minute, "own Job running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		ownPod := func(p *corev1.Pod) bool { return isActivePod(p) && p.Labels[batchv1.JobNameLabel] == "own" }
		if err := r.each(ctx, 1, ownPod, r.statusOf(corev1.PodSucceeded)); err != nil {
			t.Fatal(err)
		}
		pollJob(ctx, t, side.client, ns, "own", time.Minute, "own Job Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
		got, err := side.client.BatchV1().Jobs(ns).Get(ctx, "reused", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != foreign.UID {
			t.Fatalf("Job reused was replaced again")
		}
		if diff := cmp.Diff(batchv1.JobStatus{}, got.Status); diff != "" {
			t.Errorf("%s touched the status of a Job managed by %s (-want +got):\n%s", side.name, otherName, diff)
		}
		pods, err := side.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(foreign.UID)})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 0 {
			t.Errorf("%s created %d pods for a Job managed by %s", side.name, len(pods.Items), otherName)
		}
		t.Logf("%s left the Job managed by %s alone (created under the name of one of its own, just deleted): empty status, no pods", side.name, otherName)
	}
}
