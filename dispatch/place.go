package dispatch

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"gopkg.in/inf.v0"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/directives"
)

// Worker is what placement knows of one WorkerCluster.
type Worker struct {
	Name       string
	Labels     map[string]string
	Connected  bool
	Cordoned   bool
	Directives v1alpha1.SchedulingDirectives
	// Pools is the worker's last capacity summary; nil until one is seen.
	Pools []v1alpha1.NodePool
	// Assumed is, per pool, what Jobs placed here request but the summary
	// does not show yet (the assume cache), so a burst does not pile up on
	// the worker that looked freest before it.
	Assumed map[string]corev1.ResourceList
	// Namespaces, when set, are the only namespaces the manager may use on
	// this worker (WorkerCluster spec.namespaces).
	Namespaces []string
	// MissingRights, when set, says what the manager's credential there
	// may not do that it must (nothing is placed there until it may).
	MissingRights string
	// Namespace is what the worker's namespace of the Job's name allows
	// (zero: the pods may run there, or it was not looked at).
	Namespace NamespaceVerdict
	// Version is the worker's Kubernetes version; nil until it is known.
	Version *version.Version
	// WorkerJobController: its mirrors run under jobferry's worker
	// (spec.jobController Worker), so they carry spec.managedBy.
	WorkerJobController bool
}

// NamespaceVerdict says why a worker's namespace of a Job's name may not
// take its pods, as a reason code (ReasonNamespaceMissing,
// ReasonNamespaceNotAccepted, ReasonPodSecurity, ReasonNamespaceUnreadable)
// and in words.
type NamespaceVerdict struct {
	Code, Why string
}

// Decision is the outcome of Place.
type Decision struct {
	Worker string
	Pool   string
	// Request is what the Job's running pods request together.
	Request corev1.ResourceList
	// Message explains the choice, for an Event.
	Message string
	// Rejected says, per worker not chosen, why.
	Rejected map[string]string
	// Gists is Rejected without the figures that change with every
	// capacity summary (free amounts): the same gist means the same reasons.
	Gists map[string]string
	// Codes says, per worker rejected, why in one of the Reason* words,
	// for metrics.
	Codes map[string]string
}

// Why a worker is rejected, as Decision.Codes says it (a metric label).
const (
	// ReasonNotConnected: the manager is not connected to the worker.
	ReasonNotConnected = "not_connected"
	// ReasonCordoned: the worker is cordoned (spec.cordoned).
	ReasonCordoned = "cordoned"
	// ReasonNamespaceNotUsable: the worker's spec.namespaces does not list
	// the Job's namespace.
	ReasonNamespaceNotUsable = "namespace_not_usable"
	// ReasonMissingRights: the manager's credential there lacks a right.
	ReasonMissingRights = "missing_rights"
	// ReasonNamespaceMissing: the Job's namespace does not exist there,
	// and the manager may not create it.
	ReasonNamespaceMissing = "namespace_missing"
	// ReasonNamespaceNotAccepted: the namespace there was made by someone
	// else, and its administrator has not accepted this manager's Jobs in
	// it (v1alpha1.AcceptsManagerLabel).
	ReasonNamespaceNotAccepted = "namespace_not_accepted"
	// ReasonPodSecurity: the namespace there enforces a weaker Pod
	// Security level than the manager's.
	ReasonPodSecurity = "pod_security"
	// ReasonNamespaceUnreadable: reading the namespace there failed.
	ReasonNamespaceUnreadable = "namespace_unreadable"
	// ReasonExcluded: a same-named Job jobferry did not create is there
	// (the Job's jobferry.dev/excluded-workers).
	ReasonExcluded = "excluded"
	// ReasonClusterSelector: the worker's labels do not match the Job's
	// cluster selector (or the selector does not parse).
	ReasonClusterSelector = "cluster_selector"
	// ReasonKubernetesVersion: the worker's Kubernetes version would drop
	// a field the Job uses (VersionedFeatures).
	ReasonKubernetesVersion = "kubernetes_version"
	// ReasonNoCapacitySummary: the worker has not published its capacity
	// (its ClusterCapacity) yet.
	ReasonNoCapacitySummary = "no_capacity_summary"
	// ReasonInvalidDirectives: the worker's scheduling directives cannot
	// be merged into the Job's pod template (the message says why).
	ReasonInvalidDirectives = "invalid_directives"
	// ReasonNoPools: the worker publishes no node pools.
	ReasonNoPools = "no_pools"
	// ReasonNoPoolAccepts: no pool's labels and taints accept the pods.
	ReasonNoPoolAccepts = "no_pool_accepts"
	// ReasonInsufficientCapacity: a pool accepts the pods, but none has room.
	ReasonInsufficientCapacity = "insufficient_capacity"
)

