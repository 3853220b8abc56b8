package workers

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A pool on a replica that does not lead tells its subscribers nothing and
// asks its controller for no reconcile (neither runs there); once it
// leads, it tells the mirror changes it held back, once, and does both.
func TestPoolTellsNothingUntilItLeads(t *testing.T) {
	leading := make(chan struct{})
	seen := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	p := NewPool(&Pool{ManagerID: "install-1", Leading: leading, Clock: clocktesting.NewFakeClock(seen)})
	var mirrors, capacities int
	var heldBack [][]MirrorChange
	p.Subscribe(Handlers{
		MirrorChanged:   func(string, *batchv1.Job) { mirrors++ },
		CapacityChanged: func(string) { capacities++ },
		MirrorsHeldBack: func(c []MirrorChange) { heldBack = append(heldBack, c) },
	})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j",
		Labels: map[string]string{v1alpha1.ManagerIDLabel: "install-1"}}}
	tell := func() {
		p.mirrorChanged("w1", job, false)
		p.capacityChanged("w1")
		p.reconcileWorker("w1")
	}

	tell()
	if p.Leads() || mirrors != 0 || capacities != 0 || len(p.Requests()) != 0 {
		t.Fatalf("before leading: leads=%v, told of %d mirrors, %d capacities, %d reconciles asked; want none",
			p.Leads(), mirrors, capacities, len(p.Requests()))
	}
	close(leading)
	// The mirror that changed while standing by is told once, as held
	// back; what changes from then on is told as it happens.
	p.TellHeldBack(context.Background())
	want := MirrorChange{Worker: "w1", Job: types.NamespacedName{Namespace: "ns", Name: "j"}, Seen: seen}
	if len(heldBack) != 1 || len(heldBack[0]) != 1 || heldBack[0][0] != want {
		t.Fatalf("held back and told at the election: %v; want [[%v]]", heldBack, want)
	}
	tell()
	p.TellHeldBack(context.Background())
	if !p.Leads() || mirrors != 1 || capacities != 1 || len(p.Requests()) != 1 || len(heldBack) != 1 {
		t.Fatalf("leading: leads=%v, told of %d mirrors, %d capacities, %d reconciles asked, %d held back; want 1 each",
			p.Leads(), mirrors, capacities, len(p.Requests()), len(heldBack))
	}
}

// The standby connects each WorkerCluster's worker every interval while
// the replica does not lead, and stops as soon as it does. (A worker whose
// Secret is missing gets no connection; connecting to real workers, and
// the standby writing nothing there, is TestLeaderKilledMidRunOtherReplicaTakesOver.)
func TestStandbyRoundsUntilLeading(t *testing.T) {
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"},
		Spec: v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w1-kubeconfig"}}}}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(wc).Build()
	leading := make(chan struct{})
	clk := clocktesting.NewFakeClock(time.Now())
	p := NewPool(&Pool{Client: c, Namespace: "jobferry-system", Leading: leading})
	s := &Standby{Pool: p, Reader: c, Interval: 10 * time.Second, Clock: clk}

	done := make(chan error)
	go func() { done <- s.Start(context.Background()) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The first round ran and the standby waits for the next.
	waitFor("the first round", clk.HasWaiters)
	if got := s.reasons["w1"]; got != v1alpha1.ReasonSecretNotFound {
		t.Fatalf("after the first round w1 is %q, want %q", got, v1alpha1.ReasonSecretNotFound)
	}
	if len(p.Names()) != 0 {
		t.Fatalf("connections to %v; want none (w1 has no Secret)", p.Names())
	}
	close(leading)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the standby still runs after the replica leads")
	}
}

// At the election the pool tells only the changes seen within HeldBackFor
// of it (the old leader copied the ones before), and no mirror its cache
// merely found in its first list (the Job controller's first list covers
// those).
func TestPoolTellsOnlyTheLatestHeldBackChanges(t *testing.T) {
	leading := make(chan struct{})
	start := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	p := NewPool(&Pool{ManagerID: "install-1", Leading: leading, Clock: clk, HeldBackFor: 30 * time.Second})
	var told []MirrorChange
	p.Subscribe(Handlers{MirrorsHeldBack: func(c []MirrorChange) { told = append(told, c...) }})
	mirror := func(name string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{v1alpha1.ManagerIDLabel: "install-1"}}}
	}
	p.mirrorChanged("w1", mirror("old"), false)
	clk.Step(time.Minute)
	p.mirrorChanged("w1", mirror("recent"), false)
	p.mirrorChanged("w1", mirror("listed"), true)
	clk.Step(10 * time.Second)
	close(leading)
	p.TellHeldBack(context.Background())
	want := []MirrorChange{{Worker: "w1", Job: types.NamespacedName{Namespace: "ns", Name: "recent"}, Seen: start.Add(time.Minute)}}
	if len(told) != 1 || told[0] != want[0] {
		t.Errorf("told %v at the election; want %v", told, want)
	}
}

// The standby is warm once a whole round has looked at every WorkerCluster
// and no worker that answers is still listing into the caches; one without
// a credential has nothing to wait for.
func TestStandbyIsWarmOnceNoWorkerIsListing(t *testing.T) {
	w1 := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"},
		Spec: v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w1-kubeconfig"}}}}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(w1).Build()
	p := NewPool(&Pool{Client: c, Namespace: "jobferry-system", Leading: make(chan struct{})})
	s := &Standby{Pool: p, Reader: c, Interval: 10 * time.Second, Clock: clocktesting.NewFakeClock(time.Now())}
	if err := s.Warm(); err == nil {
		t.Fatal("warm before any round")
	}
	s.round(context.Background())
	if err := s.Warm(); err != nil {
		t.Fatalf("after a round in which w1 has no Secret: %v; want warm", err)
	}

	// w1 answers while its caches list its mirrors: not warm until they
	// have synced.
	listing := &Connection{}
	listing.healthy.Store(true)
	p.mu.Lock()
	p.conns["w1"] = listing
	p.mu.Unlock()
	if err := s.Warm(); err == nil || !strings.Contains(err.Error(), "w1") {
		t.Fatalf("w1 listing: %v; want an error naming w1", err)
	}
	listing.synced.Store(true)
	if err := s.Warm(); err != nil {
		t.Errorf("w1 synced: %v; want warm", err)
	}

	// A worker that refuses the caches' list (a credential without the
	// right) has nothing to wait for.
	refused := &Connection{listRefused: &atomic.Bool{}}
	refused.healthy.Store(true)
	refused.listRefused.Store(true)
	p.mu.Lock()
	p.conns["w1"] = refused
	p.mu.Unlock()
	if err := s.Warm(); err != nil {
		t.Errorf("w1 refusing the list: %v; want warm", err)
	}
}
