// Package managercache says what the manager caches of its own cluster —
// Jobs without what it never reads — and how it indexes manager Jobs by the
// worker they are placed on, for the Job and WorkerCluster controllers.
package managercache

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/sharedstrings"
	"github.com/jobferry/jobferry/mirror"
)

// CacheOptions are the manager cluster cache's: the kubeconfig Secrets of
// the manager's namespace only, not every Secret of the cluster; manager
// Jobs without what only their mirror needs and Jobs other controllers
// manage reduced to what tells them apart (see trimJob); no
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

// trimJob keeps a manager Job without its managedFields and its selector
// (a mirror gets its own from its worker's API server; the manager's writes
// of the spec are patches of what changed), without the labels the API
// server derives from its UID and name (a Job created without labels gets
// its template's: four map entries with the Job's UID and name, a sixth
// of the cached Job; a mirror never carries them, and the manager's writes
// of metadata and status are patches, which leave them be), with its pod
// template trimmed (trimTemplate) and its repeated strings shared with the
// other cached Jobs (package sharedstrings); and of any other Job only its
// identity: the Job controller skips it (isManagerJob), and no reader of
// the cache needs more.
func trimJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	if v1alpha1.IsManagerJob(job) {
		job.ManagedFields, job.Spec.Selector = nil, nil
		if job.Labels = mirror.WithoutGeneratedLabels(job.Labels); len(job.Labels) == 0 {
			job.Labels = nil
		}
		trimTemplate(&job.Spec.Template)
		sharedstrings.Job(job)
		return job, nil
	}
	return &batchv1.Job{
		TypeMeta: job.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: job.Name, UID: job.UID,
			ResourceVersion: job.ResourceVersion, Generation: job.Generation,
			CreationTimestamp: job.CreationTimestamp, DeletionTimestamp: job.DeletionTimestamp,
		},
		Spec: batchv1.JobSpec{ManagedBy: job.Spec.ManagedBy},
	}, nil
}

// trimTemplate drops from a cached manager Job's pod template what no
// reader of the cache uses, so the manager's memory does not grow with the
// size of its users' pod specs: the labels the API server derives from the
// Job's UID and name (a mirror never carries them), and of every container
// what neither placement (requests, restart policy) nor the dispatch
// policy's Pod Security check (security contexts, ports) reads — image,
// command, arguments, environment, mounts, probes, lifecycle. The mirror is
// built from the template as the API server holds it (a read at its
// creation), and the manager's writes cannot take the rest away: metadata
// and spec go as patches of what changed, and the API server takes a
// status update's spec from the stored Job.
func trimTemplate(t *corev1.PodTemplateSpec) {
	if t.Labels = mirror.WithoutGeneratedLabels(t.Labels); len(t.Labels) == 0 {
		t.Labels = nil
	}
	for _, containers := range [][]corev1.Container{t.Spec.InitContainers, t.Spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.Image, c.ImagePullPolicy, c.WorkingDir = "", "", ""
			c.Command, c.Args, c.Env, c.EnvFrom = nil, nil, nil, nil
			c.VolumeMounts, c.VolumeDevices = nil, nil
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
			c.TerminationMessagePath, c.TerminationMessagePolicy = "", ""
		}
	}
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
		job, ok := obj.(*batchv1.Job)
		if !ok || !v1alpha1.IsManagerJob(job) {
			return nil
		}
		return []string{placementKey(job)}
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