// RejectionReasons lists every Decision.Codes value.
var RejectionReasons = []string{
	ReasonNotConnected, ReasonCordoned, ReasonNamespaceNotUsable, ReasonMissingRights, ReasonNamespaceMissing,
	ReasonNamespaceNotAccepted, ReasonPodSecurity, ReasonNamespaceUnreadable, ReasonExcluded, ReasonClusterSelector,
	ReasonKubernetesVersion, ReasonNoCapacitySummary, ReasonInvalidDirectives, ReasonNoPools, ReasonNoPoolAccepts, ReasonInsufficientCapacity,
}

// NoWorkerFits starts the Summary and Gist of a Decision that placed nothing.
const NoWorkerFits = "no worker fits"

// Placed reports whether a worker was chosen.
func (d Decision) Placed() bool { return d.Worker != "" }

// Summary explains a decision in one line, for an Event.
func (d Decision) Summary() string { return d.explain(d.Rejected) }

// Gist is Summary without the free amounts, which change with every
// capacity summary: a Job that waits says so again only when its gist
// changes, not whenever a figure does.
func (d Decision) Gist() string {
	gists := maps.Clone(d.Rejected)
	maps.Copy(gists, d.Gists)
	return d.explain(gists)
}

// PlacedOn begins the Summary of a placement on worker: the Dispatched
// Event of a queued Job repeats a Ready check's message that begins so
// (jobs.placementReasons), and only such a message.
func PlacedOn(worker string) string { return "placed on " + worker + ": " }

func (d Decision) explain(rejected map[string]string) string {
	var b strings.Builder
	if d.Placed() {
		b.WriteString(PlacedOn(d.Worker) + d.Message)
	} else {
		b.WriteString(NoWorkerFits)
	}
	names := make([]string, 0, len(rejected))
	for name := range rejected {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		if i == 0 {
			b.WriteString("; ")
			if d.Placed() {
				b.WriteString("not ")
			}
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", name, rejected[name])
	}
	return b.String()
}

// Place picks the worker and pool for a Job: among connected, uncordoned
// workers matching the Job's cluster selector, a pool must accept the Job's
// pods (nodeSelector, required node affinity and tolerations, after the
// worker's own directives are merged in) and have free capacity, net of
// assumed placements, for all of them at once. The pool left with the largest
// share free after placement wins; ties go to the first name. An error means
// the Job itself is invalid (a malformed cluster selector).
func Place(job *batchv1.Job, workers []Worker) (Decision, error) {
	selector, err := clusterSelector(job)
	if err != nil {
		return Decision{}, err
	}
	decision := Decision{Request: JobRequest(job), Rejected: map[string]string{}, Gists: map[string]string{}, Codes: map[string]string{}}
	type candidate struct {
		worker, pool string
		score        float64
	}
	var fits []candidate
	for _, w := range sortedByName(workers) {
		pool, score, r := evaluate(job, w, selector, decision.Request)
		if why, gist := r.why, r.gist; why != "" {
			decision.Rejected[w.Name] = why
			decision.Codes[w.Name] = r.code
			if gist != why {
				decision.Gists[w.Name] = gist
			}
			continue
		}
		fits = append(fits, candidate{w.Name, pool, score})
	}
	if len(fits) == 0 {
		return decision, nil
	}
	// The first of equal scores wins, so ties go to the first name.
	best := fits[0]
	for _, c := range fits[1:] {
		if c.score > best.score {
			best = c
		}
	}
	decision.Worker, decision.Pool = best.worker, best.pool
	decision.Message = fmt.Sprintf("pool %s keeps %.0f%% of its scarcest requested resource free after placement", best.pool, best.score*100)
	for _, c := range fits {
		if c.worker != best.worker {
			decision.Rejected[c.worker] = fmt.Sprintf("fits, but pool %s would keep %.0f%% free against %.0f%% on %s", c.pool, c.score*100, best.score*100, best.worker)
		}
	}
	return decision, nil
}

// clusterSelector is the Job's cluster selector; everything when it has none.
func clusterSelector(job *batchv1.Job) (labels.Selector, error) {
	raw, ok := job.Annotations[v1alpha1.ClusterSelectorAnnotation]
	if !ok {
		return labels.Everything(), nil
	}
	selector, err := labels.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", v1alpha1.ClusterSelectorAnnotation, err)
	}
	return selector, nil
}

