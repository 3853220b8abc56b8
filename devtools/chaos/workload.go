package chaos

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// Shape is one kind of Job the workload sends, as users send them.
type Shape string

const (
	ShapePlain             Shape = "plain"
	ShapeIndexedFailing    Shape = "indexed-failing-index"
	ShapePodFailurePolicy  Shape = "pod-failure-policy"
	ShapeSuccessPolicy     Shape = "success-policy"
	ShapeParallelismChange Shape = "parallelism-change"
	ShapeSuspendResume     Shape = "suspend-resume"
	ShapeDeletedRunning    Shape = "deleted-while-running"
	ShapeTTL               Shape = "ttl-after-finished"
	ShapeQueued            Shape = "queued"
	ShapeCronJob           Shape = "from-cronjob"
	ShapeCanary            Shape = "canary"
)

// ShapeLabel carries a Job's shape (reports count Jobs by it).
const ShapeLabel = "chaos.jobferry.dev/shape"

// KWOK's stages read these (devtools/localcluster/stages.yaml).
const (
	runForAnnotation       = "pod-complete.stage.kwok.x-k8s.io/delay"
	failingIndexAnnotation = "pod-index-failed.stage.jobferry.dev/index"
	failingPodLabel        = "pod-container-running-failed.stage.kwok.x-k8s.io"
)

// shapes are drawn uniformly (ShapeQueued only in Kueue mode; the CronJob
// and the canaries are not drawn).
var shapes = []Shape{ShapePlain, ShapePlain, ShapeIndexedFailing, ShapePodFailurePolicy, ShapeSuccessPolicy,
	ShapeParallelismChange, ShapeSuspendResume, ShapeDeletedRunning, ShapeTTL}

// plannedJob is one Job of the workload as the seed draws it.
type plannedJob struct {
	Offset time.Duration
	Shape  Shape
	Name   string
	// RunFor is how long each pod runs; Act is when (after its creation)
	// the user acts on it, Act2 when again (suspend, then resume).
	RunFor, Act, Act2 time.Duration
	// Choice is a number the shape reads (the failing index, whether its
	// pods fail).
	Choice int
}

// planWorkload draws the workload's Jobs: rate per second over span.
func planWorkload(seed uint64, o Options, span time.Duration) []plannedJob {
	r := rand.New(rand.NewPCG(seed, 0x776f726b)) // "work"
	drawn := shapes
	if o.Kueue {
		drawn = append(append([]Shape(nil), shapes...), ShapeQueued, ShapeQueued)
	}
	n := int(span.Seconds() * o.Rate)
	var out []plannedJob
	for i := range n {
		s := drawn[r.IntN(len(drawn))]
		out = append(out, plannedJob{
			Offset: time.Duration(float64(i) / o.Rate * float64(time.Second)),
			Shape:  s,
			Name:   fmt.Sprintf("%s-%04d", s, i),
			RunFor: between(r, time.Second, 8*time.Second),
			Act:    between(r, 2*time.Second, 6*time.Second),
			Act2:   between(r, 3*time.Second, 8*time.Second),
			Choice: r.IntN(4),
		})
	}
	return out
}

// jobFor builds a planned Job.
func jobFor(p plannedJob, namespace, queue string) *batchv1.Job {
	job := baseJob(namespace, p.Name, p.Shape, p.RunFor)
	spec := &job.Spec
	switch p.Shape {
	case ShapePlain, ShapeQueued:
		spec.Completions = ptr.To(int32(1 + p.Choice%3))
		spec.Parallelism = ptr.To(int32(1 + p.Choice%2))
		if p.Shape == ShapeQueued {
			job.Labels[v1alpha1.KueueQueueNameLabel] = queue
		}
	case ShapeIndexedFailing:
		spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		spec.Completions, spec.Parallelism = ptr.To[int32](4), ptr.To[int32](2)
		spec.BackoffLimit, spec.BackoffLimitPerIndex = nil, ptr.To[int32](1)
		spec.Template.Annotations[failingIndexAnnotation] = fmt.Sprint(p.Choice)
	case ShapePodFailurePolicy:
		// Half of them fail with exit code 1, which fails the Job at once;
		// a pod disrupted (its node lost, say) is not counted.
		if p.Choice%2 == 0 {
			spec.Template.Labels = map[string]string{failingPodLabel: "true"}
		}
		spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To("main"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}},
			{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		}}
	case ShapeSuccessPolicy:
		spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		spec.Completions, spec.Parallelism = ptr.To[int32](4), ptr.To[int32](4)
		spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
	case ShapeParallelismChange:
		spec.Completions, spec.Parallelism = ptr.To[int32](6), ptr.To[int32](1)
	case ShapeSuspendResume:
		spec.Completions, spec.Parallelism = ptr.To[int32](2), ptr.To[int32](1)
	case ShapeDeletedRunning:
		job.Spec.Template.Annotations[runForAnnotation] = "10m"
	case ShapeTTL:
		spec.TTLSecondsAfterFinished = ptr.To[int32](5)
	}
	return job
}

func baseJob(namespace, name string, shape Shape, runFor time.Duration) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{ShapeLabel: string(shape)}},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](6),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{runForAnnotation: runFor.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: "registry.example/sleep:1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					}},
				},
			},
		},
	}
}

// forNodes makes a pod template run on the run's nodes: on KWOK's as its
// stage annotations say, on real ones as onRealNodes makes them.
func (u *user) forNodes(t *corev1.PodTemplateSpec) {
	if u.realNodes {
		onRealNodes(t)
	}
}

