package orphans

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers/workerstest"
)

// Which namespace the collector deletes: one this installation created and
// no one else marked, whose manager namespace has been gone or going for
// the grace, with no Job left in it; never a kube-* one or default,
// whatever their labels.
func TestCollectNamespace(t *testing.T) {
	const grace = 10 * time.Minute
	gone := namespaceFacts{ours: true, name: "team-a", goneFor: grace}
	with := func(change func(*namespaceFacts)) namespaceFacts {
		f := gone
		change(&f)
		return f
	}
	cases := map[string]struct {
		facts namespaceFacts
		want  bool
	}{
		"manager namespace gone for the grace, nothing left": {gone, true},
		"gone for less than the grace":                       {with(func(f *namespaceFacts) { f.goneFor = grace - time.Second }), false},
		"another installation's":                             {with(func(f *namespaceFacts) { f.ours = false }), false},
		"someone else's mark on it":                          {with(func(f *namespaceFacts) { f.othersMarks = true }), false},
		"manager namespace live":                             {with(func(f *namespaceFacts) { f.managerNamespaceLive = true }), false},
		"a Job left in it":                                   {with(func(f *namespaceFacts) { f.holds = "Job x" }), false},
		"someone's ServiceAccount in it":                     {with(func(f *namespaceFacts) { f.holds = "ServiceAccount x" }), false},
		"being deleted already":                              {with(func(f *namespaceFacts) { f.terminating = true }), false},
		"kube-system labelled as ours":                       {with(func(f *namespaceFacts) { f.name = "kube-system" }), false},
		"kube-anything labelled as ours":                     {with(func(f *namespaceFacts) { f.name = "kube-team" }), false},
		"default labelled as ours":                           {with(func(f *namespaceFacts) { f.name = "default" }), false},
		"a name only starting like kube- is not":             {with(func(f *namespaceFacts) { f.name = "kubeflow" }), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := collectNamespace(tc.facts, grace); got != tc.want {
				t.Errorf("collectNamespace(%+v) = %v, want %v", tc.facts, got, tc.want)
			}
		})
	}
}

// managerNamespaces is the manager cluster's namespaces for the collector:
// name → being deleted; err fails every read.
type managerNamespaces struct {
	live map[string]bool
	err  error
}

func (m managerNamespaces) Get(_ context.Context, name string) (*corev1.Namespace, error) {
	if m.err != nil {
		return nil, m.err
	}
	terminating, ok := m.live[name]
	if !ok {
		return nil, nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if terminating {
		ns.DeletionTimestamp = &metav1.Time{}
	}
	return ns, nil
}

func workerNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name), Labels: labels}}
}