// Admits says why worker w may not run the Job's pods as they are now, as a
// reason code and in words; "" when it may. These are the checks of Place
// that depend neither on free capacity nor on the worker taking new Jobs
// (connected, not cordoned): what must still hold when a placement made
// earlier is acted on, before its mirror is created and before a changed
// pod template is carried to it. Without a capacity summary the pools are
// not checked (the worker's scheduler has the last word).
func Admits(job *batchv1.Job, w Worker) (code, why string) {
	selector, err := clusterSelector(job)
	if err != nil {
		return ReasonClusterSelector, err.Error()
	}
	if code, why := workerRejects(job, w, selector); code != "" {
		return code, why
	}
	if w.Pools == nil {
		return "", ""
	}
	template, err := directives.Merge(job.Spec.Template, w.Directives)
	if err != nil {
		return ReasonInvalidDirectives, err.Error()
	}
	if len(w.Pools) == 0 {
		return ReasonNoPools, "no node pools"
	}
	var reasons []string
	for _, p := range w.Pools {
		why := poolRejects(p, template.Spec)
		if why == "" {
			return "", ""
		}
		reasons = append(reasons, fmt.Sprintf("pool %s: %s", p.Name, why))
	}
	return ReasonNoPoolAccepts, strings.Join(reasons, "; ")
}

// workerRejects applies the rules of placement that need neither a
// capacity summary nor the worker taking new Jobs: namespaces the manager
// may use, its credential's rights, the namespace there, a same-named Job
// there, the cluster selector, its Kubernetes version. It says the first
// that rejects w, as a code and in words ("" when none does).
func workerRejects(job *batchv1.Job, w Worker, selector labels.Selector) (code, why string) {
	switch {
	case len(w.Namespaces) > 0 && !slices.Contains(w.Namespaces, job.Namespace):
		return ReasonNamespaceNotUsable, fmt.Sprintf("the manager may use only namespaces %s there (spec.namespaces), not %s", strings.Join(w.Namespaces, ", "), job.Namespace)
	case w.MissingRights != "":
		return ReasonMissingRights, w.MissingRights
	case w.Namespace.Code != "":
		return w.Namespace.Code, w.Namespace.Why
	case slices.Contains(ExcludedWorkers(job), w.Name):
		return ReasonExcluded, fmt.Sprintf("a Job %s/%s not created by jobferry exists there", job.Namespace, job.Name)
	case !selector.Matches(labels.Set(w.Labels)):
		return ReasonClusterSelector, fmt.Sprintf("labels do not match cluster selector %q", selector.String())
	}
	if why := versionRejects(job, w); why != "" {
		return ReasonKubernetesVersion, why
	}
	return "", ""
}