// onRealNodes makes a pod template KWOK would play (its stage annotations
// and label) run for real: busybox sleeping as long, then failing as the
// stages would (exit code 1: the pod labelled to fail, or the Indexed
// Job's failing index), and stopping at once when its pod is deleted (sh
// as PID 1 would otherwise ignore SIGTERM for the whole grace period).
func onRealNodes(t *corev1.PodTemplateSpec) {
	runFor, err := time.ParseDuration(t.Annotations[runForAnnotation])
	if err != nil {
		runFor = time.Second
	}
	script := fmt.Sprintf("trap 'exit 143' TERM; sleep %d & wait $!; ", int(math.Ceil(runFor.Seconds())))
	index, failsIndex := t.Annotations[failingIndexAnnotation]
	switch {
	case t.Labels[failingPodLabel] == "true":
		script += "exit 1"
	case failsIndex:
		script += fmt.Sprintf(`[ "$JOB_COMPLETION_INDEX" = %q ] && exit 1; exit 0`, index)
	default:
		script += "exit 0"
	}
	c := &t.Spec.Containers[0]
	c.Image, c.Command = localcluster.BusyboxImage, []string{"sh", "-c", script}
}

// cronJob is the run's CronJob: a short Job every minute, never two at once.
func cronJob(namespace string) *batchv1.CronJob {
	template := baseJob(namespace, "", ShapeCronJob, 5*time.Second)
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "every-minute"},
		Spec: batchv1.CronJobSpec{
			Schedule:                   "* * * * *",
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			SuccessfulJobsHistoryLimit: ptr.To[int32](2),
			FailedJobsHistoryLimit:     ptr.To[int32](2),
			JobTemplate:                batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
		},
	}
}

// user is the workload's user: it creates the planned Jobs on the manager
// (again and again while a fault refuses them), acts on them as their shape
// says, and remembers what it did for the checker.
type user struct {
	client    kubernetes.Interface
	namespace string
	queue     string
	// realNodes: the workers' nodes are real, and the Jobs' pods run
	// what KWOK would play (onRealNodes).
	realNodes bool

	mu         sync.Mutex
	created    map[types.UID]plannedJob
	deleted    map[types.UID]time.Time
	lastAction map[types.UID]time.Time
	refused    int
	refusedBy  map[string]int
	actions    sync.WaitGroup
}

func newUser(c kubernetes.Interface, namespace, queue string, realNodes bool) *user {
	return &user{client: c, namespace: namespace, queue: queue, realNodes: realNodes, created: map[types.UID]plannedJob{},
		deleted: map[types.UID]time.Time{}, lastAction: map[types.UID]time.Time{}, refusedBy: map[string]int{}}
}

// run creates the plan's Jobs at their offsets from start.
func (u *user) run(ctx context.Context, start time.Time, plan []plannedJob) {
	for _, p := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(p.Offset))):
		}
		u.actions.Add(1)
		go func() {
			defer u.actions.Done()
			u.send(ctx, p)
		}()
	}
}

// send creates one Job (retrying while it is refused) and carries out its
// user's actions.
func (u *user) send(ctx context.Context, p plannedJob) {
	job := jobFor(p, u.namespace, u.queue)
	u.forNodes(&job.Spec.Template)
	var created *batchv1.Job
	// Tried again for as long as faults may refuse it (none holds longer).
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err := retryOnAPIErrors(ctx, func(ctx context.Context) error {
		var err error
		created, err = u.client.BatchV1().Jobs(u.namespace).Create(ctx, job, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// An earlier try went through and its answer was lost.
			created, err = u.client.BatchV1().Jobs(u.namespace).Get(ctx, job.Name, metav1.GetOptions{})
		}
		if err != nil {
			u.mu.Lock()
			u.refused++
			u.refusedBy[refusalKind(err)]++
			u.mu.Unlock()
		}
		return err
	})
	if err != nil {
		return
	}
	u.mu.Lock()
	u.created[created.UID] = p
	u.mu.Unlock()

	act := func(after time.Duration, change func(*batchv1.Job)) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(after):
		}
		err := retryOnAPIErrors(ctx, func(ctx context.Context) error {
			now, err := u.client.BatchV1().Jobs(u.namespace).Get(ctx, job.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && now.UID != created.UID) {
				return nil // gone (its TTL, say): nothing to act on
			}
			if err != nil {
				return err
			}
			change(now)
			_, err = u.client.BatchV1().Jobs(u.namespace).Update(ctx, now, metav1.UpdateOptions{})
			return err
		})
		u.mu.Lock()
		u.lastAction[created.UID] = time.Now()
		u.mu.Unlock()
		return err == nil
	}
	switch p.Shape {
	case ShapeParallelismChange:
		act(p.Act, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) })
	case ShapeSuspendResume:
		if act(p.Act, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }) {
			act(p.Act2, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) })
		}
	case ShapeDeletedRunning:
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.Act):
		}
		u.mu.Lock()
		u.deleted[created.UID] = time.Now()
		u.mu.Unlock()
		_ = retryOnAPIErrors(ctx, func(ctx context.Context) error {
			err := u.client.BatchV1().Jobs(u.namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
				PropagationPolicy: ptr.To(metav1.DeletePropagationBackground), Preconditions: metav1.NewUIDPreconditions(string(created.UID))})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return err
		})
	}
}

// refusalKind sorts refused creates for the report.
func refusalKind(err error) string {
	switch {
	case apierrors.IsInternalError(err):
		return "internal error (a webhook unreachable, say)"
	case apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return "unavailable"
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		return "refused: " + string(apierrors.ReasonForError(err))
	case apierrors.ReasonForError(err) == metav1.StatusReasonUnknown:
		return "no answer (the API server down)"
	}
	return string(apierrors.ReasonForError(err))
}
