// Package bench measures jobferry against direct submission on local
// clusters (`make bench`, `jobferry-dev bench`): one manager cluster and
// workers, the manager's processes pinned to one half of the CPUs and the
// workers' to the other so the run models separate machines. For each N it
// runs the direct arm (N 1-pod Jobs created on the workers, split evenly),
// the jobferry arm (the same Jobs created on the manager in an opted-in
// namespace) and the Kueue arm (the same again, queued in one LocalQueue
// with ample quota: Kueue on the manager decides when, jobferry where),
// timing them through watches, and writes result.json, report.md and a
// plot of completed Jobs over time.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/admission"
)

// Config says what to run.
type Config struct {
	// Ns are the Job counts, one pair of arms each, in order.
	Ns []int
	// Workers is the number of worker clusters (2 general nodes each).
	Workers int
	// SplitCPUs pins the manager cluster and the workers to different CPUs.
	SplitCPUs bool
	// Out receives result.json, report.md and the plots.
	Out string
	// ClusterDir holds the clusters while they run.
	ClusterDir string
	// ManagerArgs are extra flags for the jobferry manager (experiments).
	ManagerArgs []string
	// ManagerEnv are extra variables of its environment, NAME=value
	// (GOMEMLIMIT, GOGC).
	ManagerEnv []string
	// Kueue runs Kueue on the manager cluster (its CPUs) and the Kueue arm.
	Kueue bool
	// MultiKueue runs Kueue on every worker too and, after the Kueue arm,
	// the MultiKueue arm: the same Jobs queued on the manager in a
	// ClusterQueue that names MultiKueue's admission check, dispatched by
	// Kueue to the workers' Kueue (multikueue.go). It needs Kueue.
	MultiKueue bool
	// KueueAlone runs, after the Kueue arm, the Kueue-alone arm: Kueue on
	// the workers admitting the same Jobs from a ClusterQueue without
	// admission checks, the Kueue arm's baseline (kueuealone.go). It needs
	// Kueue.
	KueueAlone bool
	// KueueClientQPS, when set, is every Kueue's clientConnection QPS and
	// burst to its own cluster (50 and 100 otherwise).
	KueueClientQPS int
	// ArmLimit, when set, is how long every arm may take, its Jobs'
	// completion and its clean-up each; an arm whose time runs out is
	// reported as far as it got (Arm.Unfinished) instead of failing the
	// run. Without it an arm has timeout(n) (MultiKueue's
	// multiKueueTimeout(n)), and only MultiKueue's may run out.
	ArmLimit time.Duration
	// Concurrency is how many creates are in flight at once.
	Concurrency int
	// CreateInterval, when set, creates the Jobs one at a time this far
	// apart (a quiet manager) instead of all at once.
	CreateInterval time.Duration
	// Simulated, when set, runs the workers as API servers only, their Jobs
	// moved by the simulator: the jobferry arm only, labelled simulated.
	Simulated *Simulation
	// Failover runs the manager as two replicas and, in a held simulated
	// run, kills the leader once every Job is tracked (see failover.go).
	Failover bool
	// Shift, in a simulated run with one N and three workers or more,
	// fills the first worker and loses the second while the Jobs are
	// created, and measures how soon placements leave them (shift.go).
	Shift bool
	// InspectionLoad, when set, runs the jobferry arm of each N twice more:
	// while tenants follow logs through the inspection API, and after
	// (inspection.go), with the workers registered with the worker chart's
	// identity.
	InspectionLoad *InspectionLoad
	// KeepJobs leaves a simulated run's Jobs on the manager once measured,
	// to go with the clusters: deleting 100,000 one by one would take half
	// an hour. Writes and CPU then leave the clean-up out.
	KeepJobs bool
	Progress io.Writer
}

// Result is everything one run measured; result.json holds it.
type Result struct {
	Started     time.Time `json:"started"`
	HostCPUs    int       `json:"hostCPUs"`
	Workers     int       `json:"workers"`
	ManagerCPUs string    `json:"managerCPUs"`
	ManagerArgs []string  `json:"managerArgs,omitempty"`
	ManagerEnv  []string  `json:"managerEnv,omitempty"`
	WorkerCPUs  string    `json:"workerCPUs"`
	// Kueue: Kueue ran on the manager cluster throughout, and each run has
	// a Kueue arm.
	Kueue bool `json:"kueue"`
	// MultiKueue: each run has a MultiKueue arm, Kueue running on every
	// worker from the first one on.
	MultiKueue bool `json:"multiKueue,omitempty"`
	// KueueAlone: each run has a Kueue-alone arm, Kueue running on every
	// worker from the first one on.
	KueueAlone bool `json:"kueueAlone,omitempty"`
	// KueueClientQPS: every Kueue's clientConnection QPS and burst (0:
	// 50 and 100).
	KueueClientQPS int `json:"kueueClientQPS,omitempty"`
	// ArmLimitSeconds: Config.ArmLimit (0: none).
	ArmLimitSeconds float64 `json:"armLimitSeconds,omitempty"`
	// Simulated: the workers were simulated (no direct arm).
	Simulated *SimulatedFigures `json:"simulated,omitempty"`
	// Failover: two manager replicas, the leader killed in each run (its
	// figures are both replicas').
	Failover bool `json:"failover,omitempty"`
	// Shift: a worker was filled and one lost during each run (shift.go).
	Shift bool `json:"shift,omitempty"`
	// InspectionLoad: each run has a followed arm (Config.InspectionLoad),
	// the workers registered with the worker chart's identity.
	InspectionLoad *InspectionLoad `json:"inspectionLoad,omitempty"`
	// CreateIntervalSeconds: the Jobs were created one at a time this far
	// apart (0: all at once).
	CreateIntervalSeconds float64 `json:"createIntervalSeconds,omitempty"`
	// KeptJobs: the Jobs were not deleted (Config.KeepJobs).
	KeptJobs bool  `json:"keptJobs,omitempty"`
	Runs     []Run `json:"runs"`
}

