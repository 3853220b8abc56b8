//go:build integration

package workers

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
)

// seenMirrors records what a connection tells of the mirrors it sees.
type seenMirrors struct {
	mu     sync.Mutex
	listed map[string]bool // by namespace/name: the latest change came from the first list
	active map[string]int32
}

func (s *seenMirrors) changed(_ string, job *batchv1.Job, listed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := job.Namespace + "/" + job.Name
	s.listed[key], s.active[key] = listed, job.Status.Active
}

func (s *seenMirrors) get(key string) (listed, seen bool, active int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	listed, seen = s.listed[key]
	return listed, seen, s.active[key]
}

// startWorkerAPI starts an API server with jobferry's CRDs, standing for a
// worker, and returns its config, the scheme and a client of it.
func startWorkerAPI(t *testing.T) (*rest.Config, *runtime.Scheme, client.Client) {
	t.Helper()
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "api", "v1alpha1", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg := testenv.Start(t, env)
	scheme := v1alpha1.NewScheme()
	api, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, scheme, api
}

// On a real API server: a connection's mirror cache holds the Jobs with
// its origin label in the namespaces it may use, as cachedMirror keeps
// them; Mirror gives a copy of the caller's own, Mirrors the namespace's;
// the handlers hear of the first list's Jobs as listed and of later
// changes as changes.
func TestIntegrationMirrorCache(t *testing.T) {
	cfg, scheme, api := startWorkerAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, ns := range []string{"team-a", "team-b"} {
		if err := api.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	job := func(ns, name, origin string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
				v1alpha1.OriginLabel: origin, v1alpha1.OriginUIDLabel: "uid-" + name, "team": "a"}},
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeSelector: map[string]string{"pool": "general"},
					Containers: []corev1.Container{{Name: "work", Image: "example/work:1",
						Env: []corev1.EnvVar{{Name: "PAYLOAD", Value: strings.Repeat("p", 4096)}}}}}}},
		}
	}
	ours, foreign, oursB := job("team-a", "ours", "here"), job("team-a", "foreign", "elsewhere"), job("team-b", "ours-b", "here")
	for _, j := range []*batchv1.Job{ours, foreign, oursB} {
		if err := api.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}

	connect := func(namespaces []string) (*Connection, *seenMirrors) {
		seen := &seenMirrors{listed: map[string]bool{}, active: map[string]int32{}}
		return syncedConnection(ctx, t, cfg, scheme, "", namespaces, seen.changed), seen
	}
	all, seenAll := connect(nil)
	limited, _ := connect([]string{"team-a"})

	m, err := all.Mirror(ctx, client.ObjectKeyFromObject(ours))
	if err != nil || m == nil {
		t.Fatalf("Mirror(team-a/ours) = %v, %v; want the mirror", m, err)
	}
	if m.UID != ours.UID || m.Labels[v1alpha1.OriginUIDLabel] != "uid-ours" || m.Labels["team"] != "" ||
		len(m.Spec.Template.Spec.Containers) != 0 || m.Spec.Template.Spec.NodeSelector["pool"] != "general" ||
		m.Spec.Template.Labels["app"] != "ours" || *m.Spec.Parallelism != 1 || m.Kind != "Job" {
		t.Errorf("the cached mirror is not what the manager reads of it: %+v", m)
	}
	// The caller's own: changing it leaves the cache as it was.
	m.Labels[v1alpha1.OriginUIDLabel], *m.Spec.Parallelism = "changed", 5
	again, err := all.Mirror(ctx, client.ObjectKeyFromObject(ours))
	if err != nil || again.Labels[v1alpha1.OriginUIDLabel] != "uid-ours" || *again.Spec.Parallelism != 1 {
		t.Errorf("a change to a Mirror's result reached the cache: %+v, %v", again, err)
	}
	for _, tc := range []struct {
		conn *Connection
		key  types.NamespacedName
		want bool
	}{
		{all, client.ObjectKeyFromObject(foreign), false},
		{all, client.ObjectKeyFromObject(oursB), true},
		{limited, client.ObjectKeyFromObject(ours), true},
		{limited, client.ObjectKeyFromObject(oursB), false},
		{all, types.NamespacedName{Namespace: "team-a", Name: "missing"}, false},
	} {
		got, err := tc.conn.Mirror(ctx, tc.key)
		if err != nil || (got != nil) != tc.want {
			t.Errorf("Mirror(%s) on the connection to namespaces %v = %v, %v; want found %v", tc.key, tc.conn.namespaces, got, err, tc.want)
		}
	}
	names := func(conn *Connection, ns string) []string {
		list, err := conn.Mirrors(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range list {
			out = append(out, m.Namespace+"/"+m.Name)
		}
		return out
	}
	for _, tc := range []struct {
		conn *Connection
		ns   string
		want int
	}{{all, "", 2}, {all, "team-b", 1}, {limited, "", 1}, {limited, "team-a", 1}, {limited, "team-b", 0}} {
		if got := names(tc.conn, tc.ns); len(got) != tc.want {
			t.Errorf("Mirrors(%q) on the connection to namespaces %v = %v; want %d", tc.ns, tc.conn.namespaces, got, tc.want)
		}
	}

	if listed, seen, _ := seenAll.get("team-a/ours"); !seen || !listed {
		t.Errorf("a mirror there before the connection was told as seen %v, listed %v; want seen in the first list", seen, listed)
	}
	if _, seen, _ := seenAll.get("team-a/foreign"); seen {
		t.Error("a Job of another origin was told as a mirror")
	}
	ours.Status = batchv1.JobStatus{Active: 1, StartTime: &metav1.Time{Time: time.Now()}}
	if err := api.Status().Update(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		listed, _, active := seenAll.get("team-a/ours")
		m, err := all.Mirror(ctx, client.ObjectKeyFromObject(ours))
		return !listed && active == 1 && m != nil && m.Status.Active == 1, err
	}); err != nil {
		t.Errorf("a status change of a mirror was not told as a change, nor cached: %v", err)
	}
	// Background: envtest runs no garbage collector to take an orphan
	// finalizer away.
	if err := api.Delete(ctx, oursB, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		m, err := all.Mirror(ctx, client.ObjectKeyFromObject(oursB))
		return m == nil, err
	}); err != nil {
		t.Errorf("a deleted mirror stayed in the cache: %v", err)
	}
}

