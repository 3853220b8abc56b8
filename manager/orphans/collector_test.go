package orphans

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/jobstate/jobstatetest"
	"github.com/jobferry/jobferry/manager/workers/workerstest"
)

// gcMirror is a mirror named name of manager Job uid, attempt attempt, made
// by installation manager ("" : unlabelled, as before installations were).
func gcMirror(name, uid string, attempt int, manager string) batchv1.Job {
	labels := map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.DispatchAttemptLabel: strconv.Itoa(attempt)}
	if uid != "" {
		labels[v1alpha1.OriginUIDLabel] = uid
	}
	if manager != "" {
		labels[v1alpha1.ManagerIDLabel] = manager
	}
	return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("mirror-" + name), Labels: labels}}
}

// gcJob is manager Job uid at attempt attempt, named job-<uid> (its
// mirrors are, too), its state sealed under testKey.
func gcJob(uid string, attempt int) batchv1.Job {
	job := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-" + uid, UID: types.UID(uid),
		Annotations: map[string]string{v1alpha1.DispatchAttemptAnnotation: strconv.Itoa(attempt)}}}
	return *jobstate.Sealed(&job, testKey)
}

// testKey seals the test Jobs' state (jobstatetest.Key hands it out).
var testKey = jobstate.Key{Secret: []byte("test key"), Since: time.Unix(0, 0)}

func TestOrphans(t *testing.T) {
	deleting := func(j batchv1.Job) batchv1.Job {
		j.DeletionTimestamp = &metav1.Time{}
		j.Finalizers = []string{"test"}
		return j
	}
	cases := map[string]struct {
		mirrors, jobs []batchv1.Job
		shared        bool
		want          []string
	}{
		"the mirror of a live Job is kept": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "m1")}, jobs: []batchv1.Job{gcJob("u1", 1)},
		},
		"the mirror of a gone Job goes": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "m1")}, want: []string{"job-u1"},
		},
		"the mirror of a Job being deleted goes": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "m1")}, jobs: []batchv1.Job{deleting(gcJob("u1", 1))}, want: []string{"job-u1"},
		},
		"an attempt a later one replaced goes": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "m1")}, jobs: []batchv1.Job{gcJob("u1", 2)}, want: []string{"job-u1"},
		},
		"an attempt later than the cached Job's is kept: the cache lags": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 3, "m1")}, jobs: []batchv1.Job{gcJob("u1", 2)},
		},
		"a mirror being deleted is left to finish": {
			mirrors: []batchv1.Job{deleting(gcMirror("job-u1", "u1", 1, "m1"))},
		},
		"a Job without an origin UID that says it is this installation's goes": {
			mirrors: []batchv1.Job{gcMirror("a", "", 1, "m1")}, want: []string{"a"},
		},
		"a Job without an origin UID that does not say whose it is is not collected": {
			mirrors: []batchv1.Job{gcMirror("a", "", 1, "")},
		},
		"a Job with the labels of a live Job's mirror, not at its name, goes": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "m1"), gcMirror("elsewhere", "u1", 1, "m1"), gcMirror("later", "u1", 5, "m1")},
			jobs:    []batchv1.Job{gcJob("u1", 1)}, want: []string{"elsewhere", "later"},
		},
		"another installation's mirror is never collected": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "m2")},
		},
		"a mirror that does not say whose it is goes while the origin is this installation's alone": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "")}, want: []string{"job-u1"},
		},
		"... and is kept once another installation shares the origin there": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "")}, shared: true,
		},
		"each mirror on its own": {
			mirrors: []batchv1.Job{gcMirror("job-u1", "u1", 1, "m1"), gcMirror("job-u2", "u2", 1, "m1"), gcMirror("job-u3", "u3", 1, "m2")},
			jobs:    []batchv1.Job{gcJob("u1", 1)}, want: []string{"job-u2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			metas := make([]*metav1.ObjectMeta, len(tc.mirrors))
			for i := range tc.mirrors {
				metas[i] = &tc.mirrors[i].ObjectMeta
			}
			for _, m := range orphans(metas, liveOf(tc.jobs...), "m1", tc.shared) {
				got = append(got, m.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("orphans (-want +got):\n%s", diff)
			}
		})
	}
}