// Run is one N: every arm.
type Run struct {
	N        int `json:"n"`
	Direct   Arm `json:"direct"`
	Jobferry Arm `json:"jobferry"`
	// Kueue is the Kueue arm (nil when run without Kueue).
	Kueue *Arm `json:"kueue,omitempty"`
	// KueueAlone is the Kueue-alone arm, the Kueue arm's baseline (nil
	// when run without it).
	KueueAlone *Arm `json:"kueueAlone,omitempty"`
	// Ratio is the jobferry arm's throughput over the direct arm's.
	Ratio float64 `json:"throughputRatio"`
	// Inspection is the jobferry arm again while tenants follow logs and
	// once more after, and how their dispatch compares
	// (Config.InspectionLoad).
	Inspection *InspectionFigures `json:"inspection,omitempty"`
	// KueueRatio is the Kueue arm's throughput over the direct arm's,
	// KueueToJobferry over the jobferry arm's.
	KueueRatio      float64 `json:"kueueThroughputRatio,omitempty"`
	KueueToJobferry float64 `json:"kueueToJobferryThroughputRatio,omitempty"`
	// MultiKueue is the MultiKueue arm (nil when run without it);
	// MultiKueueRatio its throughput over the direct arm's, and
	// KueueToMultiKueue the Kueue arm's over it.
	MultiKueue        *Arm    `json:"multiKueue,omitempty"`
	MultiKueueRatio   float64 `json:"multiKueueThroughputRatio,omitempty"`
	KueueToMultiKueue float64 `json:"kueueToMultiKueueThroughputRatio,omitempty"`
}

// Arm is what one arm measured.
type Arm struct {
	timings
	// Writes per Job by cluster and "resource verb" (apiserver_request_total,
	// write verbs), from before the first create until the arm settled.
	Writes map[string]map[string]float64 `json:"writesPerJob"`
	// WritesTotal per Job by cluster.
	WritesTotal map[string]float64 `json:"writesPerJobTotal"`
	// CPU seconds per Job by "cluster/process".
	CPU map[string]float64 `json:"cpuSecondsPerJob"`
	// ManagerPeakRSS is the jobferry manager's peak resident set during the
	// arm, ManagerBaseRSS before it (bytes); ManagerRSSPerJob their
	// difference over N.
	ManagerPeakRSS   int64   `json:"managerPeakRSSBytes"`
	ManagerBaseRSS   int64   `json:"managerBaseRSSBytes"`
	ManagerRSSPerJob float64 `json:"managerRSSPerJobBytes"`
	// SettleSeconds: from the last Complete until the manager had deleted
	// the finished mirrors and their pods from the workers (jobferry arm of
	// a manager run with --delete-finished-mirrors; 0 otherwise).
	SettleSeconds float64 `json:"settleSeconds"`
	// CleanUpSeconds: from deleting the arm's Jobs (one by one, as their
	// user or their TTL would: on the workers in the direct arm, on the
	// manager in the jobferry arm) until no Job or pod of the arm is left
	// on any worker. Writes and CPU include the clean-up in both arms.
	CleanUpSeconds float64 `json:"cleanUpSeconds"`
	// Events per Job in the arm's namespace by "cluster/reason", what the
	// Events among the writes are.
	Events map[string]float64 `json:"eventsPerJob"`
	// WebhookCalls per Job by "cluster/webhook operation" (webhookCalls),
	// from before the first create until the arm settled.
	WebhookCalls map[string]float64 `json:"webhookCallsPerJob,omitempty"`
	// Queue is the manager's Job work queue during the jobferry (or Kueue)
	// arm.
	Queue *QueueFigures `json:"managerQueue,omitempty"`
	// Profile is the manager's CPU profile of the arm's first
	// profileSeconds, and ProfileTop its hottest functions (jobferry arm).
	Profile    string `json:"managerCPUProfile,omitempty"`
	ProfileTop string `json:"-"`
	// APIServerProfile is the manager cluster's API server's CPU profile
	// over the same seconds, and APIServerProfileTop its hottest functions.
	APIServerProfile    string `json:"managerAPIServerCPUProfile,omitempty"`
	APIServerProfileTop string `json:"-"`
	// HeapProfile is the manager's live heap once every Job of the arm was
	// Complete (all tracked, none deleted yet), and HeapTop what allocated
	// most of it (jobferry arm).
	HeapProfile string `json:"managerHeapProfile,omitempty"`
	HeapTop     string `json:"-"`
	// ManagerLiveHeapPerJob is the growth of the manager's live heap (after
	// a collection) from before the arm to when HeapProfile was taken, over
	// N, in bytes: what tracking a Job takes without the collector's
	// headroom, which the RSS includes (jobferry arm).
	ManagerLiveHeapPerJob float64 `json:"managerLiveHeapPerJobBytes,omitempty"`
	// Tracked is the manager with all N Jobs running at once (a simulated
	// run that holds them).
	Tracked *Tracked `json:"tracked,omitempty"`
	// Failover is what a failover run measured of the takeover.
	Failover *Failover `json:"failover,omitempty"`
	// Shift is what a shift run measured (shift.go).
	Shift *Shift `json:"shift,omitempty"`
	// Placement is how the mirrors spread over the workers (jobferry and
	// Kueue arms).
	Placement *Placement `json:"placement,omitempty"`
	// Unfinished says how far an arm got when its time ran out (armLimit;
	// its timings are of the Jobs Complete by then; its writes and CPU
	// include the clean-up of all, as every arm's); empty when every Job
	// completed.
	Unfinished string `json:"unfinished,omitempty"`
}