// On a real API server: of the Jobs with its origin label that another
// installation made (or none says which), a connection's mirror cache
// keeps at most MaxForeignJobsPerNamespace a namespace, from its first
// list and from its watch, and says how many it left out; every one of
// this manager's is kept, a mirror relabelled foreign over the cap leaves
// the cache, and a foreign Job deleted frees a place.
func TestIntegrationMirrorCacheCapsForeignJobs(t *testing.T) {
	cfg, scheme, api := startWorkerAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "team-a"
	if err := api.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	create := func(name, manager string) *batchv1.Job {
		t.Helper()
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.OriginLabel: "here", v1alpha1.OriginUIDLabel: "uid-" + name}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "example/work:1"}}}}},
		}
		if manager != "" {
			j.Labels[v1alpha1.ManagerIDLabel] = manager
		}
		if err := api.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	// Before the connection: 3 of this manager's, the cap's worth and 6
	// more of another's, 4 that say no manager.
	var ours []*batchv1.Job
	for i := range 3 {
		ours = append(ours, create(fmt.Sprintf("ours-%d", i), "me"))
	}
	for i := range MaxForeignJobsPerNamespace + 6 {
		create(fmt.Sprintf("other-%03d", i), "someone-else")
	}
	for i := range 4 {
		create(fmt.Sprintf("unlabelled-%d", i), "")
	}
	conn := syncedConnection(ctx, t, cfg, scheme, "me", nil, nil)
	cached := func() (mine, foreign []string) {
		t.Helper()
		metas, err := conn.MirrorMetas(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metas {
			if m.Labels[v1alpha1.ManagerIDLabel] == "me" {
				mine = append(mine, m.Name)
			} else {
				foreign = append(foreign, m.Name)
			}
		}
		return mine, foreign
	}
	mine, foreign := cached()
	if len(mine) != 3 || len(foreign) != MaxForeignJobsPerNamespace {
		t.Fatalf("after the first list the cache holds %d of this manager's Jobs and %d foreign ones, want 3 and %d", len(mine), len(foreign), MaxForeignJobsPerNamespace)
	}
	if n, latest := conn.foreignNotCached.take(); n != 10 || !strings.HasPrefix(latest, "Job "+ns+"/") {
		t.Errorf("told %d Jobs left out (the latest %q), want 10", n, latest)
	}

	// From the watch: more foreign Jobs are left out; this manager's are
	// kept.
	create("other-late", "someone-else")
	late := create("ours-late", "me")
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		m, err := conn.Mirror(ctx, client.ObjectKeyFromObject(late))
		return m != nil, err
	}); err != nil {
		t.Fatalf("this manager's Job created after the list was not cached: %v", err)
	}
	if m, _ := conn.Mirror(ctx, types.NamespacedName{Namespace: ns, Name: "other-late"}); m != nil {
		t.Error("a foreign Job over the cap, created after the list, was cached")
	}
	// A mirror relabelled as another's, over the cap: out of the cache, not
	// left there as it was.
	relabelled := ours[0]
	relabelled.Labels[v1alpha1.ManagerIDLabel] = "someone-else"
	if err := api.Update(ctx, relabelled); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		m, err := conn.Mirror(ctx, client.ObjectKeyFromObject(relabelled))
		return m == nil, err
	}); err != nil {
		t.Errorf("a Job relabelled foreign over the cap stayed in the cache: %v", err)
	}
	// A foreign Job deleted frees a place for the next one.
	if err := api.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: foreign[0]}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	next := create("other-next", "someone-else")
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		m, err := conn.Mirror(ctx, client.ObjectKeyFromObject(next))
		return m != nil, err
	}); err != nil {
		t.Errorf("a foreign Job created after one was deleted was not cached: %v", err)
	}
	if mine, foreign := cached(); len(mine) != 3 || len(foreign) != MaxForeignJobsPerNamespace {
		t.Errorf("the cache holds %d of this manager's Jobs and %d foreign ones, want 3 and %d", len(mine), len(foreign), MaxForeignJobsPerNamespace)
	}
	if n, _ := conn.foreignNotCached.take(); n < 2 {
		t.Errorf("told %d Jobs left out since the list, want at least 2 (other-late, the relabelled mirror)", n)
	}
}

// syncedConnection is a connection of manager installation manager (origin
// "here") to the API server at cfg, in namespaces (nil: every one), its
// caches synced, telling mirrorChanged (nil: no one) of its mirrors; it
// stops with the test.
func syncedConnection(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, manager string, namespaces []string, mirrorChanged func(string, *batchv1.Job, bool)) *Connection {
	t.Helper()
	if mirrorChanged == nil {
		mirrorChanged = func(string, *batchv1.Job, bool) {}
	}
	conn, err := newConnection("worker-1", cfg, nil, "hash", "here", manager, namespaces, scheme, clocktesting.NewFakeClock(time.Now()), connHandlers{
		mirrorChanged: mirrorChanged, capacityChanged: func(string) {}, synced: func(string) {}, cacheFailed: func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.stop)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return conn.synced.Load(), nil
	}); err != nil {
		t.Fatalf("the connection's caches never synced: %v", err)
	}
	return conn
}
