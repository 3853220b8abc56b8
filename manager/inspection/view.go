package inspection

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/eventtime"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/managercache"
)

// The decisions of the inspection API, pure: where a Job is, whether a Job
// on the worker is its mirror, what of its pods and Events is shown and
// which containers' logs are read.

// placement is where the manager placed a Job, as jobferry's own state on
// it says.
type placement struct {
	worker, attempt string
	// mirrorUID is the mirror the manager created; empty on a Job placed
	// before the manager recorded it.
	mirrorUID types.UID
}

// placementOf reads the Job's placement from jobferry's sealed state, or
// says why there is none to read: a Job jobferry does not dispatch, one
// whose state jobferry did not write (a tenant cannot point the manager's
// reads at another worker or another Job), one not placed.
func placementOf(job *batchv1.Job, key jobstate.Key) (placement, string) {
	if !v1alpha1.IsManagerJob(job) {
		return placement{}, fmt.Sprintf("the Job is not dispatched by jobferry (spec.managedBy is not %s)", v1alpha1.ManagerManagedBy)
	}
	if why, over := managercache.OverBudgetOf(job); over {
		return placement{}, "jobferry keeps this Job as its identity only and does not act on it (" + why + "): nothing is read on a worker for it"
	}
	if verdict, _ := jobstate.Verify(job, key); verdict == jobstate.Tampered {
		return placement{}, "jobferry's state on the Job was not written by jobferry (its seal does not match): nothing is read on a worker for it"
	}
	p := placement{
		worker:    job.Annotations[v1alpha1.WorkerAnnotation],
		attempt:   job.Annotations[v1alpha1.DispatchAttemptAnnotation],
		mirrorUID: types.UID(job.Annotations[v1alpha1.MirrorUIDAnnotation]),
	}
	if p.worker == "" {
		return p, "the Job is on no worker"
	}
	return p, ""
}

// notMirror says why the Job found on the worker under the manager Job's
// name is not its current mirror, or "" when it is: it must stand for this
// manager Job (origin label and UID), and be the very Job the manager
// created when it recorded one.
func notMirror(job *batchv1.Job, p placement, found *batchv1.Job, origin string) string {
	switch {
	case found.Labels[v1alpha1.OriginLabel] != origin || found.Labels[v1alpha1.OriginUIDLabel] != string(job.UID):
		return fmt.Sprintf("the Job %s/%s on worker %s is not this Job's mirror (it was not created by jobferry for it)", found.Namespace, found.Name, p.worker)
	case p.mirrorUID != "" && found.UID != p.mirrorUID:
		return fmt.Sprintf("the Job %s/%s on worker %s is not this Job's current mirror (uid %s, the manager created %s)", found.Namespace, found.Name, p.worker, found.UID, p.mirrorUID)
	}
	return ""
}

// noMirrorNote says why a placed Job has no mirror on its worker.
func noMirrorNote(job *batchv1.Job, worker string) string {
	note := fmt.Sprintf("no mirror on worker %s", worker)
	if jobstatus.Finished(job.Status) {
		note += ": the Job has finished, and a manager run with --delete-finished-mirrors deletes its mirror once the status is copied"
	}
	return note
}

// uidsOf are the mirror's and its pods' UIDs: the objects whose Events are
// shown.
func uidsOf(mirror *batchv1.Job, pods []corev1.Pod) map[types.UID]bool {
	uids := map[types.UID]bool{mirror.UID: true}
	for _, p := range pods {
		uids[p.UID] = true
	}
	return uids
}

// newestEvents are the newest max of events, oldest first, and whether
// any were left out.
func newestEvents(events []corev1.Event, max int) ([]corev1.Event, bool) {
	events = slices.Clone(events)
	eventtime.Sort(events)
	if len(events) > max {
		return events[len(events)-max:], true
	}
	return events, false
}

// logQuery is a log request's parameters, checked.
type logQuery struct {
	pod, container  string
	allPods, follow bool
	limitBytes      int64
}

// parseLogQuery reads the log subresource's parameters; the byte limit is
// the caller's, within the manager's maxBytes.
func parseLogQuery(values url.Values, maxBytes int64) (logQuery, error) {
	q := logQuery{pod: values.Get(inspectionv1alpha1.LogPod), container: values.Get(inspectionv1alpha1.LogContainer), limitBytes: maxBytes}
	for name, into := range map[string]*bool{inspectionv1alpha1.LogAllPods: &q.allPods, inspectionv1alpha1.LogFollow: &q.follow} {
		if v := values.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return q, fmt.Errorf("%s=%q: want true or false", name, v)
			}
			*into = b
		}
	}
	if v := values.Get(inspectionv1alpha1.LogLimitBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return q, fmt.Errorf("%s=%q: want a positive number of bytes", inspectionv1alpha1.LogLimitBytes, v)
		}
		q.limitBytes = min(n, maxBytes)
	}
	if q.pod != "" && q.allPods {
		return q, fmt.Errorf("%s and %s name different pods: give one", inspectionv1alpha1.LogPod, inspectionv1alpha1.LogAllPods)
	}
	return q, nil
}

// logTarget is one container of one pod of the mirror: what a log stream
// needs of it, so that a followed log holds no pod.
type logTarget struct {
	namespace, pod, container string
	// ended: the pod writes no more (podEnded).
	ended bool
}

// logTargets picks the containers to read among the mirror's pods (oldest
// first): of the pod named (which must be one of them: no other pod of the
// namespace is ever read), of every pod, or of one — a running pod, else
// the newest; of one container or all.
func logTargets(pods []corev1.Pod, q logQuery) ([]logTarget, error) {
	if len(pods) == 0 {
		return nil, fmt.Errorf("the mirror has no pods")
	}
	var chosen []corev1.Pod
	switch {
	case q.pod != "":
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == q.pod })
		if i < 0 {
			return nil, fmt.Errorf("pod %q is not a pod of the Job's mirror", q.pod)
		}
		chosen = pods[i : i+1]
	case q.allPods:
		chosen = pods
	default:
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		if i < 0 {
			i = len(pods) - 1
		}
		chosen = pods[i : i+1]
	}
	var out []logTarget
	for i := range chosen {
		for _, c := range chosen[i].Spec.Containers {
			if q.container == "" || c.Name == q.container {
				out = append(out, logTarget{namespace: chosen[i].Namespace, pod: chosen[i].Name, container: c.Name, ended: podEnded(&chosen[i])})
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pod chosen of the mirror has a container %q", q.container)
	}
	return out, nil
}

// podEnded: the pod will write no more log lines.
func podEnded(p *corev1.Pod) bool {
	return p == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