// Tracked is what the manager took with every Job of an arm running at
// once, before any finished.
type Tracked struct {
	// AllRunningSeconds is from the first create until every Job was seen
	// running on the manager.
	AllRunningSeconds float64 `json:"allRunningSeconds"`
	// RSS is the manager's resident set then; RSSPerJob its growth since
	// before the arm over N, LiveHeapPerJob the live heap's.
	RSS            int64   `json:"rssBytes"`
	RSSPerJob      float64 `json:"rssPerJobBytes"`
	LiveHeapPerJob float64 `json:"liveHeapPerJobBytes"`
	HeapProfile    string  `json:"heapProfile"`
	HeapTop        string  `json:"-"`
	// CPU is each process's CPU seconds per Job from the first create
	// until every Job was running: placing, mirroring and copying the
	// running status, without the completions and the clean-up the arm's
	// CPU includes. The replicas are apart: the first is the leader.
	CPU map[string]float64 `json:"cpuSecondsPerJobToAllRunning"`
	// DispatchProfile is the manager's CPU profile over profileSeconds
	// from half the Jobs running: dispatch in its steady state, the
	// creates done (the arm's first seconds are mostly the webhooks').
	DispatchProfile    string `json:"dispatchProfile,omitempty"`
	DispatchProfileTop string `json:"-"`
	// Sample is the lag of the Jobs released first, when the run releases
	// a sample (Simulation.ReleaseSample).
	Sample *Sample `json:"sample,omitempty"`
	// killed is when a failover run killed the leader, after measuring.
	killed time.Time
}

// dispatchLabels opt the jobferry arm's namespace in: the labels the
// manager's default namespace selector asks for.
func dispatchLabels() (map[string]string, error) {
	set, err := labels.ConvertSelectorToLabelsMap(admission.DefaultDispatchNamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("the default dispatch namespace selector is not a set of labels: %w", err)
	}
	return set, nil
}