// liveOf is the collector's memory after the cache delivered jobs.
func liveOf(jobs ...batchv1.Job) liveAttempt {
	live := newLiveJobs()
	for i := range jobs {
		live.Set(&jobs[i])
	}
	return live.Get
}

// The memory follows each Job: its attempt while live, nothing once it is
// being deleted or gone (a tombstone included).
func TestLiveJobsFollowTheJobsEvents(t *testing.T) {
	live := newLiveJobs()
	h := live.Handler()
	j1, j2 := gcJob("u1", 1), gcJob("u2", 1)
	h.OnAdd(&j1, true)
	h.OnAdd(&j2, true)
	again := gcJob("u1", 2)
	h.OnUpdate(&j1, &again)
	deleting := gcJob("u2", 1)
	deleting.DeletionTimestamp = &metav1.Time{}
	h.OnUpdate(&j2, &deleting)
	if a, ok := live.Get("u1"); !ok || a.attempt != 2 || a.key.Name != "job-u1" {
		t.Errorf("u1: %+v, live %t; want job-u1 at attempt 2, live", a, ok)
	}
	if _, ok := live.Get("u2"); ok {
		t.Error("u2, being deleted, is still live")
	}
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "team-a/job-u1", Obj: &again})
	if _, ok := live.Get("u1"); ok || live.Len() != 0 {
		t.Errorf("after the deletes the memory keeps %d Jobs", live.Len())
	}
}

// fakeJobInformer delivers the Jobs it holds to a handler as it registers,
// as an informer does, and says the registration synced once told to.
type fakeJobInformer struct {
	mu       sync.Mutex
	jobs     []batchv1.Job
	handlers []toolscache.ResourceEventHandler
	synced   bool
	// polls counts the HasSynced calls answered false.
	polls int
}

func (f *fakeJobInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.jobs {
		h.OnAdd(&f.jobs[i], true)
	}
	f.handlers = append(f.handlers, h)
	return fakeRegistration{f}, nil
}

func (f *fakeJobInformer) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error {
	return nil
}

func (f *fakeJobInformer) setSynced() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = true
}

func (f *fakeJobInformer) notSyncedPolls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

type fakeRegistration struct{ f *fakeJobInformer }

func (r fakeRegistration) HasSynced() bool {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if !r.f.synced {
		r.f.polls++
	}
	return r.f.synced
}

func (r fakeRegistration) HasSyncedChecker() toolscache.DoneChecker { return nil }

