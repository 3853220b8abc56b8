package admission

import (
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/manager/managercache"
)

// AlwaysReserved are the namespaces jobferry never dispatches from or to,
// whatever the configuration: the clusters' own.
var AlwaysReserved = []string{"kube-system", "kube-public", "kube-node-lease"}

// ReservedPrefix starts every namespace Kubernetes keeps for itself: none is
// dispatched from or to, whether it exists now or comes with an add-on
// later. The worker chart's policy holds the manager's Jobs out of them by
// the same prefix (ManagerJobsPolicy), so placement never picks a Job its
// workers would refuse.
const ReservedPrefix = "kube-"

// DispatchPolicy is the tenant boundary an administrator sets: which
// namespaces' Jobs may cross to the workers, which never do, and what Pod
// Security the workers must hold them to. The manager runs a tenant's pod
// template on a worker with its own credential, so everything the manager
// cluster would have enforced on those pods is enforced here: the webhook
// refuses a Job that breaks a rule, and the Job controller never dispatches
// one that slipped in while the webhook was down.
type DispatchPolicy struct {
	// Namespaces selects, by their labels, the namespaces whose Jobs are
	// dispatched (jobferry.dev/dispatch=enabled by default).
	Namespaces labels.Selector
	// Reserved namespaces are never dispatched from or to (on the manager
	// and on every worker, where mirrors keep their namespace's name).
	Reserved sets.Set[string]
	// AllowWeakerWorkerPodSecurity lets Jobs go to a worker whose namespace
	// of the same name enforces a weaker Pod Security level than the
	// manager's; by default such a worker is not chosen.
	AllowWeakerWorkerPodSecurity bool
	// RequireQueueName refuses Jobs that name no Kueue LocalQueue
	// (v1alpha1.KueueQueueNameLabel): with Kueue, every dispatched Job goes
	// through a queue, so none runs outside its namespace's Kueue quota.
	RequireQueueName bool

	evaluator policy.Evaluator
}

// NewDispatchPolicy builds the policy; reserved is added to AlwaysReserved.
func NewDispatchPolicy(namespaces labels.Selector, reserved []string, allowWeaker bool) (*DispatchPolicy, error) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the Pod Security evaluator: %w", err)
	}
	return &DispatchPolicy{
		Namespaces: namespaces, Reserved: sets.New(AlwaysReserved...).Insert(reserved...),
		AllowWeakerWorkerPodSecurity: allowWeaker, evaluator: evaluator,
	}, nil
}

// Rules named in refusals, so a user or an administrator knows which one
// applied.
const (
	RuleNamespaceOptIn = "namespace opt-in"
	RuleReserved       = "reserved namespace"
	RulePodSecurity    = "Pod Security"
	RuleQueueName      = "queue name"
	RuleBudget         = "budget"
)

// OverDispatchBudget refuses a Job that holds more than jobferry keeps of a
// Job it dispatches (cachebudget.ManagerJob, as the manager's cache counts
// it): at its creation (the validating webhook), and before its first
// placement outside Kueue (one grown since; the Job controller's
// heldToTheDispatchBudget). The rest of what the cache keeps of a Job
// (cachebudget.ManagerJobCached) is left to what placement and Kueue add.
func OverDispatchBudget(job *batchv1.Job) *Refusal {
	// Measured without its resourceVersion, which a Job being created
	// has not yet and a stored one has: the same Job passes both.
	measured := *job
	measured.ResourceVersion = ""
	if over := managercache.OverBudget(&measured, cachebudget.ManagerJob); over != nil {
		return &Refusal{RuleBudget, fmt.Sprintf("this Job holds more than jobferry keeps of a Job it dispatches: %s", over)}
	}
	return nil
}

