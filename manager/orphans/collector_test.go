package orphans

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
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
	return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: labels}}
}

// gcJob is manager Job uid at attempt attempt.
func gcJob(uid string, attempt int) batchv1.Job {
	return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-" + uid, UID: types.UID(uid),
		Annotations: map[string]string{v1alpha1.DispatchAttemptAnnotation: strconv.Itoa(attempt)}}}
}

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
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "m1")}, jobs: []batchv1.Job{gcJob("u1", 1)},
		},
		"the mirror of a gone Job goes": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "m1")}, want: []string{"a"},
		},
		"the mirror of a Job being deleted goes": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "m1")}, jobs: []batchv1.Job{deleting(gcJob("u1", 1))}, want: []string{"a"},
		},
		"an attempt a later one replaced goes": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "m1")}, jobs: []batchv1.Job{gcJob("u1", 2)}, want: []string{"a"},
		},
		"an attempt later than the cached Job's is kept: the cache lags": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 3, "m1")}, jobs: []batchv1.Job{gcJob("u1", 2)},
		},
		"a mirror being deleted is left to finish": {
			mirrors: []batchv1.Job{deleting(gcMirror("a", "u1", 1, "m1"))},
		},
		"a Job without an origin UID is not a mirror to collect": {
			mirrors: []batchv1.Job{gcMirror("a", "", 1, "m1")},
		},
		"another installation's mirror is never collected": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "m2")},
		},
		"a mirror that does not say whose it is goes while the origin is this installation's alone": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "")}, want: []string{"a"},
		},
		"... and is kept once another installation shares the origin there": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "")}, shared: true,
		},
		"each mirror on its own": {
			mirrors: []batchv1.Job{gcMirror("a", "u1", 1, "m1"), gcMirror("b", "u2", 1, "m1"), gcMirror("c", "u3", 1, "m2")},
			jobs:    []batchv1.Job{gcJob("u1", 1)}, want: []string{"b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, m := range orphans(tc.mirrors, liveAttempts(tc.jobs), "m1", tc.shared) {
				got = append(got, m.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("orphans (-want +got):\n%s", diff)
			}
		})
	}
}

// The collector deletes a gone Job's mirror on a connected worker, keeps
// the live one's, and leaves a disconnected worker alone.
func TestOrphanCollectorCollects(t *testing.T) {
	ctx := context.Background()
	live, gone, other := gcMirror("live", "u1", 1, "m1"), gcMirror("gone", "u2", 1, "m1"), gcMirror("x", "u3", 1, "m1")
	job := gcJob("u1", 1)
	manager := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(&job).Build()
	up, down := workerstest.NewConn("jobferry", &live, &gone), workerstest.NewConn("jobferry", &other)
	down.Down = true
	gc := &Collector{Client: manager, Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": up, "w2": down}), ManagerID: "m1"}
	gc.collectAll(ctx)
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
	if diff := cmp.Diff([]string{"live"}, names(up)); diff != "" {
		t.Errorf("mirrors left on the connected worker (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x"}, names(down)); diff != "" {
		t.Errorf("mirrors left on the disconnected worker (-want +got):\n%s", diff)
	}
	if err := up.API.Get(ctx, client.ObjectKeyFromObject(&gone), &batchv1.Job{}); err == nil {
		t.Error("the gone Job's mirror is still there")
	}
}

// Started, the collector looks at every worker, then at each worker the
// pool says (re)connected, on the collector's own context.
func TestOrphanCollectorCollectsReconnectedWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, second := gcMirror("first", "u1", 1, "m1"), gcMirror("second", "u2", 1, "m1")
	manager := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).Build()
	w1 := workerstest.NewConn("jobferry", &first)
	connected := make(chan string, 1)
	gc := &Collector{Client: manager, Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": w1}), ManagerID: "m1", Connected: connected}
	done := make(chan error, 1)
	go func() { done <- gc.Start(ctx) }()
	gone := func(m batchv1.Job) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			err := w1.API.Get(ctx, client.ObjectKeyFromObject(&m), &batchv1.Job{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
	}
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
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v when its context ended", err)
	}
}
