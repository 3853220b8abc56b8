package jobs

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// assumeCache remembers what placed Jobs request until the worker's capacity
// summary shows their pods, like kube-scheduler's assumed pods: without it a
// burst of Jobs would all go to the worker that looked freest before the
// burst. An assumption ends when the Job is gone, finished or deleted, or
// once a summary arrives at least settle after all of the Job's running pods
// were seen ready (the publisher writes within its interval of a change).
type assumeCache struct {
	clock  clock.Clock
	settle time.Duration

	mu    sync.Mutex
	byJob map[types.UID]*assumption
}

type assumption struct {
	// job is the Job's key, by which an assumption ends once the Job is
	// gone (all a reconcile of a deleted Job knows).
	job          types.NamespacedName
	worker, pool string
	request      corev1.ResourceList
	// runningSince is when all running pods of the mirror were first seen
	// ready; zero until then.
	runningSince time.Time
}

func newAssumeCache(c clock.Clock, settle time.Duration) *assumeCache {
	return &assumeCache{clock: c, settle: settle, byJob: map[types.UID]*assumption{}}
}

func (a *assumeCache) assume(uid types.UID, job types.NamespacedName, worker, pool string, request corev1.ResourceList) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byJob[uid] = &assumption{job: job, worker: worker, pool: pool, request: request}
}

// forgetJob ends the assumption of the Job with this key, whatever its UID.
func (a *assumeCache) forgetJob(job types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for uid, as := range a.byJob {
		if as.job == job {
			delete(a.byJob, uid)
		}
	}
}

func (a *assumeCache) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byJob, uid)
}

// running notes that the Job's pods are scheduled and ready on the worker.
func (a *assumeCache) running(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if as, ok := a.byJob[uid]; ok && as.runningSince.IsZero() {
		as.runningSince = a.clock.Now()
	}
}

// capacitySeen ends the assumptions a fresh summary of worker now covers.
func (a *assumeCache) capacitySeen(worker string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	for uid, as := range a.byJob {
		if as.worker == worker && !as.runningSince.IsZero() && now.Sub(as.runningSince) >= a.settle {
			delete(a.byJob, uid)
		}
	}
}

// assumed sums, per pool, what Jobs placed on worker are assumed to request.
func (a *assumeCache) assumed(worker string) map[string]corev1.ResourceList {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]corev1.ResourceList{}
	for _, as := range a.byJob {
		if as.worker == worker {
			out = addRequest(out, as.pool, as.request)
		}
	}
	return out
}

// addRequest adds request to pool's sum in assumed (created when nil).
func addRequest(assumed map[string]corev1.ResourceList, pool string, request corev1.ResourceList) map[string]corev1.ResourceList {
	if assumed == nil {
		assumed = map[string]corev1.ResourceList{}
	}
	sum := assumed[pool]
	if sum == nil {
		sum = corev1.ResourceList{}
		assumed[pool] = sum
	}
	for name, q := range request {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
	return assumed
}