// RunBench starts the clusters, runs every N and writes the report after
// each.
func RunBench(ctx context.Context, cfg Config) (_ *Result, err error) {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	res := &Result{Started: time.Now().UTC(), HostCPUs: runtime.NumCPU(), Workers: cfg.Workers, ManagerArgs: cfg.ManagerArgs, ManagerEnv: cfg.ManagerEnv, Kueue: cfg.Kueue, MultiKueue: cfg.MultiKueue, KueueAlone: cfg.KueueAlone, KueueClientQPS: cfg.KueueClientQPS, ArmLimitSeconds: cfg.ArmLimit.Seconds(), CreateIntervalSeconds: cfg.CreateInterval.Seconds()}
	if cfg.SplitCPUs {
		var ok bool
		if res.ManagerCPUs, res.WorkerCPUs, ok = cpuSplit(res.HostCPUs); !ok {
			return nil, fmt.Errorf("cannot split %d CPU(s) between the manager and the workers; run with the split off", res.HostCPUs)
		}
	}
	var workers []localcluster.Spec
	if cfg.MultiKueue && !cfg.Kueue {
		return nil, fmt.Errorf("the MultiKueue arm runs Kueue on the manager and the workers: run it with Kueue on")
	}
	if cfg.KueueAlone && !cfg.Kueue {
		return nil, fmt.Errorf("the Kueue-alone arm is the Kueue arm's baseline: run it with Kueue on")
	}
	if sim := cfg.Simulated; sim != nil {
		if cfg.Kueue {
			return nil, fmt.Errorf("a simulated run has no Kueue arm: run it with Kueue off")
		}
		if sim.ReleaseSample < 0 || (sim.ReleaseSample > 0 && !sim.Timing.Hold) {
			return nil, fmt.Errorf("a release sample (%d) is a positive count of held Jobs: run it with the Jobs held", sim.ReleaseSample)
		}
		workers = simulatedWorkers(cfg.Workers, res.WorkerCPUs)
		res.Simulated = &SimulatedFigures{Nodes: sim.Nodes, StartSeconds: sim.Timing.Start.Seconds(), RunSeconds: sim.Timing.RunFor.Seconds(), Held: sim.Timing.Hold, ReleaseRate: sim.ReleaseRate, ReleaseSample: sim.ReleaseSample}
	} else {
		for i := 1; i <= cfg.Workers; i++ {
			// The nodes are machines of their own: KWOK, standing in for
			// their kubelets, gets the cycles the workers' control planes
			// leave on their CPUs.
			workers = append(workers, localcluster.Spec{Name: fmt.Sprintf("worker-%d", i), Pools: []localcluster.Pool{devenv.GeneralPool(2)}, CPUs: res.WorkerCPUs, NodesNice: nodesNice})
		}
	}
	fmt.Fprintf(cfg.Progress, "bench: starting a manager (CPUs %s) and %d workers (CPUs %s)\n", orAll(res.ManagerCPUs), cfg.Workers, orAll(res.WorkerCPUs))
	opts := devenv.Options{Dir: cfg.ClusterDir, Workers: workers, ManagerCPUs: res.ManagerCPUs, ManagerClusterProfiling: true, ManagerProfiling: true,
		ManagerArgs: cfg.ManagerArgs, ManagerEnv: cfg.ManagerEnv, Progress: cfg.Progress}
	if cfg.Failover {
		if cfg.Simulated == nil || !cfg.Simulated.Timing.Hold || len(cfg.Ns) != 1 {
			return nil, fmt.Errorf("a failover run is a simulated run with held Jobs and one N")
		}
		opts.ManagerReplicas = 2
		res.Failover = true
	}
	if cfg.Shift && (cfg.Simulated == nil || len(cfg.Ns) != 1 || cfg.Workers < 3) {
		return nil, fmt.Errorf("a shift run is a simulated run with one N and three workers or more (one filled, one lost, the rest to take their Jobs)")
	}
	res.Shift = cfg.Shift
	if load := cfg.InspectionLoad; load != nil {
		if cfg.Simulated != nil {
			return nil, fmt.Errorf("an inspection load follows the logs of real pods: run it without simulated workers")
		}
		if load.Tenants < 1 || load.PodsEach < 1 {
			return nil, fmt.Errorf("an inspection load is at least one tenant following at least one pod, got %d tenants of %d pods", load.Tenants, load.PodsEach)
		}
		opts.ChartIdentity = true
		opts.FollowedLogs = load.Tenants * int(load.PodsEach)
		res.InspectionLoad = load
	}
	if cfg.KeepJobs {
		if cfg.Simulated == nil || len(cfg.Ns) != 1 {
			return nil, fmt.Errorf("only a simulated run with one N keeps its Jobs")
		}
		res.KeptJobs = true
	}
	if cfg.Simulated != nil {
		opts.Simulate = startSimulator(*cfg.Simulated)
	}
	if cfg.Kueue {
		// Kueue runs from the start, as it would on a manager cluster in
		// Kueue mode: the direct and jobferry arms show what it costs
		// for Jobs it does not queue.
		opts.Kueue = &localcluster.KueueOptions{ClientQPS: cfg.KueueClientQPS, ClientBurst: cfg.KueueClientQPS}
	}
	env, err := devenv.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	b, err := newBencher(env, cfg)
	if err != nil {
		return nil, err
	}
	b.room = map[string]int{}
	for _, w := range workers {
		pools := w.Pools
		if cfg.Simulated != nil {
			pools = []localcluster.Pool{SimulatedPool(cfg.Simulated.Nodes)}
		}
		b.room[w.Name] = roomFor(pools, benchRequests())
	}
	if cfg.Kueue {
		if err := b.setUpKueue(ctx, slices.Max(cfg.Ns)); err != nil {
			return nil, err
		}
	}

	b.pprofURL, b.managerBinary = env.Replicas[0].PprofURL, env.ManagerProcess.Binary
	binDir, err := localcluster.BinDir()
	if err != nil {
		return nil, err
	}
	b.apiServerBinary = filepath.Join(binDir, "kube-apiserver")
	for i, n := range cfg.Ns {
		if i > 0 {
			if err := b.cleanUp(ctx, cfg.Ns[i-1]); err != nil {
				return res, err
			}
		}
		run := Run{N: n}
		if cfg.Simulated == nil {
			if run.Direct, err = b.direct(ctx, n); err != nil {
				return res, err
			}
		}
		var tenants *tenants
		if cfg.InspectionLoad != nil {
			if tenants, err = b.startTenants(ctx, n); err != nil {
				return res, err
			}
		}
		if run.Jobferry, err = b.dispatched(ctx, n, jobferryArm, 0); err != nil {
			return res, err
		}
		if tenants != nil {
			if run.Inspection, err = b.inspectionArms(ctx, n, tenants, run.Jobferry); err != nil {
				return res, err
			}
		}
		run.Ratio = ratio(run.Jobferry.Throughput, run.Direct.Throughput)
		summary := fmt.Sprintf("bench: N=%d direct %.1f Jobs/s, jobferry %.1f Jobs/s (%.2f of direct)", n, run.Direct.Throughput, run.Jobferry.Throughput, run.Ratio)
		if cfg.Simulated != nil {
			summary = fmt.Sprintf("bench: N=%d over %d simulated workers: jobferry %.1f Jobs/s, %.1f mirrors/s", n, cfg.Workers, run.Jobferry.Throughput, run.Jobferry.MirrorRate)
		}
		if i := run.Inspection; i != nil {
			summary += fmt.Sprintf(", dispatch p99 %.2f s over %d quiet arms, %.2f s over %d while %d tenants follow logs of %d pods each (%.2f×; quiet arms alone differ up to %.2f×)",
				i.Quiet.P99, len(i.PerRound)+1, i.Following.P99, len(i.PerRound), i.Tenants, i.PodsEach, i.DispatchP99Ratio, i.QuietP99Spread)
		}
		if cfg.Kueue {
			arm, err := b.dispatched(ctx, n, kueueArm, 0)
			if err != nil {
				return res, err
			}
			run.Kueue = &arm
			run.KueueRatio = ratio(arm.Throughput, run.Direct.Throughput)
			run.KueueToJobferry = ratio(arm.Throughput, run.Jobferry.Throughput)
			summary += fmt.Sprintf(", Kueue %.1f Jobs/s (%.2f of direct, %.2f of jobferry)", arm.Throughput, run.KueueRatio, run.KueueToJobferry)
		}
		if cfg.KueueAlone {
			arm, err := b.kueueAlone(ctx, n)
			if err != nil {
				return res, err
			}
			run.KueueAlone = &arm
			summary += fmt.Sprintf(", Kueue alone %.1f Jobs/s", arm.Throughput)
		}
		if cfg.MultiKueue {
			if i == 0 {
				// Kueue on the workers from the first arm that uses
				// it on: the arms before it run as their deployments
				// do.
				if err := b.setUpMultiKueue(ctx); err != nil {
					return res, err
				}
			}
			arm, err := b.dispatched(ctx, n, multiKueueArm, 0)
			if err != nil {
				return res, err
			}
			run.MultiKueue = &arm
			run.MultiKueueRatio = ratio(arm.Throughput, run.Direct.Throughput)
			run.KueueToMultiKueue = ratio(run.Kueue.Throughput, arm.Throughput)
			summary += fmt.Sprintf(", MultiKueue %.1f Jobs/s (%.2f of direct; Kueue + jobferry %.2f× it)", arm.Throughput, run.MultiKueueRatio, run.KueueToMultiKueue)
		}
		res.Runs = append(res.Runs, run)
		fmt.Fprintln(cfg.Progress, summary)
		if err := writeReport(cfg.Out, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// nodesNice is the nice value of the real-worker bench's KWOK
// (localcluster.Spec.NodesNice).
const nodesNice = 19

// ratio is a over b, 0 when b is.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func orAll(cpus string) string {
	if cpus == "" {
		return "all"
	}
	return cpus
}

// bencher holds clients of the running environment.
type bencher struct {
	env *devenv.Env
	cfg Config
	// pprofURL serves the manager's profiler; managerBinary is what it
	// runs and apiServerBinary what its cluster's API server runs.
	pprofURL, managerBinary, apiServerBinary string
	manager                                  kubernetes.Interface
	workers                                  []kubernetes.Interface
	clusters                                 []*localcluster.Cluster
	// queues and workloads are clients of Kueue's API on the manager
	// (Kueue arm).
	queues    client.Client
	workloads kueueclient.Interface
	// workerQueues are clients of Kueue's API on the workers (MultiKueue
	// arm).
	workerQueues []client.Client
	// room is how many bench Jobs each worker holds at once.
	room map[string]int
	// retired are the manager replicas killed during the arm, as last
	// read (failover.go).
	retired []retired
	// mu guards replicaPIDs, the manager replicas' PIDs the RSS sampler
	// reads while a failover restarts one.
	mu          sync.Mutex
	replicaPIDs []int
}

func newBencher(env *devenv.Env, cfg Config) (*bencher, error) {
	b := &bencher{env: env, cfg: cfg, clusters: env.Clusters()}
	var err error
	if b.manager, err = benchClient(env.Manager); err != nil {
		return nil, err
	}
	for _, w := range env.Workers {
		c, err := benchClient(w)
		if err != nil {
			return nil, err
		}
		b.workers = append(b.workers, c)
	}
	return b, nil
}

// benchClient is an admin client whose rate limit never holds the bench back.
func benchClient(c *localcluster.Cluster) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(benchConfig(c))
}

// benchConfig is an admin's configuration for c whose rate limit never holds
// the bench back.
func benchConfig(c *localcluster.Cluster) *rest.Config {
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

// benchQueue names the ClusterQueue of the Kueue arm and its LocalQueue in
// each of the arm's namespaces.
const benchQueue = "bench"

// setUpKueue makes what an administrator would for the Kueue arm: jobferry's
// AdmissionCheck and the ClusterQueue benchQueue using it, with quota for
// maxN Jobs at once, so Kueue holds none back for want of quota and the arm
// measures what queueing through Kueue adds.
func (b *bencher) setUpKueue(ctx context.Context, maxN int) error {
	cfg := benchConfig(b.env.Manager)
	var err error
	if b.queues, err = devenv.NewKueueClient(cfg); err != nil {
		return err
	}
	if b.workloads, err = kueueclient.NewForConfig(cfg); err != nil {
		return err
	}
	if err := devenv.SetUpKueueCheck(ctx, b.queues, time.Minute); err != nil {
		return err
	}
	if err := b.queues.Create(ctx, devenv.KueueClusterQueue(benchQueue, ampleQuota(maxN))); err != nil {
		return fmt.Errorf("creating the ClusterQueue %s: %w", benchQueue, err)
	}
	return nil
}

// localQueue makes the LocalQueue benchQueue of clusterQueue in ns on c's
// cluster and waits until Kueue has it Active: a Workload Kueue makes
// before would wait for the queue.
func localQueue(ctx context.Context, c client.Client, ns, clusterQueue string) error {
	if err := c.Create(ctx, devenv.KueueLocalQueue(ns, benchQueue, clusterQueue)); err != nil {
		return fmt.Errorf("creating the LocalQueue %s/%s: %w", ns, benchQueue, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var lq kueue.LocalQueue
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: benchQueue}, &lq); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(lq.Status.Conditions, kueue.LocalQueueActive), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Kueue to make the LocalQueue %s/%s Active: %w", ns, benchQueue, err)
	}
	return nil
}

func directNamespace(n int) string          { return fmt.Sprintf("bench-direct-%d", n) }
func jobferryNamespace(n int) string        { return fmt.Sprintf("bench-jobferry-%d", n) }
func kueueNamespace(n int) string           { return fmt.Sprintf("bench-kueue-%d", n) }
func multiKueueNamespace(n int) string      { return fmt.Sprintf("bench-multikueue-%d", n) }
func kueueAloneNamespace(n int) string      { return fmt.Sprintf("bench-kueue-alone-%d", n) }
func followedNamespace(n, round int) string { return fmt.Sprintf("bench-followed-%d-%d", n, round) }
func afterNamespace(n, round int) string    { return fmt.Sprintf("bench-after-%d-%d", n, round) }
func tenantsNamespace(n int) string         { return fmt.Sprintf("bench-tenants-%d", n) }

// namespaces are every arm's namespaces for n.
func (b *bencher) namespaces(n int) []string {
	all := []string{directNamespace(n), jobferryNamespace(n), kueueNamespace(n), kueueAloneNamespace(n), multiKueueNamespace(n), tenantsNamespace(n)}
	if load := b.cfg.InspectionLoad; load != nil {
		for r := 1; r <= load.Rounds; r++ {
			all = append(all, followedNamespace(n, r), afterNamespace(n, r))
		}
	}
	return all
}

// timeout bounds an arm: generous (2 Jobs/s), as it only stops a stuck
// run.
func timeout(n int) time.Duration { return max(5*time.Minute, time.Duration(n)*500*time.Millisecond) }

// armLimit is how long an arm of kind with n Jobs may take, and whether
// running out of it is a figure (Arm.Unfinished) rather than a failed run:
// always for MultiKueue, whose clients of the workers run at 5 requests a
// second, and for every arm under Config.ArmLimit (direct submission of
// 5,000 Jobs onto two workers of 2 nodes does not finish in an hour).
func armLimit(cfg Config, kind armKind, n int) (limit time.Duration, mayRunOut bool) {
	switch {
	case cfg.ArmLimit > 0:
		return cfg.ArmLimit, true
	case kind == multiKueueArm:
		return multiKueueTimeout(n), true
	default:
		return timeout(n), false
	}
}

// direct creates n Jobs on the workers (round robin) and waits for all to
// complete there.
func (b *bencher) direct(ctx context.Context, n int) (Arm, error) {
	ns := directNamespace(n)
	for _, w := range b.workers {
		if err := createNamespace(ctx, w, ns, nil); err != nil {
			return Arm{}, err
		}
	}
	return b.onWorkers(ctx, n, directArm, ns, fmt.Sprintf("direct arm, N=%d", n), nil)
}

// onWorkers creates n Jobs of shape in namespace ns of the workers (round
// robin), waits for all to complete there, deletes them and waits until
// the workers are quiet: the direct arm, and the Kueue-alone arm.
func (b *bencher) onWorkers(ctx context.Context, n int, kind armKind, ns, what string, shape jobShape) (Arm, error) {
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	o := newObserver()
	for i, w := range b.workers {
		if err := watchJobs(watchCtx, w, b.env.Workers[i].Name, ns, submitted, o); err != nil {
			return Arm{}, err
		}
	}
	limit, mayRunOut := armLimit(b.cfg, kind, n)
	var cleanUp time.Duration
	var unfinished string
	arm, err := b.measure(ctx, n, ns, what, o, func() error {
		if err := createJobs(ctx, b.workers, ns, shape, n, b.cfg.Concurrency, b.cfg.CreateInterval, o); err != nil {
			return err
		}
		if err := waitComplete(ctx, o, n, limit, what, b.cfg.Progress); err != nil {
			if unfinished, err = b.ranOut(o, n, limit, mayRunOut, what, err); err != nil {
				return err
			}
		}
		var err error
		if cleanUp, err = b.cleanUpArm(ctx, b.workers, ns, limit, what); err != nil {
			return err
		}
		return b.waitQuiet(ctx, ns, what)
	})
	arm.CleanUpSeconds, arm.Unfinished = cleanUp.Seconds(), unfinished
	return arm, err
}

// ranOut turns waitComplete's err into how far the arm got when its time
// ran out and it may (armLimit), and returns any other err as it is.
func (b *bencher) ranOut(o *observer, n int, limit time.Duration, mayRunOut bool, what string, err error) (string, error) {
	if !mayRunOut || !errors.Is(err, errUnfinished) {
		return "", err
	}
	completed, _, _ := o.progress()
	unfinished := fmt.Sprintf("%d of %d Complete in %s", completed, n, limit)
	fmt.Fprintf(b.cfg.Progress, "%s: %s; its timings are of those\n", what, unfinished)
	return unfinished, nil
}

// deletesFinishedMirrors: the manager runs with --delete-finished-mirrors,
// so finished mirrors go from the workers before their manager Jobs do.
func deletesFinishedMirrors(managerArgs []string) bool {
	del := false
	for _, a := range managerArgs {
		switch a {
		case "--delete-finished-mirrors", "--delete-finished-mirrors=true":
			del = true
		case "--delete-finished-mirrors=false":
			del = false
		}
	}
	return del
}

// cleanUpArm deletes the arm's Jobs on targets and waits until no Job or
// pod of the arm is left on the workers, returning how long that took.
func (b *bencher) cleanUpArm(ctx context.Context, targets []kubernetes.Interface, ns string, limit time.Duration, what string) (time.Duration, error) {
	fmt.Fprintf(b.cfg.Progress, "%s: deleting the Jobs\n", what)
	start := time.Now()
	if err := deleteJobs(ctx, targets, ns, b.cfg.Concurrency); err != nil {
		return 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		return b.workersEmpty(ctx, ns)
	})
	if err != nil {
		return 0, fmt.Errorf("%s: waiting for the Jobs and their pods to be deleted from the workers: %w", what, err)
	}
	return time.Since(start), nil
}

