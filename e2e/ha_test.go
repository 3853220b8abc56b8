//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// replicaMetrics reads a replica's metrics.
func replicaMetrics(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// standbyRequests are what a replica asked of each worker's API server, by
// verb (jobferry_workercluster_requests_total, answered 200), and how many
// worker capacity series it serves.
func standbyRequests(url string) (map[string]map[string]float64, int, error) {
	families, err := replicaMetrics(url)
	if err != nil {
		return nil, 0, err
	}
	byWorker := map[string]map[string]float64{}
	for _, m := range families["jobferry_workercluster_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["code"] != "200" && labels["code"] != "201" {
			continue
		}
		if byWorker[labels["worker"]] == nil {
			byWorker[labels["worker"]] = map[string]float64{}
		}
		byWorker[labels["worker"]][labels["verb"]] += m.GetCounter().GetValue()
	}
	return byWorker, len(families["jobferry_workercluster_pool_allocatable"].GetMetric()), nil
}

// With two manager replicas, the one that does not lead keeps a read-only
// watch on every worker (a warm standby: it writes nothing there and serves
// no worker capacity series); killing the leader mid-run loses nothing, and
// the other replica takes over within the lease duration.
func TestLeaderKilledMidRunOtherReplicaTakesOver(t *testing.T) {
	const lease = 4 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	env, err := devenv.Start(ctx, devenv.Options{
		Dir:             filepath.Join(outputDir(t), "env"),
		Workers:         []localcluster.Spec{{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(2)}}, {Name: "worker-2", Pools: []localcluster.Pool{devenv.GeneralPool(2)}}},
		ManagerReplicas: 2,
		ManagerArgs: []string{"--worker-health-interval=2s", "--leader-elect-lease-duration=" + lease.String(),
			"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	d := &dispatchEnv{Env: env, workers: map[string]kubernetes.Interface{}, workerKubeconf: map[string]string{}}
	d.manager = kubernetes.NewForConfigOrDie(env.Manager.RESTConfig())
	if d.managerClient, err = client.New(env.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()}); err != nil {
		t.Fatal(err)
	}
	for _, w := range env.Workers {
		d.workers[w.Name] = kubernetes.NewForConfigOrDie(w.RESTConfig())
	}

	leader, follower := -1, -1
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		leaders := 0
		for i, r := range env.Replicas {
			if devenv.IsLeader(ctx, r.MetricsURL) {
				leaders, leader, follower = leaders+1, i, 1-i
			}
		}
		return leaders == 1, nil
	})
	if err != nil {
		t.Fatalf("no single leader among the two replicas: %v", err)
	}

	// The standby watches every worker's mirrors, and writes to none.
	var requests map[string]map[string]float64
	var capacitySeries int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		requests, capacitySeries, err = standbyRequests(env.Replicas[follower].MetricsURL)
		if err != nil {
			return false, nil
		}
		for _, w := range env.Workers {
			if requests[w.Name]["WATCH"] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the standby replica does not watch every worker: its requests %v", requests)
	}
	if capacitySeries != 0 {
		t.Errorf("the standby serves %d worker capacity series; want none (the leader's)", capacitySeries)
	}

	ns := d.optedInNamespace(ctx, t)
	rec := recordWorkers(ctx, t, d, ns)
	const total = 100
	for i := range total {
		job := sleepJob(ns, fmt.Sprintf("ha-%03d", i), 3*time.Second)
		if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for i := range list.Items {
			if hasCondition(&list.Items[i], batchv1.JobComplete) != nil {
				done++
			}
		}
		return done >= total/4, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if requests, _, err = standbyRequests(env.Replicas[follower].MetricsURL); err != nil {
		t.Fatal(err)
	}
	for worker, verbs := range requests {
		for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			if verbs[verb] > 0 {
				t.Errorf("the standby sent %v %s requests to %s while it did not lead; want none", verbs[verb], verb, worker)
			}
		}
	}

	killed := time.Now()
	if err := syscall.Kill(env.Replicas[leader].Process.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return devenv.IsLeader(ctx, env.Replicas[follower].MetricsURL), nil
	})
	takeover := time.Since(killed)
	if err != nil {
		t.Fatalf("the other replica never took over: %v", err)
	}
	// client-go's elector counts the lease from when it last saw the record
	// change, and polls every retry period with up to 1.2x jitter: the lease
	// duration plus two jittered retry periods (2 x 1.1 s) is the bound.
	if bound := lease + 2200*time.Millisecond + 300*time.Millisecond; takeover > bound {
		t.Errorf("takeover took %s, want within the %s lease plus two retry periods (%s)", takeover.Round(100*time.Millisecond), lease, bound)
	}

	jobs := waitAllComplete(ctx, t, d, ns, total, 2*time.Minute)
	deleteJobsWaitNoMirrors(ctx, t, d, ns)
	rec.close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	duplicated := 0
	for i := range jobs {
		if n := len(rec.mirrors[jobs[i].UID]); n != 1 || jobs[i].Status.Succeeded != 1 {
			duplicated++
			t.Errorf("%s: %d mirrors, succeeded=%d; want 1 and 1", jobs[i].Name, n, jobs[i].Status.Succeeded)
		}
	}
	t.Logf("leader (replica %d) SIGKILLed with %d Jobs done; replica %d led %s later; submitted %d, completed %d, duplicated %d, lost 0",
		leader+1, total/4, follower+1, takeover.Round(100*time.Millisecond), total, len(jobs), duplicated)
}