// ExcludedWorkers are the workers a Job may not go to because a same-named
// Job jobferry did not create is there (its jobferry.dev/excluded-workers,
// which only the manager writes).
func ExcludedWorkers(job *batchv1.Job) []string {
	return slices.DeleteFunc(strings.Split(job.Annotations[v1alpha1.ExcludedWorkersAnnotation], ","), func(s string) bool { return s == "" })
}

func sortedByName(workers []Worker) []Worker {
	out := slices.Clone(workers)
	slices.SortFunc(out, func(a, b Worker) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rejection says why a worker cannot take a Job: in full, without the
// free amounts (gist), and as a reason code.
type rejection struct {
	why, gist, code string
}

// evaluate returns the best pool of w for the Job and its score, or why w
// cannot take the Job.
func evaluate(job *batchv1.Job, w Worker, selector labels.Selector, request corev1.ResourceList) (pool string, score float64, r rejection) {
	reject := func(code, why string) (string, float64, rejection) { return "", 0, rejection{why, why, code} }
	switch {
	case !w.Connected:
		return reject(ReasonNotConnected, "not connected")
	case w.Cordoned:
		return reject(ReasonCordoned, "cordoned")
	}
	if code, why := workerRejects(job, w, selector); code != "" {
		return reject(code, why)
	}
	if w.Pools == nil {
		return reject(ReasonNoCapacitySummary, "no capacity summary from the worker yet")
	}
	template, err := directives.Merge(job.Spec.Template, w.Directives)
	if err != nil {
		return reject(ReasonInvalidDirectives, err.Error())
	}
	var reasons, gists []string
	code := ReasonNoPoolAccepts
	score = -1
	for _, p := range w.Pools {
		free := subtract(p.Free, w.Assumed[p.Name])
		if why := poolRejects(p, template.Spec); why != "" {
			reasons = append(reasons, fmt.Sprintf("pool %s: %s", p.Name, why))
			gists = append(gists, fmt.Sprintf("pool %s: %s", p.Name, why))
			continue
		}
		if name, why := lacks(free, request); why != "" {
			reasons = append(reasons, fmt.Sprintf("pool %s: %s", p.Name, why))
			gists = append(gists, fmt.Sprintf("pool %s: not enough %s free", p.Name, name))
			code = ReasonInsufficientCapacity
			continue
		}
		if s := freeShareAfter(free, p.Allocatable, request); s > score {
			pool, score = p.Name, s
		}
	}
	if pool == "" {
		if len(reasons) == 0 {
			return reject(ReasonNoPools, "no node pools")
		}
		return "", 0, rejection{strings.Join(reasons, "; "), strings.Join(gists, "; "), code}
	}
	return pool, score, rejection{}
}

// poolRejects says why the pool's nodes would not accept the pod, or "".
func poolRejects(p v1alpha1.NodePool, spec corev1.PodSpec) string {
	node := &corev1.Node{}
	node.Labels = p.Labels
	match, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec}).Match(node)
	if err != nil {
		return fmt.Sprintf("invalid node affinity: %v", err)
	}
	if !match {
		return "labels do not match the nodeSelector or required node affinity"
	}
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), p.Taints, spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	if untolerated {
		return fmt.Sprintf("untolerated taint %s", taint.ToString())
	}
	return ""
}

// JobRequest is what the Job's pods request while running together: one
// pod's requests (as the scheduler counts them) times the number of pods
// that run at once, plus one "pods" per pod.
func JobRequest(job *batchv1.Job) corev1.ResourceList {
	pods := PodsAtOnce(job)
	perPod := resourcehelper.PodRequests(&corev1.Pod{Spec: job.Spec.Template.Spec}, resourcehelper.PodResourcesOptions{})
	perPod[corev1.ResourcePods] = resource.MustParse("1")
	total := corev1.ResourceList{}
	for name, q := range perPod {
		total[name] = Times(q, pods)
	}
	return total
}