// armKind is which arm runs: those through the manager (dispatched) and
// those submitted on the workers (onWorkers).
type armKind int

const (
	// jobferryArm: the Jobs created on the manager.
	jobferryArm armKind = iota
	// kueueArm: the same, queued in the LocalQueue benchQueue.
	kueueArm
	// multiKueueArm: the same, queued in a LocalQueue whose ClusterQueue
	// names MultiKueue's check (multikueue.go).
	multiKueueArm
	// followedArm: the jobferry arm again while tenants follow logs, and
	// afterArm once more when they stopped (Config.InspectionLoad), each
	// InspectionLoad.Rounds times.
	followedArm
	afterArm
	// directArm: the Jobs created on the workers.
	directArm
	// kueueAloneArm: the same, queued in the workers' Kueue
	// (kueuealone.go).
	kueueAloneArm
)

// dispatched runs an arm through the manager: it creates n Jobs on the
// manager (the Kueue and MultiKueue arms: in the LocalQueue benchQueue)
// and waits for all to complete there (and, when the manager deletes
// finished mirrors, for those to go), then deletes them and waits for
// their mirrors (MultiKueue's copies) and pods to be gone from the
// workers. An arm whose time runs out is reported as far as it got
// (Arm.Unfinished) where armLimit allows it. round numbers the followed and after arms from 1
// (0 for the others).
func (b *bencher) dispatched(ctx context.Context, n int, kind armKind, round int) (Arm, error) {
	ns, arm, profileTag, shape := jobferryNamespace(n), "jobferry", strconv.Itoa(n), jobShape(nil)
	// clusterQueue is where a queued arm's LocalQueue on the manager leads.
	queued, clusterQueue := kind == kueueArm || kind == multiKueueArm, benchQueue
	limit, mayRunOut := armLimit(b.cfg, kind, n)
	switch kind {
	case kueueArm:
		ns, arm, profileTag, shape = kueueNamespace(n), "Kueue", "kueue-"+strconv.Itoa(n), queuedIn(benchQueue)
	case multiKueueArm:
		ns, arm, profileTag, shape = multiKueueNamespace(n), "MultiKueue", "multikueue-"+strconv.Itoa(n), multiKueueJob
		clusterQueue = multiKueueQueue
	case followedArm:
		ns, arm, profileTag = followedNamespace(n, round), fmt.Sprintf("followed jobferry (round %d)", round), fmt.Sprintf("followed-%d-%d", n, round)
	case afterArm:
		ns, arm, profileTag = afterNamespace(n, round), fmt.Sprintf("after-following jobferry (round %d)", round), fmt.Sprintf("after-%d-%d", n, round)
	}
	optIn, err := dispatchLabels()
	if err != nil {
		return Arm{}, err
	}
	if kind == multiKueueArm {
		// Kueue dispatches these Jobs, not jobferry: their namespace is
		// not opted in, and MultiKueue needs it and the LocalQueue on
		// every worker.
		optIn = nil
		if err := b.workerLocalQueues(ctx, ns, benchQueue); err != nil {
			return Arm{}, err
		}
	}
	if err := createNamespace(ctx, b.manager, ns, optIn); err != nil {
		return Arm{}, err
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	o := newObserver()
	if err := watchJobs(watchCtx, b.manager, "manager", ns, submitted, o); err != nil {
		return Arm{}, err
	}
	for i, w := range b.workers {
		// The manager creates the namespace on a worker with the first
		// mirror; a watch of a missing namespace is fine.
		if err := watchJobs(watchCtx, w, b.env.Workers[i].Name, ns, mirrors, o); err != nil {
			return Arm{}, fmt.Errorf("%s: %w", b.env.Workers[i].Name, err)
		}
	}
	if queued {
		if err := localQueue(ctx, b.queues, ns, clusterQueue); err != nil {
			return Arm{}, err
		}
		if err := watchWorkloads(watchCtx, b.workloads, ns, o); err != nil {
			return Arm{}, err
		}
	}
	what := fmt.Sprintf("%s arm, N=%d", arm, n)
	var settled, cleanUp time.Duration
	var heapProfile, heapTop string
	var heapAfter int64
	// Each replica's live heap: a failover's figures are the new leader's.
	var heapBefores []int64
	for _, r := range b.env.Replicas {
		heap, err := b.liveHeapBytesAt(ctx, r.PprofURL)
		if err != nil {
			return Arm{}, err
		}
		heapBefores = append(heapBefores, heap)
	}
	heapBefore, measuredReplica := heapBefores[0], 0
	metricsBefore, err := b.scrapeManager(ctx)
	if err != nil {
		return Arm{}, err
	}
	profile := b.profile(ctx, profileTag)
	rssBefore, err := rssBytes(b.env.ManagerProcess.PID)
	if err != nil {
		return Arm{}, err
	}
	var tracked *Tracked
	var failover *Failover
	var shift *Shift
	var unfinished string
	measured, err := b.measure(ctx, n, ns, what, o, func() error {
		start := time.Now()
		cpuStart, err := processCPU(b.clusters)
		if err != nil {
			return err
		}
		var shifted func() (*Shift, error)
		if b.cfg.Shift {
			shifted = b.startShift(ctx, o, n)
		}
		if err := createJobs(ctx, []kubernetes.Interface{b.manager}, ns, shape, n, b.cfg.Concurrency, b.cfg.CreateInterval, o); err != nil {
			return err
		}
		if sim := b.cfg.Simulated; sim != nil && sim.Timing.Hold {
			var err error
			if tracked, err = b.trackAll(ctx, o, n, what, profileTag, start, cpuStart, rssBefore, heapBefore); err != nil {
				return err
			}
		}
		if err := waitComplete(ctx, o, n, limit, what, b.cfg.Progress); err != nil {
			if unfinished, err = b.ranOut(o, n, limit, mayRunOut, what, err); err != nil {
				return err
			}
			// Its clean-up is measured as every arm's is.
			if cleanUp, err = b.cleanUpArm(ctx, []kubernetes.Interface{b.manager}, ns, limit, what); err != nil {
				return err
			}
			return b.waitQuiet(ctx, ns, what)
		}
		if shifted != nil {
			if shift, err = shifted(); err != nil {
				return err
			}
		}
		if tracked != nil && !tracked.killed.IsZero() {
			if failover, err = b.failoverFigures(ctx, ns, n, o, start, tracked.killed); err != nil {
				return err
			}
			measuredReplica = failover.leader
		}
		if heapAfter, err = b.liveHeapBytes(ctx); err != nil {
			return err
		}
		if heapProfile, heapTop, err = b.heapProfile(ctx, profileTag); err != nil {
			return err
		}
		if deletesFinishedMirrors(b.cfg.ManagerArgs) {
			start := time.Now()
			err := wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(ctx context.Context) (bool, error) {
				return b.workersEmpty(ctx, ns)
			})
			if err != nil {
				return fmt.Errorf("%s: waiting for the mirrors and their pods to be deleted from the workers: %w", what, err)
			}
			settled = time.Since(start)
		}
		if !b.cfg.KeepJobs {
			if cleanUp, err = b.cleanUpArm(ctx, []kubernetes.Interface{b.manager}, ns, limit, what); err != nil {
				return err
			}
		}
		return b.waitQuiet(ctx, ns, what)
	})
	if err != nil {
		return Arm{}, err
	}
	measured.Tracked, measured.Failover, measured.Shift, measured.Unfinished = tracked, failover, shift, unfinished
	placement := o.placement(b.room)
	measured.Placement = &placement
	measured.SettleSeconds = settled.Seconds()
	measured.CleanUpSeconds = cleanUp.Seconds()
	measured.HeapProfile, measured.HeapTop = heapProfile, heapTop
	// A restarted replica's heap before is the killed one's (the same
	// binary, the same start).
	if unfinished == "" {
		measured.ManagerLiveHeapPerJob = float64(heapAfter-heapBefores[measuredReplica]) / float64(n)
	}
	metricsAfter, err := b.scrapeManager(ctx)
	if err != nil {
		return Arm{}, err
	}
	figures := queueFigures(metricsBefore, metricsAfter, n)
	measured.Queue = &figures
	managerProfile, apiServerProfile, err := profile()
	if err != nil {
		return Arm{}, err
	}
	measured.Profile, measured.ProfileTop = managerProfile.path, managerProfile.top
	measured.APIServerProfile, measured.APIServerProfileTop = apiServerProfile.path, apiServerProfile.top
	return measured, nil
}

