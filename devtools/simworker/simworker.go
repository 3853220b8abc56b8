package simworker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/worker"
)

// Target is one simulated worker: an API server and the nodes it pretends
// to have.
type Target struct {
	Name   string
	Config *rest.Config
	Pools  []localcluster.Pool
}

// Options say how the simulated workers behave.
type Options struct {
	Timing Timing
	// Publish is how often a changed capacity summary is written (the
	// worker binary's interval); Heartbeat how often an unchanged one is.
	Publish, Heartbeat time.Duration
	// Concurrency is how many status writes one worker has in flight.
	Concurrency int
	// Release ends the hold of Timing.Hold for the Jobs there are when it
	// receives: every running Job that has run its time completes then,
	// or, with ReleaseRate, that many Jobs a second over all workers,
	// oldest name first on each (completions at a steady rate while the
	// rest are still tracked). Later Jobs are held until the next receive.
	// With ReleaseSample, the first receive releases only that many (at
	// ReleaseRate) and the next the rest at once.
	Release       <-chan struct{}
	ReleaseRate   float64
	ReleaseSample int
	Log           io.Writer
}

// DefaultOptions: pods run a second after their Job is created, for a
// second; summaries as the worker binary writes them.
var DefaultOptions = Options{Timing: Timing{Start: time.Second, RunFor: time.Second}, Publish: time.Second, Heartbeat: 10 * time.Second, Concurrency: 8}

// Run simulates every target until ctx ends.
func Run(ctx context.Context, targets []Target, opts Options) error {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	g, ctx := errgroup.WithContext(ctx)
	// One releaser for all workers: ReleaseRate is the whole rate, the
	// sample the whole sample.
	releases := newReleaser(opts.ReleaseRate, opts.ReleaseSample)
	// Each release reaches every worker.
	var workerReleases []chan struct{}
	for range targets {
		workerReleases = append(workerReleases, make(chan struct{}, 1))
	}
	if opts.Release != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-opts.Release:
					releases.begin()
					for _, r := range workerReleases {
						select {
						case r <- struct{}{}:
						default: // a release is pending there already
						}
					}
				}
			}
		}()
	}
	for i, t := range targets {
		g.Go(func() error {
			if err := simulate(ctx, t, opts, workerReleases[i], releases); err != nil && ctx.Err() == nil {
				return fmt.Errorf("simulated worker %s: %w", t.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// worker is one simulated worker while it runs.
type simulated struct {
	Target
	opts Options
	// released holds the Jobs Timing.Hold no longer holds.
	released releasedJobs
	kube     kubernetes.Interface
	jobs     toolscache.Indexer
	queue    workqueue.TypedDelayingInterface[types.NamespacedName]
	// pools are the nodes' pools with nothing requested; usage what the
	// running Jobs request of them.
	pools []v1alpha1.NodePool
	usage *usage
}

func simulate(ctx context.Context, t Target, opts Options, release <-chan struct{}, releases *releaser) error {
	cfg := rest.CopyConfig(t.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trim))
	informer := factory.Batch().V1().Jobs().Informer()
	s := &simulated{Target: t, opts: opts, kube: kube, jobs: informer.GetIndexer(),
		queue: workqueue.NewTypedDelayingQueue[types.NamespacedName]()}
	var nodes []corev1.Node
	for _, n := range localcluster.NodesFor(t.Pools, v1alpha1.DefaultPoolLabel) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		nodes = append(nodes, *n)
	}
	pools, poolOfNode := worker.NodePools(nodes, v1alpha1.DefaultPoolLabel)
	s.pools, s.usage = pools, newUsage(nodes, poolOfNode)
	changed := func(obj any) {
		if job, ok := obj.(*batchv1.Job); ok {
			s.usage.set(job)
			s.queue.Add(types.NamespacedName{Namespace: job.Namespace, Name: job.Name})
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if job, ok := obj.(*batchv1.Job); ok {
				s.usage.remove(job.UID)
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return ctx.Err()
	}
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	if opts.Timing.Hold {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-release:
					s.release(ctx, releases)
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for range max(opts.Concurrency, 1) {
		wg.Go(func() {
			for s.step(ctx) {
			}
		})
	}
	err = s.publish(ctx)
	wg.Wait()
	return err
}

// release ends the hold of the worker's Jobs not released yet, oldest
// name first, as fast and as many as releases allows.
func (s *simulated) release(ctx context.Context, releases *releaser) {
	keys := s.jobs.ListKeys()
	slices.Sort(keys)
	for _, k := range keys {
		ns, name, err := toolscache.SplitMetaNamespaceKey(k)
		if err != nil {
			continue
		}
		key := types.NamespacedName{Namespace: ns, Name: name}
		if s.released.has(key) {
			continue
		}
		if !releases.take(ctx) {
			return
		}
		s.released.add(key)
		s.queue.Add(key)
	}
}

// releasedJobs are the Jobs a worker no longer holds running.
type releasedJobs struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]bool
}

func (r *releasedJobs) add(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = map[types.NamespacedName]bool{}
	}
	r.jobs[key] = true
}

func (r *releasedJobs) has(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[key]
}

// trim keeps of a Job what the simulator reads: its identity, the spec
// fields that shape its run, its pod template's labels, annotations and
// requests, and its status.
func trim(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	out := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name, UID: job.UID, ResourceVersion: job.ResourceVersion,
			CreationTimestamp: job.CreationTimestamp, DeletionTimestamp: job.DeletionTimestamp},
		Spec:   batchv1.JobSpec{Parallelism: job.Spec.Parallelism, Completions: job.Spec.Completions, Suspend: job.Spec.Suspend},
		Status: job.Status,
	}
	out.Spec.Template.Labels, out.Spec.Template.Annotations = job.Spec.Template.Labels, job.Spec.Template.Annotations
	for _, c := range job.Spec.Template.Spec.Containers {
		out.Spec.Template.Spec.Containers = append(out.Spec.Template.Spec.Containers, corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}})
	}
	return out, nil
}

