// Package managercache says what the manager caches of its own cluster —
// Jobs without what it never reads — and how it indexes manager Jobs by the
// worker they are placed on, for the Job and WorkerCluster controllers.
package managercache

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/sharedstrings"
)

// CacheOptions are the manager cluster cache's: the kubeconfig Secrets of
// the manager's namespace only, not every Secret of the cluster; manager
// Jobs without what only their mirror needs and Jobs other controllers
// manage reduced to what tells them apart (trimJob, cachedJob); no
// managedFields on anything, as nothing reads them. The manager's memory
// then grows with the Jobs it dispatches, not with the cluster.
func CacheOptions(namespace string) cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{namespace: {}}},
			&batchv1.Job{}:   {Transform: trimJob},
		},
	}
}

// trimJob is the cache's transform of a Job: a manager Job as a cachedJob
// (trim) without its managedFields, its annotations but jobferry's
// (stateAnnotations), and the labels the API server derives from its
// UID and name (a Job created without labels gets its template's: four map
// entries with the Job's UID and name, a sixth of the cached Job; a mirror
// never carries them, and the manager's writes of metadata and status are
// patches, which leave them be), with its repeated strings shared with the
// other cached Jobs (package sharedstrings); a manager Job over its budget
// (cachedJob.overCacheBudget) as its identity only; and of any other Job only its
// identity (newCachedOtherJob).
func trimJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	if !v1alpha1.IsManagerJob(job) {
		return newCachedOtherJob(job), nil
	}
	trim(job)
	sharedstrings.Job(job)
	c := newCachedManagerJob(job)
	if over := c.overCacheBudget(); over != nil {
		return newCachedOverBudget(job, over), nil
	}
	return c, nil
}

// PlacementIndex indexes manager Jobs by the worker they are placed on, and
// UnplacedKey for those not placed, so finding the Jobs a worker's change
// or a capacity change may unblock reads only those.
const PlacementIndex = "jobferry.dev/placement"

// UnplacedKey is the PlacementIndex value of a manager Job not placed.
const UnplacedKey = "-"

// IndexJobs registers PlacementIndex with the manager cluster's cache.
func IndexJobs(ctx context.Context, indexer client.FieldIndexer) error {
	err := indexer.IndexField(ctx, &batchv1.Job{}, PlacementIndex, func(obj client.Object) []string {
		job, ok := JobWithoutTemplate(obj)
		if !ok || !v1alpha1.IsManagerJob(&job) {
			return nil
		}
		if _, over := OverBudgetOf(&job); over {
			// Kept as its identity only and not acted on: neither placed
			// nor waiting for room.
			return nil
		}
		return []string{placementKey(&job)}
	})
	if err != nil {
		return fmt.Errorf("indexing manager Jobs by placement: %w", err)
	}
	return nil
}

func placementKey(job *batchv1.Job) string {
	if worker := job.Annotations[v1alpha1.WorkerAnnotation]; worker != "" {
		return worker
	}
	return UnplacedKey
}
