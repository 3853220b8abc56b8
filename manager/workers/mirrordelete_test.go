package workers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A reconcile or a collection on a cache that still lists a mirror this
// manager deleted sends no second DELETE, until the memory has passed.
func TestDeleteMirrorSendsOneRequestPerMirror(t *testing.T) {
	ctx := context.Background()
	m := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "mirror-1"}}
	var deletes atomic.Int32
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(m.DeepCopy()).
		WithInterceptorFuncs(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes.Add(1)
			return c.Delete(ctx, obj, opts...)
		}}).Build()
	clk := clocktesting.NewFakeClock(testNow)
	conn := deleteConn{c: c, d: NewDeletedMirrors(clk)}

	for i, want := range []struct {
		deleted  bool
		requests int32
	}{{true, 1}, {false, 1}, {false, 1}} {
		deleted, err := DeleteMirror(ctx, conn, "w1", m)
		if err != nil || deleted != want.deleted || deletes.Load() != want.requests {
			t.Errorf("delete %d: deleted=%v err=%v, %d requests; want deleted=%v, %d requests", i+1, deleted, err, deletes.Load(), want.deleted, want.requests)
		}
		clk.Step(20 * time.Second)
	}
	// A minute on, the memory is gone: a mirror still listed is asked for
	// again (the worker answers NotFound, which is no error).
	clk.Step(deletedMirrorMemory)
	if deleted, err := DeleteMirror(ctx, conn, "w1", m); err != nil || !deleted || deletes.Load() != 2 {
		t.Errorf("after the memory: deleted=%v err=%v, %d requests; want a second request", deleted, err, deletes.Load())
	}
}

func TestDeletedMirrorsDropsExpiredEntries(t *testing.T) {
	clk := clocktesting.NewFakeClock(testNow)
	d := NewDeletedMirrors(clk)
	for i := range 1000 {
		d.Remember(uidOf(i))
	}
	clk.Step(deletedMirrorMemory)
	for i := 1000; i < 1030; i++ {
		d.Remember(uidOf(i))
	}
	if len(d.at) != 30 || d.Recently(uidOf(1)) || !d.Recently(uidOf(1029)) {
		t.Errorf("%d remembered, old one recent=%v; want the 30 new ones only", len(d.at), d.Recently(uidOf(1)))
	}
}

func uidOf(i int) types.UID { return types.UID(fmt.Sprintf("uid-%d", i)) }

// testNow is when the unit tests of this package run, by their fake clocks.
var testNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// deleteConn is a connection whose worker is the fake client c, for what
// DeleteMirror uses of it.
type deleteConn struct {
	Conn
	c client.Client
	d *DeletedMirrors
}

func (d deleteConn) Client() client.Client           { return d.c }
func (d deleteConn) DeletedMirrors() *DeletedMirrors { return d.d }
