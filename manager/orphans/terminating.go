package orphans

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/jobferry/jobferry/manager/workers"
)

// collectMirrorsOfTerminatingNamespaces deletes this installation's
// mirrors in the worker namespaces being deleted. The namespace's deletion
// would delete them, but only after their pods (ordered namespace
// deletion, on by default since Kubernetes 1.33), and a Job controller holds the finalizer
// of an Indexed Job's failed pod under backoffLimitPerIndex until a
// replacement carries its failure count — a replacement the namespace
// refuses: the namespace, the pod and the mirror then wait for each other
// for ever, and the manager Job with them. A Job being deleted has its
// pods released. The manager then sees its mirror gone, with its
// namespace, and dispatches the Job again. One read of each namespace
// holding mirrors (reused 10 s), at each collection.
func (gc *Collector) collectMirrorsOfTerminatingNamespaces(ctx context.Context, worker string, conn workers.Conn, mirrors []*metav1.ObjectMeta) {
	log := logf.FromContext(ctx).WithValues("worker", worker)
	terminating := map[string]bool{}
	for _, m := range mirrors {
		if ctx.Err() != nil {
			return
		}
		if m.DeletionTimestamp != nil || !workers.MayDelete(m, gc.ManagerID, conn.OriginShared()) || conn.DeletedMirrors().Recently(m.UID) {
			continue
		}
		going, read := terminating[m.Namespace]
		if !read {
			ns, err := conn.Namespace(ctx, m.Namespace)
			if err != nil {
				// Said once a collection: the namespace's other mirrors
				// wait for the next one.
				log.Error(err, "reading the namespace of mirrors", "namespace", m.Namespace)
				terminating[m.Namespace] = false
				continue
			}
			going = ns != nil && ns.DeletionTimestamp != nil
			terminating[m.Namespace] = going
		}
		if !going {
			continue
		}
		// Not remembered as fenced: the manager Job's Event says its
		// mirror went with its namespace, as it did. In the foreground:
		// the mirror stays until its pods are gone, so the Job's next
		// attempt never runs beside them (found by the chaos run, whose
		// one-mirror-running rule caught the pods of a mirror deleted in
		// the background still running when the next attempt's started).
		mirror := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
		uid := m.UID
		err := conn.Client().Delete(ctx, mirror, client.PropagationPolicy(metav1.DeletePropagationForeground), client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.Error(err, "deleting a mirror in a namespace being deleted", "mirror", client.ObjectKeyFromObject(mirror))
			continue
		}
		if err == nil {
			log.Info("deleted a mirror in a namespace being deleted, so that its pods are released and the namespace goes", "mirror", client.ObjectKeyFromObject(mirror))
		}
	}
}
