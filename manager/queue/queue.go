package queue

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/manager/queue/workload"
)

// RBAC of the Job controller's reads and write of Workloads (generated into
// the manager chart's Kueue rules, like every rule of the manager).
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=patch

// OwnerIndex indexes Workloads by the UID of the Job that controls them.
const OwnerIndex = "jobferry.dev/workload-owner"

// IndexWorkloads registers OwnerIndex with the manager's cache.
func IndexWorkloads(ctx context.Context, indexer client.FieldIndexer) error {
	err := indexer.IndexField(ctx, &kueue.Workload{}, OwnerIndex, func(obj client.Object) []string {
		owner := metav1.GetControllerOf(obj)
		if owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() {
			return nil
		}
		return []string{string(owner.UID)}
	})
	if err != nil {
		return fmt.Errorf("indexing Workloads by their Job: %w", err)
	}
	return nil
}

// Queue reads queued Jobs' Workloads from the manager's cache and writes
// jobferry's check on them.
type Queue struct {
	// Client reads from the cache (with OwnerIndex) and writes to the API
	// server.
	Client client.Client
	Clock  clock.Clock
}

// View reads the Workload of a Job that names a LocalQueue.
func (q *Queue) View(ctx context.Context, job *batchv1.Job) (workload.View, error) {
	var owned kueue.WorkloadList
	if err := q.Client.List(ctx, &owned, client.InNamespace(job.Namespace), client.MatchingFields{OwnerIndex: string(job.UID)}); err != nil {
		return workload.View{}, fmt.Errorf("reading the Workload of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	ours, err := q.checks(ctx)
	if err != nil {
		return workload.View{}, err
	}
	return workload.ViewOf(workload.QueueName(job), workload.Current(owned.Items), ours), nil
}

// checks are the names of the AdmissionChecks jobferry answers.
func (q *Queue) checks(ctx context.Context) (map[string]bool, error) {
	var list kueue.AdmissionCheckList
	if err := q.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing AdmissionChecks: %w", err)
	}
	ours := map[string]bool{}
	for _, ac := range list.Items {
		if ac.Spec.ControllerName == ControllerName {
			ours[ac.Name] = true
		}
	}
	return ours, nil
}

// SetCheck gives jobferry's check on the Workload v summarises the state u
// says, applied server-side as FieldOwner: only that entry of
// status.admissionChecks is written, and it is jobferry's alone. It applies
// only to the Workload as v read it: a Conflict says Kueue changed it since.
func (q *Queue) SetCheck(ctx context.Context, namespace string, v workload.View, u workload.CheckUpdate) error {
	obj, err := checkEntry(namespace, v.Workload, v.Version, v.Check, u, metav1.NewTime(q.Clock.Now()))
	if err != nil {
		return err
	}
	if err := q.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("setting check %s of %s to %s: %w", v.Check, describe(namespace, v.Workload), u.State, err)
	}
	return nil
}
