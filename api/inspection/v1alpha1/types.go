// Package v1alpha1 is inspection.jobferry.dev/v1alpha1: the worker-side view
// of a manager Job, served by the manager as an aggregated API, so a user
// who may read a manager Job sees its mirror, the mirror's pods, their
// Events and their logs on the worker with their own rights on the manager
// cluster — never with a worker credential of their own.
//
//	GET /apis/inspection.jobferry.dev/v1alpha1/namespaces/NS/jobs/NAME      a JobInspection
//	GET /apis/inspection.jobferry.dev/v1alpha1/namespaces/NS/jobs/NAME/log  the logs, text/plain
//	GET /apis/inspection.jobferry.dev/v1alpha1/namespaces/NS/jobs/NAME/placement  a PlacementExplanation
//	POST /apis/inspection.jobferry.dev/v1alpha1/namespaces/NS/placements  a batch/v1 Job in, a PlacementExplanation out
//
// The API server authenticates the caller and authorizes `get` on
// jobs.inspection.jobferry.dev (and jobs/log); the manager then asks it
// whether the caller may `get` the batch/v1 Job itself, and serves only that
// Job's current mirror. A placement explanation says where the Job would go
// now: the API server authorizes `get` on jobs/placement (a Job that exists)
// or `create` on placements (a Job not created yet, sent whole); the manager
// then asks whether the caller may get that Job, or create Jobs in the
// namespace. The types are plain JSON: no client needs them in a
// scheme.
package v1alpha1

import (
	"net/url"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the inspection API.
var GroupVersion = schema.GroupVersion{Group: "inspection.jobferry.dev", Version: "v1alpha1"}

// Resources of the API: JobsResource (get) with its log and placement
// subresources, and PlacementsResource (create).
const (
	JobsResource         = "jobs"
	LogSubresource       = "log"
	PlacementSubresource = "placement"
	PlacementsResource   = "placements"
)

// Kind of the JobsResource.
const Kind = "JobInspection"

// PlacementKind is the kind of a placement explanation.
const PlacementKind = "PlacementExplanation"

// MaxPlacementRequestBytes bounds the Job a POST to placements may send:
// the API server's own limit on a request body, so any Job that could be
// created can be explained.
const MaxPlacementRequestBytes = 3 << 20

// PlacementExplanation says where a Job would go now, as the manager would
// place it on what it knows of the workers this moment (the decision
// placement takes, not a guess): the worker and pool it would pick and why,
// every worker's verdict, and for a Job no worker takes the nearest change
// that would let each take it.
type PlacementExplanation struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta names the Job (its namespace, name or generateName, and
	// UID when it exists).
	metav1.ObjectMeta `json:"metadata"`
	// Held says what would hold the Job before any worker is looked at:
	// its namespace does not admit its pods, or its ResourceQuota has no
	// room. Empty when nothing would.
	Held string `json:"held,omitempty"`
	// Worker and Pool are where the Job would go now; empty when nowhere.
	Worker string `json:"worker,omitempty"`
	Pool   string `json:"pool,omitempty"`
	// Reason is the placement's reason for that worker, or why no worker
	// takes the Job.
	Reason string `json:"reason,omitempty"`
	// Never says why no worker could ever run the Job as the workers are;
	// empty when one might.
	Never string `json:"never,omitempty"`
	// Workers are every worker's verdict, by name.
	Workers []WorkerVerdict `json:"workers,omitempty"`
	// Notes say what the answer could not take into account.
	Notes []string `json:"notes,omitempty"`
}

// WorkerVerdict is what one worker makes of the Job.
type WorkerVerdict struct {
	Name string `json:"name"`
	// Chosen: the Job would go there.
	Chosen bool `json:"chosen,omitempty"`
	// Code is why the worker passes the Job over (a placement reason code,
	// docs/reference/names.md); empty when it would take it.
	Code string `json:"code,omitempty"`
	// Reason says it in words; for a worker that would take the Job but
	// another fits better, why the other.
	Reason string `json:"reason,omitempty"`
	// Change is the nearest change that would let the worker take the Job.
	Change string `json:"change,omitempty"`
}

// JobInspection is what the worker shows of a manager Job: its current
// mirror, the mirror's pods (oldest first) and the worker's Events of both
// (oldest first). What could not be read is said in Notes, not fatal: a Job
// on no worker yet, a worker not reachable, a worker that does not let the
// manager read pods or Events.
type JobInspection struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta names the manager Job (its namespace, name and UID).
	metav1.ObjectMeta `json:"metadata"`
	// Worker is the WorkerCluster the Job is placed on; empty when none.
	Worker string `json:"worker,omitempty"`
	// Attempt is the dispatch attempt of that placement.
	Attempt string `json:"attempt,omitempty"`
	// Mirror is the Job's mirror on the worker.
	Mirror *batchv1.Job `json:"mirror,omitempty"`
	// Pods of the mirror, oldest first; at most the newest MaxPods.
	Pods []corev1.Pod `json:"pods,omitempty"`
	// Events of the mirror and its pods on the worker, oldest first; at
	// most the newest MaxEvents.
	Events []corev1.Event `json:"events,omitempty"`
	Notes  Notes          `json:"notes,omitempty"`
}

// Notes say why a part of a JobInspection is missing or cut.
type Notes struct {
	Mirror string `json:"mirror,omitempty"`
	Pods   string `json:"pods,omitempty"`
	Events string `json:"events,omitempty"`
}

// Query parameters of the log subresource.
const (
	// LogContainer names one container (default: every container).
	LogContainer = "container"
	// LogPod names one pod of the mirror (default: a running pod, else the
	// newest).
	LogPod = "pod"
	// LogAllPods ("true") reads every pod of the mirror, each line
	// prefixed with [pod/NAME/CONTAINER].
	LogAllPods = "allPods"
	// LogFollow ("true") streams the logs as they are written, until the
	// pods end or the manager's limit on a stream's lifetime.
	LogFollow = "follow"
	// LogLimitBytes caps the bytes returned (the manager's own cap is the
	// most).
	LogLimitBytes = "limitBytes"
)

// PlacementsPath is the API path a Job not created yet is sent to for its
// explanation.
func PlacementsPath(namespace string) string {
	return "/apis/" + GroupVersion.Group + "/" + GroupVersion.Version + "/namespaces/" + url.PathEscape(namespace) + "/" + PlacementsResource
}

// Path is the API path of a manager Job's inspection, or of its log
// subresource (LogSubresource, PlacementSubresource) when one is named.
func Path(namespace, name, subresource string) string {
	p := "/apis/" + GroupVersion.Group + "/" + GroupVersion.Version + "/namespaces/" + url.PathEscape(namespace) + "/" + JobsResource + "/" + url.PathEscape(name)
	if subresource != "" {
		p += "/" + subresource
	}
	return p
}
