package orphans

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers/workerstest"
)

// Which namespace the collector deletes: one this installation created,
// whose manager namespace is gone or going, with no Job left in it; never a
// kube-* one or default, whatever their labels.
func TestCollectNamespace(t *testing.T) {
	gone := namespaceFacts{ours: true, name: "team-a"}
	cases := map[string]struct {
		facts namespaceFacts
		want  bool
	}{
		"manager namespace gone, nothing left":   {gone, true},
		"another installation's":                 {namespaceFacts{name: "team-a"}, false},
		"manager namespace live":                 {namespaceFacts{ours: true, name: "team-a", managerNamespaceLive: true}, false},
		"a Job left in it":                       {namespaceFacts{ours: true, name: "team-a", holdsJobs: true}, false},
		"being deleted already":                  {namespaceFacts{ours: true, name: "team-a", terminating: true}, false},
		"kube-system labelled as ours":           {namespaceFacts{ours: true, name: "kube-system"}, false},
		"kube-anything labelled as ours":         {namespaceFacts{ours: true, name: "kube-team"}, false},
		"default labelled as ours":               {namespaceFacts{ours: true, name: "default"}, false},
		"a name only starting like kube- is not": {namespaceFacts{ours: true, name: "kubeflow"}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := collectNamespace(tc.facts); got != tc.want {
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

func workerNamespace(name, managerID string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name)}}
	if managerID != "" {
		ns.Labels = map[string]string{v1alpha1.ManagerIDLabel: managerID}
	}
	return ns
}

// The collector deletes the worker namespaces this installation created
// that no manager namespace and no Job needs any more, and nothing else:
// not another installation's, not the worker's own, not one whose manager
// namespace lives or that still holds a Job (anyone's); nothing at all when
// the credential may not, or the manager's namespaces cannot be read.
func TestOrphanCollectorDeletesTheNamespacesItCreated(t *testing.T) {
	ctx := context.Background()
	foreign := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-held", Name: "someones"}}
	objects := func() []*corev1.Namespace {
		return []*corev1.Namespace{
			workerNamespace("team-gone", "m1"), workerNamespace("team-going", "m1"), workerNamespace("team-live", "m1"),
			workerNamespace("team-held", "m1"), workerNamespace("team-other", "m2"), workerNamespace("team-own", ""),
			workerNamespace("kube-system", "m1"),
		}
	}
	newWorker := func() *workerstest.Conn {
		w := workerstest.NewConn("jobferry", &foreign)
		for _, ns := range objects() {
			if err := w.API.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	manager := managerNamespaces{live: map[string]bool{"team-live": false, "team-going": true}}
	collect := func(w *workerstest.Conn, namespaces NamespaceGetter) {
		gc := &Collector{Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": w}), ManagerID: "m1", ManagerNamespaces: namespaces}
		gc.collectNamespaces(ctx, "w1", w)
	}

	w := newWorker()
	collect(w, manager)
	if diff := cmp.Diff([]string{"team-gone", "team-going"}, w.NamespaceDeletes, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("namespaces deleted (-want +got):\n%s", diff)
	}
	var left corev1.NamespaceList
	if err := w.API.List(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != len(objects())-2 {
		t.Errorf("%d namespaces left on the worker, want %d", len(left.Items), len(objects())-2)
	}

	t.Run("not without the right", func(t *testing.T) {
		w := newWorker()
		w.NoCollect = true
		collect(w, manager)
		if len(w.NamespaceDeletes) != 0 {
			t.Errorf("deleted %v without the right to", w.NamespaceDeletes)
		}
	})
	t.Run("not when the manager's namespaces cannot be read", func(t *testing.T) {
		w := newWorker()
		collect(w, managerNamespaces{err: errors.New("the manager's API server did not answer")})
		if len(w.NamespaceDeletes) != 0 {
			t.Errorf("deleted %v without knowing the manager's namespaces", w.NamespaceDeletes)
		}
	})
}