// step takes one Job off the queue and moves it on when due; false once
// the queue is shut down.
func (s *simulated) step(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	obj, exists, err := s.jobs.GetByKey(key.String())
	if err != nil || !exists {
		return true
	}
	job := obj.(*batchv1.Job)
	timing := s.opts.Timing
	if timing.Hold && s.released.has(key) {
		// Released: a Job that ran its time while held completes now.
		timing.Hold = false
	}
	tr, ok := next(job, timing)
	if !ok {
		return true
	}
	if wait := time.Until(tr.at); wait > 0 {
		s.queue.AddAfter(key, wait)
		return true
	}
	// The whole status, replaced: a field the transition drops (a
	// suspended Job's startTime) goes.
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/status", "value": tr.status}})
	if err != nil {
		fmt.Fprintf(s.opts.Log, "%s: %s: %v\n", s.Name, key, err)
		return true
	}
	if _, err := s.kube.BatchV1().Jobs(key.Namespace).Patch(ctx, key.Name, types.JSONPatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		// The API server refused a status upstream would write: a bug of
		// the simulator, said loudly; tried again in a second.
		fmt.Fprintf(s.opts.Log, "%s: writing the status of Job %s: %v\n", s.Name, key, err)
		s.queue.AddAfter(key, time.Second)
	}
	return true
}

// publish writes the worker's ClusterCapacity from its nodes and what its
// running Jobs' pods request, as the worker binary does, until ctx ends.
func (s *simulated) publish(ctx context.Context) error {
	scheme := v1alpha1.NewScheme()
	c, err := client.New(s.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	cc := &v1alpha1.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClusterCapacityName}, Spec: v1alpha1.ClusterCapacitySpec{PoolLabel: v1alpha1.DefaultPoolLabel}}
	if err := c.Create(ctx, cc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating its ClusterCapacity: %w", err)
	}
	tick := time.NewTicker(s.opts.Publish)
	defer tick.Stop()
	var last []v1alpha1.NodePool
	var lastWrite time.Time
	for {
		pools := worker.WithRequested(s.pools, s.usage.snapshot())
		if !equality.Semantic.DeepEqual(pools, last) || time.Since(lastWrite) >= s.opts.Heartbeat {
			// A worker's API server may be away a while (a bench
			// loses one on purpose): said, and tried again next tick.
			if err := c.Get(ctx, client.ObjectKeyFromObject(cc), cc); err != nil {
				if ctx.Err() == nil {
					fmt.Fprintf(s.opts.Log, "%s: reading its ClusterCapacity: %v\n", s.Name, err)
				}
			} else {
				cc.Status = v1alpha1.ClusterCapacityStatus{Pools: pools, HeartbeatTime: &metav1.Time{Time: time.Now()}}
				if err := c.Status().Update(ctx, cc); err != nil && ctx.Err() == nil {
					fmt.Fprintf(s.opts.Log, "%s: writing its ClusterCapacity: %v\n", s.Name, err)
				} else {
					last, lastWrite = pools, time.Now()
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
