package dispatch

import (
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/directives"
)

// Explanation is where a Job would go now and, for every worker that would
// not take it, what would have to change: the answer to "where would my Job
// go, and if nowhere, why?" (kubectl jobferry explain). It is Place's
// decision on the same views, so it says what the manager would do, not a
// guess.
type Explanation struct {
	// Worker and Pool are where Place would put the Job now; "" when
	// nowhere. Why is Place's reason for them, or says that no worker
	// takes the Job.
	Worker, Pool, Why string
	// Workers are every worker's verdict, by name.
	Workers []WorkerVerdict
	// Never says why no worker could ever run the Job as the workers are
	// (NeverFits); "" when one might.
	Never string
	// Held and Notes are the manager's, not Explain's (it knows the Job's
	// namespace, its quota, Kueue): Held says what would hold the Job
	// before any worker is looked at ("" when nothing would, and then
	// only it is set); Notes what the answer does not take into account.
	Held  string
	Notes []string
}

// InvalidJob is the error of a Job placement cannot read (its cluster
// selector does not parse): the Job's fault, not the manager's.
type InvalidJob struct{ Err error }

func (e InvalidJob) Error() string { return e.Err.Error() }
func (e InvalidJob) Unwrap() error { return e.Err }

// WorkerVerdict is what one worker makes of the Job.
type WorkerVerdict struct {
	Name string
	// Chosen: Place picks this worker.
	Chosen bool
	// Code and Why are why the worker is passed over (Decision.Codes and
	// Rejected); a worker that fits but another fits better has Why and no
	// Code.
	Code, Why string
	// Change is the nearest change that would let the worker take the Job;
	// "" when it takes it.
	Change string
}

// Explain is Place's decision on the Job, with each worker's verdict and
// the nearest change that would make each take it. An error means the Job
// itself is invalid (its cluster selector), as for Place: an InvalidJob.
func Explain(job *batchv1.Job, workers []Worker) (Explanation, error) {
	decision, err := Place(job, workers)
	if err != nil {
		return Explanation{}, InvalidJob{err}
	}
	e := Explanation{Worker: decision.Worker, Pool: decision.Pool, Why: decision.Message}
	for _, w := range sortedByName(workers) {
		v := WorkerVerdict{Name: w.Name, Chosen: w.Name == decision.Worker, Code: decision.Codes[w.Name], Why: decision.Rejected[w.Name]}
		if v.Code != "" {
			v.Change = nearestChange(job, w, v.Code, decision.Request)
		}
		e.Workers = append(e.Workers, v)
	}
	if !decision.Placed() {
		e.Why = fmt.Sprintf("none of the %d workers takes it", len(workers))
		if len(workers) == 0 {
			e.Why = "there is no WorkerCluster"
		}
		e.Never = NeverFits(job, workers)
	}
	return e, nil
}