// quietPolls is how many successive one-second polls must find the same
// Events in an arm's namespace before the arm counts as settled.
const quietPolls = 3

// waitQuiet waits until no new Event appears in ns on any cluster for
// quietPolls polls: controllers record Events asynchronously, after the
// change they report, and the writes of both arms must include them.
func (b *bencher) waitQuiet(ctx context.Context, ns, what string) error {
	last, same := -1, 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		count := 0
		for _, c := range append([]kubernetes.Interface{b.manager}, b.workers...) {
			events, err := c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return false, err
			}
			count += len(events.Items)
		}
		if count == last {
			same++
		} else {
			last, same = count, 0
		}
		return same >= quietPolls-1, nil
	})
	if err != nil {
		return fmt.Errorf("%s: waiting for the Events to settle: %w", what, err)
	}
	return nil
}

// workersEmpty: no Job or pod is left in ns on any worker.
func (b *bencher) workersEmpty(ctx context.Context, ns string) (bool, error) {
	for _, w := range b.workers {
		jobs, err := w.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		pods, err := w.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		if len(jobs.Items) > 0 || len(pods.Items) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// measure snapshots writes and CPU around run, samples the manager's memory
// during it, and summarises the observer.
func (b *bencher) measure(ctx context.Context, n int, ns, what string, o *observer, run func() error) (Arm, error) {
	fmt.Fprintf(b.cfg.Progress, "%s: creating %d Jobs\n", what, n)
	pid := b.env.ManagerProcess.PID
	base, err := rssBytes(pid)
	if err != nil {
		return Arm{}, err
	}
	countsBefore, err := clusterCounts(ctx, b.clusters)
	if err != nil {
		return Arm{}, err
	}
	cpuBefore, err := processCPU(b.clusters)
	if err != nil {
		return Arm{}, err
	}
	b.setReplicaPIDs()
	rss := sampleRSS(b.currentReplicaPIDs, 250*time.Millisecond)
	runErr := run()
	peak, rssErr := rss.finish()
	if runErr != nil {
		return Arm{}, runErr
	}
	if rssErr != nil {
		return Arm{}, rssErr
	}
	countsAfter, err := clusterCounts(ctx, b.clusters)
	if err != nil {
		return Arm{}, err
	}
	cpuAfter, err := processCPU(b.clusters)
	if err != nil {
		return Arm{}, err
	}
	for _, r := range b.retired {
		cpuAfter[r.cpuKey] += r.cpu
	}
	arm := Arm{
		timings: o.timings(), Writes: map[string]map[string]float64{}, WritesTotal: map[string]float64{},
		CPU: perJob(cpuBefore, cpuAfter, n), ManagerPeakRSS: peak, ManagerBaseRSS: base,
		ManagerRSSPerJob: float64(peak-base) / float64(n),
	}
	// The manager's CPU is all its replicas'.
	for key, cpu := range arm.CPU {
		if strings.HasPrefix(key, managerProcess+"-") {
			arm.CPU[managerProcess] += cpu
			delete(arm.CPU, key)
		}
	}
	for cluster, after := range countsAfter.writes {
		arm.Writes[cluster] = perJob(countsBefore.writes[cluster], after, n)
		arm.WritesTotal[cluster] = sum(arm.Writes[cluster])
	}
	arm.WebhookCalls = map[string]float64{}
	for cluster, after := range countsAfter.webhooks {
		for call, v := range perJob(countsBefore.webhooks[cluster], after, n) {
			arm.WebhookCalls[cluster+"/"+call] = v
		}
	}
	if arm.Events, err = b.eventsByReason(ctx, ns, n); err != nil {
		return Arm{}, err
	}
	return arm, nil
}

// setReplicaPIDs notes the manager replicas' PIDs for the RSS sampler.
func (b *bencher) setReplicaPIDs() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.replicaPIDs = b.replicaPIDs[:0]
	for _, r := range b.env.Replicas {
		b.replicaPIDs = append(b.replicaPIDs, r.Process.PID)
	}
}

func (b *bencher) currentReplicaPIDs() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.replicaPIDs)
}