// The collector deletes a gone Job's mirror on a connected worker, keeps
// the live one's — also when only the cache has the Job yet, the memory of
// the Jobs lagging — and leaves a disconnected worker alone.
func TestOrphanCollectorCollects(t *testing.T) {
	ctx := context.Background()
	live, gone, other := gcMirror("job-u1", "u1", 1, "m1"), gcMirror("gone", "u2", 1, "m1"), gcMirror("x", "u3", 1, "m1")
	fresh, renamed := gcMirror("job-u4", "u4", 1, "m1"), gcMirror("job-u5", "u5", 1, "m1")
	up, down := workerstest.NewConn("jobferry", &live, &gone, &fresh, &renamed), workerstest.NewConn("jobferry", &other)
	down.Down = true
	// The cache has u4 (not yet in the memory) and a Job named as u5's
	// mirror but with another UID (deleted and made again).
	cached := gcJob("u4", 1)
	sameName := gcJob("u5", 1)
	sameName.UID = "u5-again"
	manager := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(&cached, &sameName).Build()
	gc := &Collector{Client: manager, Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": up, "w2": down}), ManagerID: "m1", Keys: jobstatetest.Key(testKey)}
	gc.collectAll(ctx, liveOf(gcJob("u1", 1)))
	names := func(c *workerstest.Conn) []string {
		var list batchv1.JobList
		if err := c.API.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range list.Items {
			out = append(out, j.Name)
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff([]string{"job-u1", "job-u4"}, names(up)); diff != "" {
		t.Errorf("mirrors left on the connected worker (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x"}, names(down)); diff != "" {
		t.Errorf("mirrors left on the disconnected worker (-want +got):\n%s", diff)
	}
	if err := up.API.Get(ctx, client.ObjectKeyFromObject(&gone), &batchv1.Job{}); err == nil {
		t.Error("the gone Job's mirror is still there")
	}
}

// A mirror the Job's recorded attempt says was replaced is deleted only
// when jobferry sealed that attempt: a raised attempt someone else wrote
// (the seal no longer matching) leaves the running mirror alone.
func TestOrphanCollectorActsOnlyOnSealedAttempts(t *testing.T) {
	ctx := context.Background()
	replaced, running := gcMirror("job-u1", "u1", 1, "m1"), gcMirror("job-u2", "u2", 1, "m1")
	raised := gcJob("u2", 1)
	raised.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2" // the seal is for attempt 1
	cached := []client.Object{ptr.To(gcJob("u1", 2)), &raised}
	up := workerstest.NewConn("jobferry", &replaced, &running)
	manager := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(cached...).Build()
	gc := &Collector{Client: manager, Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": up}), ManagerID: "m1", Keys: jobstatetest.Key(testKey)}
	gc.collectAll(ctx, liveOf(gcJob("u1", 2), raised))
	if err := up.API.Get(ctx, client.ObjectKeyFromObject(&replaced), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the mirror of attempt 1, replaced by a sealed attempt 2: %v, want it deleted", err)
	}
	if err := up.API.Get(ctx, client.ObjectKeyFromObject(&running), &batchv1.Job{}); err != nil {
		t.Errorf("the mirror of a Job whose attempt someone else raised: %v, want it kept", err)
	}
}

// Started, the collector waits until it has seen every manager Job (a Job
// not yet delivered would pass for a gone one), then looks at every
// worker, then at each worker the pool says (re)connected, on the
// collector's own context.
func TestOrphanCollectorCollectsReconnectedWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kept, first, second := gcMirror("job-u0", "u0", 1, "m1"), gcMirror("first", "u1", 1, "m1"), gcMirror("second", "u2", 1, "m1")
	w1 := workerstest.NewConn("jobferry", &kept, &first)
	connected := make(chan string, 1)
	jobs := &fakeJobInformer{jobs: []batchv1.Job{gcJob("u0", 1)}}
	manager := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).Build()
	gc := &Collector{Jobs: jobs, Client: manager, Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": w1}), ManagerID: "m1", Keys: jobstatetest.Key(testKey), Connected: connected}
	done := make(chan error, 1)
	go func() { done <- gc.Start(ctx) }()
	gone := func(m batchv1.Job) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			err := w1.API.Get(ctx, client.ObjectKeyFromObject(&m), &batchv1.Job{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
	}
	// Asked twice whether it has seen every Job, and told no: nothing is
	// collected meanwhile.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return jobs.notSyncedPolls() >= 2, nil
	}); err != nil {
		t.Fatalf("the collector never asked whether it had seen every Job: %v", err)
	}
	if done, err := gone(first)(ctx); err != nil || done {
		t.Fatalf("an orphan was collected before the collector had seen every Job (gone %t, %v)", done, err)
	}
	jobs.setSynced()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, gone(first)); err != nil {
		t.Fatalf("the orphan there at start was not collected: %v", err)
	}
	// No Interval: only a reconnect brings the next collection.
	if err := w1.API.Create(ctx, &second); err != nil {
		t.Fatal(err)
	}
	connected <- "w1"
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, gone(second)); err != nil {
		t.Fatalf("the orphan on the reconnected worker was not collected: %v", err)
	}
	if gone, err := gone(kept)(ctx); err != nil || gone {
		t.Errorf("the live Job's mirror was collected (%v)", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v when its context ended", err)
	}
}
