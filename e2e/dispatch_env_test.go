//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// dispatchEnv is one manager and two workers with equal general pools; worker-1
// also has the tainted gpu pool, worker-2 runs mirrors with the jobferry
// worker's Job controller (jobController: Worker). The dispatch tests share
// it (starting one costs ~15 s); TestMain stops it.
type dispatchEnv struct {
	*devenv.Env
	manager        kubernetes.Interface
	managerClient  client.Client
	workers        map[string]kubernetes.Interface
	workerKubeconf map[string]string
}

var (
	sharedEnvOnce sync.Once
	sharedEnv     *dispatchEnv
	sharedEnvErr  error
)

func stopSharedEnv() {
	if sharedEnv != nil {
		if err := sharedEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

func startDispatchEnv(t *testing.T) *dispatchEnv {
	t.Helper()
	sharedEnvOnce.Do(func() {
		root, err := localcluster.RepoRoot()
		if err != nil {
			sharedEnvErr = err
			return
		}
		dir := filepath.Join(root, "_output", "e2e", "dispatch")
		if err := os.RemoveAll(dir); err != nil {
			sharedEnvErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		workers := []localcluster.Spec{
			{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(2), devenv.GPUPool(2)}},
			{Name: "worker-2", Pools: []localcluster.Pool{devenv.GeneralPool(2)}},
		}
		// worker-2 runs its mirrors with the jobferry worker's Job
		// controller, so every dispatch test covers both controllers.
		env, err := devenv.Start(ctx, devenv.Options{
			Dir: dir, Workers: workers, JobControllers: devenv.DevJobControllers,
			ManagerArgs: []string{"--worker-health-interval=2s", "--worker-lost-timeout=8s"},
		})
		if err != nil {
			sharedEnvErr = err
			return
		}
		d, err := newDispatchEnv(ctx, env)
		if err != nil {
			sharedEnvErr = errors.Join(err, env.Stop())
			return
		}
		sharedEnv = d
	})
	if sharedEnvErr != nil {
		t.Fatalf("starting the dispatch environment: %v", sharedEnvErr)
	}
	return sharedEnv
}

// startOwnDispatchEnv starts an environment for one test alone (in
// opts.Dir) and stops it when the test ends.
func startOwnDispatchEnv(ctx context.Context, t *testing.T, opts devenv.Options) *dispatchEnv {
	t.Helper()
	env, err := devenv.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	d, err := newDispatchEnv(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// newDispatchEnv wraps a started environment with clients of each cluster
// and labels each WorkerCluster with its name (workerNameLabel), for
// dispatchTo.
func newDispatchEnv(ctx context.Context, env *devenv.Env) (*dispatchEnv, error) {
	d := &dispatchEnv{Env: env, workers: map[string]kubernetes.Interface{}, workerKubeconf: map[string]string{}}
	var err error
	if d.manager, err = kubernetes.NewForConfig(env.Manager.RESTConfig()); err != nil {
		return nil, err
	}
	if d.managerClient, err = client.New(env.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()}); err != nil {
		return nil, err
	}
	for _, w := range env.Workers {
		wc := &v1alpha1.WorkerCluster{}
		if err := d.managerClient.Get(ctx, client.ObjectKey{Name: w.Name}, wc); err != nil {
			return nil, err
		}
		wc.Labels = map[string]string{workerNameLabel: w.Name}
		if err := d.managerClient.Update(ctx, wc); err != nil {
			return nil, err
		}
		if d.workers[w.Name], err = kubernetes.NewForConfig(w.RESTConfig()); err != nil {
			return nil, err
		}
		d.workerKubeconf[w.Name] = w.KubeconfigPath
	}
	return d, nil
}

// workerNameLabel on each WorkerCluster of the dispatch environment names it.
const workerNameLabel = "e2e.jobferry.dev/worker"

// onEachWorker runs test once per worker, in parallel: worker-1 runs mirrors
// with kube-controller-manager's Job controller, worker-2 with the jobferry
// worker's.
func (d *dispatchEnv) onEachWorker(t *testing.T, test func(t *testing.T, worker string)) {
	for name, controller := range map[string]string{"worker-1": "Builtin", "worker-2": "Worker"} {
		t.Run(name+"/"+controller, func(t *testing.T) {
			t.Parallel()
			test(t, name)
		})
	}
}

// dispatchTo creates the Job on the manager, pinned to the named worker by
// a cluster selector, waits until it is placed there and returns a client
// of that worker.
func (d *dispatchEnv) dispatchTo(ctx context.Context, t *testing.T, job *batchv1.Job, worker string) kubernetes.Interface {
	t.Helper()
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[v1alpha1.ClusterSelectorAnnotation] = workerNameLabel + "=" + worker
	placed, client := dispatchOne(ctx, t, d, job)
	if placed != worker {
		t.Fatalf("placed on %s, want %s", placed, worker)
	}
	return client
}

// optedInNamespace creates a namespace on the manager whose Jobs jobferry dispatches.
func (d *dispatchEnv) optedInNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dispatch-", Labels: map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled}}}
	ns, err := d.manager.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// metrics scrapes the manager.
func (d *dispatchEnv) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeMetrics(t, d.MetricsURL)
}

// scrapeMetrics reads a Prometheus text endpoint.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	return parseMetrics(t, url, resp.Body)
}

// parseMetrics parses the text exposition format.
func parseMetrics(t *testing.T, url string, body io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(body)
	if err != nil {
		t.Fatalf("parsing the metrics of %s: %v", url, err)
	}
	return families
}

// assertNoRejectedStatusWrites checks jobferry_status_write_rejected_total,
// cumulative over the whole run, is zero.
func (d *dispatchEnv) assertNoRejectedStatusWrites(t *testing.T) {
	t.Helper()
	if f, ok := d.metrics(t)["jobferry_status_write_rejected_total"]; ok {
		for _, m := range f.Metric {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("jobferry_status_write_rejected_total%v = %v, want 0", m.Label, v)
			}
		}
	}
}

// histogramQuantile estimates a quantile from a histogram's buckets, by
// linear interpolation within the bucket, as Prometheus' histogram_quantile.
func histogramQuantile(q float64, h *dto.Histogram) float64 {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return math.NaN()
	}
	buckets := h.GetBucket()
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].GetUpperBound() < buckets[j].GetUpperBound() })
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		count := float64(b.GetCumulativeCount())
		if count >= rank {
			if count == below {
				return b.GetUpperBound()
			}
			return lower + (b.GetUpperBound()-lower)*(rank-below)/(count-below)
		}
		lower, below = b.GetUpperBound(), count
	}
	return lower
}