// eventsByReason counts the Events of namespace ns on every cluster by
// cluster group and reason (a series counts once per write: its first
// Event, then one update per repetition seen), per Job.
func (b *bencher) eventsByReason(ctx context.Context, ns string, n int) (map[string]float64, error) {
	out := map[string]float64{}
	all := append([]kubernetes.Interface{b.manager}, b.workers...)
	for i, c := range all {
		events, err := c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the Events of %s: %w", ns, err)
		}
		group := "workers"
		if i == 0 {
			group = "manager"
		}
		for _, e := range events.Items {
			out[group+"/"+e.Reason] += 1 / float64(n)
		}
	}
	return out, nil
}

// cleanUp deletes the namespaces of the run for n, on every cluster, and
// waits until they are gone, so the next run starts from empty clusters.
func (b *bencher) cleanUp(ctx context.Context, n int) error {
	fmt.Fprintf(b.cfg.Progress, "bench: deleting the Jobs of N=%d\n", n)
	all := append([]kubernetes.Interface{b.manager}, b.workers...)
	if b.cfg.Simulated != nil {
		// No namespace controller runs on a simulated worker; the arm
		// left its namespaces there empty, and the next N uses others.
		all = all[:1]
	}
	for _, c := range all {
		for _, ns := range b.namespaces(n) {
			if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting namespace %s: %w", ns, err)
			}
		}
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout(n), true, func(ctx context.Context) (bool, error) {
		for _, c := range all {
			for _, ns := range b.namespaces(n) {
				_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				if err == nil {
					return false, nil
				}
				if !apierrors.IsNotFound(err) {
					return false, err
				}
			}
		}
		return true, nil
	})
}

func createNamespace(ctx context.Context, c kubernetes.Interface, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// reportPaths are the files a run writes into its output directory.
func reportPaths(out string) (result, report string) {
	return filepath.Join(out, "result.json"), filepath.Join(out, "report.md")
}