// nearestChange says, for a worker that rejects the Job with code, what
// would have to change for it to take it: of the Job, of the worker's
// setup, or of what runs there.
func nearestChange(job *batchv1.Job, w Worker, code string, request corev1.ResourceList) string {
	ns := job.Namespace
	switch code {
	case ReasonNotConnected:
		return fmt.Sprintf("the manager's connection to %s: its WorkerCluster's Connected condition says why it is down (kubectl get workercluster %s -o yaml)", w.Name, w.Name)
	case ReasonCordoned:
		return fmt.Sprintf("uncordon it: kubectl jobferry uncordon %s", w.Name)
	case ReasonNamespaceNotUsable:
		return fmt.Sprintf("add %s to WorkerCluster %s's spec.namespaces (and the worker chart's managerIdentity.namespaces there)", ns, w.Name)
	case ReasonMissingRights:
		return fmt.Sprintf("grant the manager's identity on %s the rights its Authorized condition names (the worker chart grants them)", w.Name)
	case ReasonNamespaceMissing:
		return fmt.Sprintf("create namespace %s on %s, or let the manager create it (worker chart managerIdentity.allowNamespaceCreation)", ns, w.Name)
	case ReasonNamespaceNotAccepted:
		return fmt.Sprintf("on %s, accept this manager's Jobs in namespace %s: the label accepts-manager.jobferry.dev/<the manager's ID>=true, as the message says", w.Name, ns)
	case ReasonPodSecurity:
		return fmt.Sprintf("give namespace %s on %s a Pod Security level at least the manager namespace's", ns, w.Name)
	case ReasonNamespaceUnreadable:
		return fmt.Sprintf("the manager's reads of namespace %s on %s: they failed (the message says how)", ns, w.Name)
	case ReasonExcluded:
		return fmt.Sprintf("none for this Job: a Job %s/%s jobferry did not create held its name on %s, and %s stays excluded for it (jobferry.dev/excluded-workers); only another worker can take it", ns, job.Name, w.Name, w.Name)
	case ReasonClusterSelector:
		// Not the labels themselves: the answer goes to who may read the
		// Job, who may not be allowed to read WorkerClusters.
		return fmt.Sprintf("a cluster selector (%s) that WorkerCluster %s's labels match, or those labels on it (its administrator's)", v1alpha1.ClusterSelectorAnnotation, w.Name)
	case ReasonKubernetesVersion:
		return fmt.Sprintf("%s upgraded to a version that keeps the fields the Job uses, or the Job without them", w.Name)
	case ReasonNoCapacitySummary:
		return fmt.Sprintf("the capacity summary of %s: its jobferry-worker publishes it once it runs", w.Name)
	case ReasonInvalidDirectives:
		return fmt.Sprintf("a pod template that %s's scheduling directives merge into (the message names the conflict)", w.Name)
	case ReasonNoPools:
		return fmt.Sprintf("ready, schedulable nodes on %s", w.Name)
	case ReasonNoPoolAccepts:
		return "pods a pool's nodes accept: the tolerations, node selector or affinity each pool's reason above asks for"
	case ReasonInsufficientCapacity:
		return roomShort(job, w, request)
	}
	return ""
}

// roomShort says how much the nearest pool of w that accepts the Job's pods,
// and could hold them all at once, lacks for them now: what must finish
// there, or what the Job may ask less of. Free is net of the Jobs placed
// there that its capacity summary does not show yet, as Place counts it.
func roomShort(job *batchv1.Job, w Worker, request corev1.ResourceList) string {
	template, err := directives.Merge(job.Spec.Template, w.Directives)
	if err != nil {
		return ""
	}
	best, bestShort := "", ""
	var bestScore float64 = -1
	for _, p := range w.Pools {
		if poolRejects(p, template.Spec) != "" {
			continue
		}
		if name, _ := lacks(p.Allocatable, request); name != "" {
			// Its nodes could never hold them all at once.
			continue
		}
		free := subtract(p.Free, w.Assumed[p.Name])
		var shorts []string
		// The score is the share of the request already free, over the
		// resources it lacks: the pool nearest to fitting has the most.
		score := 1.0
		for _, name := range sortedNames(request) {
			want, have := request[name], free[name]
			if want.Cmp(have) <= 0 {
				continue
			}
			shorts = append(shorts, fmt.Sprintf("%s more %s (%s free of %s allocatable, the Job's pods need %s)", shortfall(want, have), name, have.String(), quantity(p.Allocatable, name), want.String()))
			if w := want.AsApproximateFloat64(); w > 0 {
				score = min(score, max(have.AsApproximateFloat64(), 0)/w)
			}
		}
		if len(shorts) > 0 && score > bestScore {
			best, bestShort, bestScore = p.Name, strings.Join(shorts, ", "), score
		}
	}
	if best == "" {
		return fmt.Sprintf("a Job that asks for less at once: no pool of %s that accepts its pods could hold them all at once", w.Name)
	}
	return fmt.Sprintf("pool %s needs %s: room when Jobs there finish, or a Job that asks for less", best, bestShort)
}

// shortfall is want minus have, in want's own format (a memory request of
// Gi gives Mi or Gi, not bytes).
func shortfall(want, have resource.Quantity) string {
	missing := want.DeepCopy()
	missing.Sub(have)
	if want.Format == resource.DecimalSI && missing.MilliValue()%1000 != 0 {
		return resource.NewMilliQuantity(missing.MilliValue(), want.Format).String()
	}
	return resource.NewQuantity(missing.Value(), want.Format).String()
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) string {
	q, ok := l[name]
	if !ok {
		return "0"
	}
	return q.String()
}

// Chosen is the verdict of the worker Place picks, if any.
func (e Explanation) Chosen() (WorkerVerdict, bool) {
	i := slices.IndexFunc(e.Workers, func(v WorkerVerdict) bool { return v.Chosen })
	if i < 0 {
		return WorkerVerdict{}, false
	}
	return e.Workers[i], true
}