// Times is q taken n times, exactly: a milli-value product would overflow
// (a pod of 1Ti memory times 9,000 pods), and a negative request fits
// anywhere.
func Times(q resource.Quantity, n int64) resource.Quantity {
	product := new(inf.Dec).Mul(q.AsDec(), inf.NewDec(n, 0))
	return *resource.NewDecimalQuantity(*product, q.Format)
}

// PodsAtOnce is how many of the Job's pods run at once, at most: its
// parallelism, or its completions when fewer.
func PodsAtOnce(job *batchv1.Job) int64 {
	pods := int64(ptr.Deref(job.Spec.Parallelism, 1))
	if job.Spec.Completions != nil {
		pods = min(pods, int64(*job.Spec.Completions))
	}
	return pods
}

// lacks says which requested resource the free capacity cannot cover and
// by how much, or "".
func lacks(free, request corev1.ResourceList) (corev1.ResourceName, string) {
	for _, name := range sortedNames(request) {
		want := request[name]
		have := free[name]
		if want.Cmp(have) > 0 {
			return name, fmt.Sprintf("needs %s %s, %s free", want.String(), name, have.String())
		}
	}
	return "", ""
}

// freeShareAfter is the smallest share, over the requested resources, of the
// pool's allocatable that stays free after placement: 1 for an idle pool, 0
// when placement fills one resource completely.
func freeShareAfter(free, allocatable, request corev1.ResourceList) float64 {
	share := 1.0
	for name, want := range request {
		total := allocatable[name]
		if total.IsZero() {
			continue
		}
		have := free[name]
		left := float64(have.MilliValue()-want.MilliValue()) / float64(total.MilliValue())
		share = min(share, left)
	}
	return share
}

func subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	for name, q := range b {
		v := out[name]
		v.Sub(q)
		out[name] = v
	}
	return out
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// NeverFits says why no worker could run the Job however long it waited
// ("" when one might): every worker is known — connected, with a capacity
// summary — and rejects it for what the Job itself asks (its cluster
// selector, its namespace where the manager may not use it, a same-named
// Job there, directives that conflict with the worker's), or has no pool
// whose nodes would accept its pods or whose allocatable could hold them all
// at once. What an administrator or time can change — a worker down or
// cordoned, missing rights, a namespace there, capacity in use — leaves it
// waiting. With no workers at all it waits for one.
func NeverFits(job *batchv1.Job, workers []Worker) string {
	selector, err := clusterSelector(job)
	if err != nil || len(workers) == 0 {
		return ""
	}
	request := JobRequest(job)
	var reasons []string
	for _, w := range sortedByName(workers) {
		why := neverOn(job, w, selector, request)
		if why == "" {
			return ""
		}
		reasons = append(reasons, w.Name+": "+why)
	}
	return strings.Join(reasons, "; ")
}

// neverOn says why w could never run the Job, "" when it might.
func neverOn(job *batchv1.Job, w Worker, selector labels.Selector, request corev1.ResourceList) string {
	if !w.Connected || w.Pools == nil {
		return ""
	}
	switch code, why := workerRejects(job, w, selector); code {
	case ReasonNamespaceNotUsable, ReasonExcluded, ReasonClusterSelector:
		return why
	case "", ReasonKubernetesVersion:
		// An upgrade of the worker may take the version out of the way:
		// its pools still say whether it could ever run the Job.
	default:
		return ""
	}
	template, err := directives.Merge(job.Spec.Template, w.Directives)
	if err != nil {
		return err.Error()
	}
	if len(w.Pools) == 0 {
		return ""
	}
	var reasons []string
	for _, p := range w.Pools {
		why := poolRejects(p, template.Spec)
		if why == "" {
			if name, short := lacks(p.Allocatable, request); short != "" {
				want, have := request[name], p.Allocatable[name]
				why = fmt.Sprintf("needs %s %s at once, its nodes have %s allocatable", want.String(), name, have.String())
			}
		}
		if why == "" {
			return ""
		}
		reasons = append(reasons, fmt.Sprintf("pool %s: %s", p.Name, why))
	}
	return strings.Join(reasons, "; ")
}