// The collector deletes the worker namespaces this installation created
// that no manager namespace and nothing in them has needed for the grace,
// and nothing else: not another installation's, not the worker's own, not
// one someone else labelled, owns or holds with a finalizer, not one whose
// manager namespace lives (its API server asked when the cache says it is
// gone) or that still holds a Job (anyone's) or a ServiceAccount other than
// default; nothing at all when the credential may not, or the manager's
// namespaces cannot be read.
func TestOrphanCollectorDeletesTheNamespacesItCreated(t *testing.T) {
	ctx := context.Background()
	const grace = 10 * time.Minute
	ours := map[string]string{v1alpha1.ManagerIDLabel: "m1", "pod-security.kubernetes.io/enforce": "baseline", corev1.LabelMetadataName: "x"}
	foreign := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-held", Name: "someones"}}
	// What Kubernetes puts in every namespace does not keep one; an
	// add-on's ServiceAccount does.
	defaultAccount := corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-gone", Name: "default"}}
	addOn := corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-installed", Name: "cert-manager"}}
	owned := workerNamespace("team-owned", ours)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "a-tool", UID: "tool"}}
	finalized := workerNamespace("team-finalized", ours)
	finalized.Finalizers = []string{"example.com/keep"}
	namespaces := []*corev1.Namespace{
		workerNamespace("team-gone", ours), workerNamespace("team-going", ours), workerNamespace("team-live", ours),
		workerNamespace("team-back", ours), workerNamespace("team-held", ours), workerNamespace("team-installed", ours),
		workerNamespace("team-accepted", map[string]string{v1alpha1.ManagerIDLabel: "m1", v1alpha1.AcceptsManagerLabel("m2"): "true"}),
		workerNamespace("team-other", map[string]string{v1alpha1.ManagerIDLabel: "m2"}), workerNamespace("team-own", nil),
		workerNamespace("kube-system", ours), owned, finalized, workerNamespace("team-zz-gone", ours),
	}
	newWorker := func() *workerstest.Conn {
		w := workerstest.NewConn("jobferry", &foreign, &defaultAccount, &addOn)
		for _, ns := range namespaces {
			if err := w.API.Create(ctx, ns.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	// The cache has team-back gone; the API server has it made again.
	cache := managerNamespaces{live: map[string]bool{"team-live": false, "team-going": true}}
	api := managerNamespaces{live: map[string]bool{"team-live": false, "team-going": true, "team-back": false}}
	newCollector := func(w *workerstest.Conn, cached, fresh NamespaceGetter, clk *clocktesting.FakeClock) *Collector {
		return &Collector{Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": w}), ManagerID: "m1",
			ManagerNamespaces: cached, ManagerNamespacesFresh: fresh, NamespaceGrace: grace, Clock: clk}
	}
	sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })

	w, clk := newWorker(), clocktesting.NewFakeClock(time.Now())
	gc := newCollector(w, cache, api, clk)
	gc.collectNamespaces(ctx, "w1", w)
	if len(w.NamespaceDeletes) != 0 {
		t.Errorf("deleted %v at the first sight of their manager namespaces gone", w.NamespaceDeletes)
	}
	clk.Step(grace - time.Second)
	gc.collectNamespaces(ctx, "w1", w)
	if len(w.NamespaceDeletes) != 0 {
		t.Errorf("deleted %v before the grace", w.NamespaceDeletes)
	}
	clk.Step(time.Second)
	gc.collectNamespaces(ctx, "w1", w)
	if diff := cmp.Diff([]string{"team-gone", "team-going", "team-zz-gone"}, w.NamespaceDeletes, sorted); diff != "" {
		t.Errorf("namespaces deleted after the grace (-want +got):\n%s", diff)
	}
	var left corev1.NamespaceList
	if err := w.API.List(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != len(namespaces)-3 {
		t.Errorf("%d namespaces left on the worker, want %d", len(left.Items), len(namespaces)-3)
	}

	t.Run("the grace starts again when the manager namespace comes back", func(t *testing.T) {
		w, clk := newWorker(), clocktesting.NewFakeClock(time.Now())
		gc := newCollector(w, cache, cache, clk)
		gc.collectNamespaces(ctx, "w1", w)
		clk.Step(grace / 2)
		back := managerNamespaces{live: map[string]bool{"team-live": false, "team-going": true, "team-gone": false}}
		gc.ManagerNamespaces, gc.ManagerNamespacesFresh = back, back
		gc.collectNamespaces(ctx, "w1", w)
		clk.Step(grace / 2)
		gc.ManagerNamespaces, gc.ManagerNamespacesFresh = cache, cache
		gc.collectNamespaces(ctx, "w1", w)
		// team-gone's came back halfway: its grace starts again.
		if diff := cmp.Diff([]string{"team-back", "team-going", "team-zz-gone"}, w.NamespaceDeletes, sorted); diff != "" {
			t.Errorf("namespaces deleted (-want +got):\n%s", diff)
		}
	})
	t.Run("a collection cut short keeps only what it did not reach", func(t *testing.T) {
		w, clk := newWorker(), clocktesting.NewFakeClock(time.Now())
		gc := newCollector(w, cache, cache, clk)
		gc.collectNamespaces(ctx, "w1", w)
		// team-gone's manager namespace comes back; a collection that
		// reaches it (the third manager namespace it reads, after
		// team-back's and team-going's) and is then cut short must not
		// keep its old time, and must keep team-zz-gone's, which it did not
		// reach.
		back := managerNamespaces{live: map[string]bool{"team-live": false, "team-going": true, "team-gone": false}}
		cut, cancel := context.WithCancel(ctx)
		reads := 0
		gc.ManagerNamespaces, gc.ManagerNamespacesFresh = cancelAfter{back, &reads, 3, cancel}, back
		gc.collectNamespaces(cut, "w1", w)
		clk.Step(grace)
		gc.ManagerNamespaces, gc.ManagerNamespacesFresh = cache, cache
		gc.collectNamespaces(ctx, "w1", w)
		if slices.Contains(w.NamespaceDeletes, "team-gone") {
			t.Errorf("team-gone deleted at once when its manager namespace was gone again: %v", w.NamespaceDeletes)
		}
		if !slices.Contains(w.NamespaceDeletes, "team-zz-gone") {
			t.Errorf("team-zz-gone, not reached by the cut collection, not deleted after the grace: %v", w.NamespaceDeletes)
		}
	})
	t.Run("the grace starts over after the worker was away", func(t *testing.T) {
		w, clk := newWorker(), clocktesting.NewFakeClock(time.Now())
		gc := newCollector(w, cache, api, clk)
		gc.collectNamespaces(ctx, "w1", w)
		clk.Step(grace)
		w.Down = true
		gc.collect(ctx, "w1", func(types.UID) (liveJob, bool) { return liveJob{}, false })
		w.Down = false
		gc.collectNamespaces(ctx, "w1", w)
		if len(w.NamespaceDeletes) != 0 {
			t.Errorf("deleted %v at the first collection after the worker came back", w.NamespaceDeletes)
		}
	})
	// Nothing at all is deleted, however long the grace has run, without
	// the right or without the manager API server's word.
	for name, tc := range map[string]struct {
		noRight bool
		fresh   NamespaceGetter
	}{
		"not without the right":                            {noRight: true, fresh: api},
		"not when the manager's namespaces cannot be read": {fresh: managerNamespaces{err: errors.New("the manager's API server did not answer")}},
		"not without reading the manager's API server":     {fresh: nil},
	} {
		t.Run(name, func(t *testing.T) {
			w, clk := newWorker(), clocktesting.NewFakeClock(time.Now())
			w.NoCollect = tc.noRight
			gc := newCollector(w, cache, tc.fresh, clk)
			gc.collectNamespaces(ctx, "w1", w)
			clk.Step(grace)
			gc.collectNamespaces(ctx, "w1", w)
			if len(w.NamespaceDeletes) != 0 {
				t.Errorf("deleted %v", w.NamespaceDeletes)
			}
		})
	}
}

// cancelAfter reads as its getter does and cancels a context after its
// reads reached n: a collection cut short by its deadline.
type cancelAfter struct {
	NamespaceGetter
	reads  *int
	n      int
	cancel context.CancelFunc
}

func (c cancelAfter) Get(ctx context.Context, name string) (*corev1.Namespace, error) {
	*c.reads++
	if *c.reads >= c.n {
		c.cancel()
	}
	return c.NamespaceGetter.Get(ctx, name)
}

// Found by the chaos run: a worker namespace deleted under an Indexed Job
// with backoffLimitPerIndex hung terminating (its deletion waits for the
// pods, the Job controller holds a failed pod for a replacement the
// namespace refuses). The collector deletes this installation's mirrors in
// a namespace being deleted — their pods are released then — and nothing
// in namespaces that live, nor another installation's there.
func TestOrphanCollectorDeletesMirrorsOfTerminatingNamespaces(t *testing.T) {
	ctx := context.Background()
	going := workerNamespace("team-going", nil)
	going.Finalizers = []string{"test/keep"}
	going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	live := workerNamespace("team-live", nil)
	inGoing, inLive := gcMirror("job-u1", "u1", 1, "m1"), gcMirror("job-u2", "u2", 1, "m1")
	inGoing.Namespace, inLive.Namespace = "team-going", "team-live"
	theirs := gcMirror("job-u3", "u3", 1, "m2")
	theirs.Namespace = "team-going"
	w := workerstest.NewConn("jobferry", going, live, &inGoing, &inLive, &theirs)
	// In the foreground: the mirror stays until its pods are gone, so the
	// next attempt never runs beside them.
	var propagation []metav1.DeletionPropagation
	w.API = interceptor.NewClient(w.API.(client.WithWatch), interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		var o client.DeleteOptions
		o.ApplyOptions(opts)
		propagation = append(propagation, ptr.Deref(o.PropagationPolicy, ""))
		return c.Delete(ctx, obj, opts...)
	}})
	gc := &Collector{Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": w}), ManagerID: "m1"}
	metas, err := w.MirrorMetas(ctx, metav1.NamespaceAll)
	if err != nil {
		t.Fatal(err)
	}
	gc.collectMirrorsOfTerminatingNamespaces(ctx, "w1", w, metas)
	var left batchv1.JobList
	if err := w.API.List(ctx, &left); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range left.Items {
		names = append(names, j.Namespace+"/"+j.Name)
	}
	if diff := cmp.Diff([]string{"team-going/job-u3", "team-live/job-u2"}, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("Jobs left on the worker (-want +got):\n%s", diff)
	}
	if want := []metav1.DeletionPropagation{metav1.DeletePropagationForeground}; !slices.Equal(propagation, want) {
		t.Errorf("deletes with propagation %v, want %v", propagation, want)
	}
}