// Refusal says why a Job may not be dispatched.
type Refusal struct {
	Rule    string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Admit decides whether a Job that names jobferry's manager may be
// dispatched from its namespace ns (nil when it does not exist): refused
// for a reserved namespace, a namespace not selected for dispatch, or pods
// that violate the Pod Security level the namespace enforces; warnings for
// the levels it only warns or audits at.
func (p *DispatchPolicy) Admit(job *batchv1.Job, ns *corev1.Namespace) (warnings []string, refusal *Refusal) {
	name := job.Namespace
	if p.Reserved.Has(name) || strings.HasPrefix(name, ReservedPrefix) {
		return nil, &Refusal{RuleReserved, fmt.Sprintf("namespace %q is reserved: jobferry never dispatches Jobs from or to it, on the manager or on a worker (reserved: %s, and every "+ReservedPrefix+"* namespace); leave spec.managedBy unset to run the Job on this cluster",
			name, strings.Join(sets.List(p.Reserved), ", "))}
	}
	if ns == nil || !p.Namespaces.Matches(labels.Set(ns.Labels)) {
		return nil, &Refusal{RuleNamespaceOptIn, fmt.Sprintf("namespace %q is not opted in to dispatch: jobferry dispatches Jobs (spec.managedBy %s) only from namespaces labelled %s; an administrator opts it in with `kubectl label namespace %s %s`, or leave spec.managedBy unset to run the Job on this cluster",
			name, v1alpha1.ManagerManagedBy, p.Namespaces.String(), name, p.Namespaces.String())}
	}
	if p.RequireQueueName && job.Labels[v1alpha1.KueueQueueNameLabel] == "" {
		return nil, &Refusal{RuleQueueName, fmt.Sprintf("jobferry dispatches Jobs only through Kueue here, and this Job names no LocalQueue: set its label %s to one of namespace %q's LocalQueues (`kubectl get localqueues -n %s`), or leave spec.managedBy unset to run the Job on this cluster",
			v1alpha1.KueueQueueNameLabel, name, name)}
	}
	nsPolicy, invalid := podSecurityOf(ns)
	template := &job.Spec.Template
	if result := policy.AggregateCheckResults(p.evaluator.EvaluatePod(nsPolicy.Enforce, &template.ObjectMeta, &template.Spec)); !result.Allowed {
		return nil, &Refusal{RulePodSecurity, fmt.Sprintf("violates PodSecurity %q: %s (enforced on namespace %q, and by jobferry on the pods this Job would run on a worker)%s",
			nsPolicy.Enforce.String(), result.ForbiddenDetail(), name, invalid)}
	}
	for _, lv := range []psapi.LevelVersion{nsPolicy.Warn, nsPolicy.Audit} {
		result := policy.AggregateCheckResults(p.evaluator.EvaluatePod(lv, &template.ObjectMeta, &template.Spec))
		warning := fmt.Sprintf("jobferry: the pods this Job would run on a worker would violate PodSecurity %q: %s", lv.String(), result.ForbiddenDetail())
		if !result.Allowed && !slices.Contains(warnings, warning) {
			warnings = append(warnings, warning)
		}
	}
	return warnings, nil
}

// defaultPodSecurity is Pod Security's own default for a namespace without
// labels: privileged, latest (a cluster's admission configuration can set
// other defaults, which jobferry cannot see).
func defaultPodSecurity() psapi.Policy {
	lv := psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}
	return psapi.Policy{Enforce: lv, Audit: lv, Warn: lv}
}

// WorkerNamespaceRejects says why a worker may not take a Job from the
// manager namespace managerNS: its namespace of the same name (workerNS; nil
// when jobferry would create it, with the manager's labels) enforces a weaker
// Pod Security level, or an older version of the same level, than the
// manager's. "" when it may.
func (p *DispatchPolicy) WorkerNamespaceRejects(managerNS, workerNS *corev1.Namespace) string {
	if workerNS == nil || managerNS == nil || p.AllowWeakerWorkerPodSecurity {
		return ""
	}
	want, wantInvalid := podSecurityOf(managerNS)
	have, haveInvalid := podSecurityOf(workerNS)
	weaker := psapi.CompareLevels(have.Enforce.Level, want.Enforce.Level) < 0 ||
		(have.Enforce.Level == want.Enforce.Level && want.Enforce.Level != psapi.LevelPrivileged && have.Enforce.Version.Older(want.Enforce.Version))
	if !weaker {
		return ""
	}
	return fmt.Sprintf("its namespace %s enforces PodSecurity %q%s, weaker than %q on the manager%s (an administrator may allow that with --allow-weaker-worker-pod-security)",
		workerNS.Name, have.Enforce.String(), haveInvalid, want.Enforce.String(), wantInvalid)
}

// podSecurityOf is the Pod Security policy namespace ns is held to, as Pod
// Security admission reads its labels, and, when some of them do not parse,
// a note saying which and what is used instead (restricted, latest, as Pod
// Security admission does for enforce); "" when they all parse.
func podSecurityOf(ns *corev1.Namespace) (psapi.Policy, string) {
	p, errs := psapi.PolicyToEvaluate(ns.Labels, defaultPodSecurity())
	if len(errs) == 0 {
		return p, ""
	}
	return p, fmt.Sprintf(" (namespace %s has Pod Security labels that do not parse: %v; evaluated as Pod Security admission does, with restricted and latest in their place)", ns.Name, errs.ToAggregate())
}
