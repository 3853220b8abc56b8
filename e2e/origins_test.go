//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// Two managers, on two manager clusters, both left with the default origin,
// share a worker (issue 23 item 7): the second sees the first's mirror,
// says so on its WorkerCluster (OriginExclusive False, naming it) and, scan
// after scan of its orphan collector, deletes none of it; a Job of its own
// of the same name does not take the mirror's place.
func TestTwoManagersWithOneOriginShareAWorker(t *testing.T) {
	dir := outputDir(t)
	ctx := t.Context()
	args := []string{"--worker-health-interval=2s", "--gc-interval=2s"}
	a := startOwnDispatchEnv(ctx, t, devenv.Options{Dir: filepath.Join(dir, "a"), ManagerArgs: args,
		Workers: []localcluster.Spec{{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(1)}}}})
	b := startOwnDispatchEnv(ctx, t, devenv.Options{Dir: filepath.Join(dir, "b"), ManagerArgs: args})
	envA := a.Env
	if err := devenv.Register(ctx, b.managerClient, "worker-1", envA.Workers[0].KubeconfigPath, ""); err != nil {
		t.Fatal(err)
	}
	if err := devenv.WaitConnected(ctx, b.managerClient, 1, time.Minute); err != nil {
		t.Fatal(err)
	}

	// Manager A's Job runs on worker-1.
	const ns = "team-x"
	for _, d := range []*dispatchEnv{a, b} {
		managerNamespace(ctx, t, d, ns, map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled})
	}
	if _, err := a.manager.BatchV1().Jobs(ns).Create(ctx, sleepJob(ns, "shared", 10*time.Minute), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := pollJob(ctx, t, a.manager, ns, "shared", time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	mirrorUIDA := running.Annotations[v1alpha1.MirrorUIDAnnotation]
	m, err := a.workers["worker-1"].BatchV1().Jobs(ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	managerA := m.Labels[v1alpha1.ManagerIDLabel]
	if managerA == "" || m.Labels[v1alpha1.OriginLabel] != "jobferry" {
		t.Fatalf("the mirror's labels %v: want origin jobferry and manager A's id", m.Labels)
	}

	// Manager B tells: its WorkerCluster says whose mirror it saw.
	cond := waitWorkerCondition(ctx, t, b.managerClient, "worker-1", v1alpha1.ConditionOriginExclusive, metav1.ConditionFalse, time.Minute)
	if cond.Reason != v1alpha1.ReasonOriginShared || !containsAll(cond.Message, managerA, `origin "jobferry"`, ns+"/shared") {
		t.Errorf("manager B's OriginExclusive condition: %s: %s", cond.Reason, cond.Message)
	}
	t.Logf("manager B, on worker-1: %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
	if c := waitWorkerCondition(ctx, t, a.managerClient, "worker-1", v1alpha1.ConditionOriginExclusive, metav1.ConditionTrue, time.Minute); c.Reason != v1alpha1.ReasonOriginExclusive {
		t.Errorf("manager A's OriginExclusive condition: %+v", c)
	}

	// Manager B's orphan collector scans worker-1 twice more (its Jobs do
	// not include A's) and leaves A's mirror alone.
	scans := func() float64 {
		return metricSum(b.metrics(t)["jobferry_orphan_scans_total"], map[string]string{"worker": "worker-1"})
	}
	before := scans()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return scans() >= before+2, nil
	}); err != nil {
		t.Fatalf("manager B's collector did not scan worker-1 twice: %v", err)
	}
	// And a Job of B's of the same name goes nowhere near it: B may not
	// use A's namespace there until worker-1's administrator accepts B's
	// Jobs in it, and then the mirror's name is taken.
	if _, err := b.manager.BatchV1().Jobs(ns).Create(ctx, sleepJob(ns, "shared", time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	managerB := managerID(ctx, t, b.managerClient, devenv.SystemNamespace)
	event := waitEvent(ctx, t, b.manager, ns, "shared", policy.ReasonUnschedulable, time.Minute,
		"namespace "+ns+" there was created by another jobferry manager ("+managerA+") and its administrator has not accepted this manager's Jobs in it")
	t.Logf("manager B's Job of the same name: %s: %s", event.Reason, event.Message)
	if _, err := a.workers["worker-1"].CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+v1alpha1.AcceptsManagerLabel(managerB)+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Looked at again within policy.NamespaceRecheck (30 s) and the namespace
	// read's reuse (10 s).
	event = waitEvent(ctx, t, b.manager, ns, "shared", policy.ReasonNameConflict, 90*time.Second, "not created by jobferry exists on worker-1")
	t.Logf("once B's Jobs are accepted there: %s: %s", event.Reason, event.Message)
	now, err := a.workers["worker-1"].BatchV1().Jobs(ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || string(now.UID) != mirrorUIDA || now.DeletionTimestamp != nil {
		t.Fatalf("manager A's mirror on worker-1 was touched: %v, %v", now, err)
	}
	if got := metricSum(b.metrics(t)["jobferry_orphan_mirrors_deleted_total"], map[string]string{"worker": "worker-1"}); got != 0 {
		t.Errorf("manager B deleted %v mirrors on worker-1 as orphans", got)
	}
	job, err := a.manager.BatchV1().Jobs(ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || job.Status.Active != 1 || strings.Contains(eventReasons(ctx, t, a.manager, ns, "shared"), policy.ReasonMirrorDeleted) {
		t.Errorf("manager A's Job: active %d, events %s (%v)", job.Status.Active, eventReasons(ctx, t, a.manager, ns, "shared"), err)
	}
}
