package jobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/tenantlimits"
	"github.com/jobferry/jobferry/mirror"
)

// Explain answers "where would this Job go now?" for the inspection API
// (kubectl jobferry explain): the decision placement would take on the
// views it reads (workerViews), with every worker's verdict
// (dispatch.Explain). It writes nothing, assumes nothing and takes no lock
// placement takes: an explanation need not agree with a placement made the
// same moment, and a tenant asking must not slow placements.
//
// Held says first what would hold the Job before any worker is looked at:
// the dispatch policy refusing it (a namespace not opted in, reserved, or
// whose Pod Security its pods violate; no queue name where Kueue is
// required) and, for a stored Job that waits for its first placement, what
// place checks next: its namespace refusing its pods (the pod dry-run,
// remembered per generation) or its ResourceQuota full. A Job sent whole
// is not created yet: its pods cannot be dry-run (the dry-run reads the
// Job from the API server), and its quota is the API server's to judge
// when it is created.
//
// An invalid Job (its cluster selector) is a dispatch.InvalidJob; any
// other error a failure to read.
func (r *JobReconciler) Explain(ctx context.Context, job *batchv1.Job, stored bool) (dispatch.Explanation, error) {
	ns, err := r.namespaces().Get(ctx, job.Namespace)
	if err != nil {
		return dispatch.Explanation{}, err
	}
	if _, refusal := r.Policy.Admit(job, ns); refusal != nil {
		return dispatch.Explanation{Held: fmt.Sprintf("jobferry would not dispatch it (%s): %s", refusal.Rule, refusal.Message)}, nil
	}
	if _, over := managercache.OverBudgetOf(job); stored && over {
		// The cache keeps only the identity of a Job grown past its
		// budget: read it whole, as placement would.
		whole := &batchv1.Job{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), whole); err != nil {
			return dispatch.Explanation{}, err
		}
		job = whole
	}
	if !stored || (waitsForFirstPlacement(job) && heldToTheDispatchBudget(job, r.Queue != nil)) {
		if refusal := admission.OverDispatchBudget(job); refusal != nil {
			return dispatch.Explanation{Held: fmt.Sprintf("jobferry would not dispatch it (%s): %s", refusal.Rule, refusal.Message)}, nil
		}
	}
	placed := policy.AsUserWroteIt(job)
	var notes []string
	queued := r.Queue != nil && workload.QueueName(job) != ""
	if queued {
		notes = append(notes, fmt.Sprintf("Kueue queues this Job (LocalQueue %s): it is placed once Kueue admits it, and Kueue's quota bounds it", workload.QueueName(job)))
	}
	if stored && waitsForFirstPlacement(job) {
		var held string
		if held, placed, err = r.heldBeforePlacement(ctx, job, placed, queued); err != nil || held != "" {
			return dispatch.Explanation{Held: held, Notes: notes}, err
		}
	}
	workers, err := r.workerViews(ctx, placed, ns)
	if err != nil {
		return dispatch.Explanation{}, err
	}
	e, err := dispatch.Explain(placed, workers)
	e.Notes = append(notes, e.Notes...)
	return e, err
}

// waitsForFirstPlacement: a Job of jobferry's, not finished, on no worker:
// the only one place dry-runs pods and charges quota for. Its worker
// annotation is read unsealed: a tenant who forges it on their own Job
// only spares the manager the dry-run.
func waitsForFirstPlacement(job *batchv1.Job) bool {
	return v1alpha1.IsManagerJob(job) && job.Annotations[v1alpha1.WorkerAnnotation] == "" && !policy.IsFinished(job)
}

// heldBeforePlacement is what place checks of a waiting Job before it looks
// at the workers: whether its namespace admits its pods (then the Job as
// admission leaves its pods, as place places it) and, for a Job Kueue does
// not queue, whether its quota has room beside the namespace's dispatched
// Jobs.
func (r *JobReconciler) heldBeforePlacement(ctx context.Context, job, asWritten *batchv1.Job, queued bool) (held string, placed *batchv1.Job, err error) {
	pods, err := r.admitPods(ctx, job)
	if err != nil {
		return "", nil, err
	}
	if pods.Refused != "" {
		return policy.PodsNotAdmitted(job.Namespace, pods.Refused).Message, nil, nil
	}
	placed = asWritten
	if len(pods.Admitted.Containers)+len(pods.Admitted.InitContainers) > 0 {
		placed = asWritten.DeepCopy()
		mirror.WithAdmitted(&placed.Spec.Template.Spec, pods.Admitted)
	}
	if queued {
		return "", placed, nil
	}
	charge := tenantlimits.Charged{QuotaCharge: pods.Admitted.Charge, Pods: dispatch.PodsAtOnce(job)}
	quota, err := r.quotaRefuses(ctx, job, charge, nil)
	if err != nil || quota == nil {
		return "", placed, err
	}
	return quota.Message, placed, nil
}
