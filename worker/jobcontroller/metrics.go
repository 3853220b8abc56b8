package jobcontroller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/jobferry/jobferry/internal/jobindex"
)

// Metrics mirror the upstream job_controller_* ones (same labels and
// meaning) under the jobferry_worker_ prefix, so one dashboard can show both
// controllers side by side.
var (
	syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jobferry_worker_job_sync_duration_seconds",
		Help:    "Time taken to sync a Job, by completion mode, result and action (reconciling, tracking, pods_created, pods_deleted).",
		Buckets: prometheus.ExponentialBuckets(0.004, 2, 15),
	}, []string{"completion_mode", "result", "action"})
	syncsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_job_syncs_total",
		Help: "Job syncs by completion mode, result and action.",
	}, []string{"completion_mode", "result", "action"})
	jobsFinishedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_jobs_finished_total",
		Help: "Finished Jobs by completion mode, result (succeeded, failed) and reason.",
	}, []string{"completion_mode", "result", "reason"})
	podsFinishedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_job_pods_finished_total",
		Help: "Finished pods counted in Job status, by completion mode and result (succeeded, failed).",
	}, []string{"completion_mode", "result"})
	podsCreationTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_job_pods_creation_total",
		Help: "Pods created, by reason (new, recreate_terminating_or_failed, recreate_failed) and status (succeeded, failed).",
	}, []string{"reason", "status"})
	terminatedPodsTrackingFinalizerTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_terminated_pods_tracking_finalizer_total",
		Help: "Terminated pods of managed Jobs seen with the tracking finalizer (event=add) and their finalizer removal or deletion (event=delete).",
	}, []string{"event"})
	podFailuresHandledByPolicyTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_pod_failures_handled_by_failure_policy_total",
		Help: "Failed pods matched by a podFailurePolicy rule, by the rule's action (FailJob, Ignore, Count).",
	}, []string{"action"})
	finishedIndexesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_job_finished_indexes_total",
		Help: "Finished indexes of Indexed Jobs, by status (succeeded, failed) and backoffLimit (global, perIndex).",
	}, []string{"status", "backoffLimit"})
)

// Actions of a sync, as upstream.
const (
	actionReconciling = "reconciling"
	actionTracking    = "tracking"
	actionPodsCreated = "pods_created"
	actionPodsDeleted = "pods_deleted"
)

// Reasons for a pod creation, as upstream.
const (
	creationNew                         = "new"
	creationRecreateTerminatingOrFailed = "recreate_terminating_or_failed"
	creationRecreateFailed              = "recreate_failed"
)

var registerMetricsOnce sync.Once

// registerMetrics adds the metrics to reg (controller-runtime's registry
// when nil) once per process, when a controller is set up rather than on
// import.
func registerMetrics(reg prometheus.Registerer) {
	if reg == nil {
		reg = metrics.Registry
	}
	registerMetricsOnce.Do(func() {
		reg.MustRegister(Collectors()...)
		initMetrics()
	})
}

// initMetrics makes the counters' usual series exist at 0 from the start:
// a series first scraped at 1 has increase() and rate() count nothing, so
// the first Job to fail would not show on a dashboard.
func initMetrics() {
	finished := map[string][]string{
		"succeeded": {batchv1.JobReasonCompletionsReached, batchv1.JobReasonSuccessPolicy},
		"failed": {batchv1.JobReasonBackoffLimitExceeded, batchv1.JobReasonDeadlineExceeded, batchv1.JobReasonPodFailurePolicy,
			batchv1.JobReasonMaxFailedIndexesExceeded, batchv1.JobReasonFailedIndexes},
	}
	for _, mode := range []batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion} {
		for result, reasons := range finished {
			podsFinishedTotal.WithLabelValues(string(mode), result)
			for _, reason := range reasons {
				jobsFinishedTotal.WithLabelValues(string(mode), result, reason)
			}
		}
	}
	for _, event := range []string{"add", "delete"} {
		terminatedPodsTrackingFinalizerTotal.WithLabelValues(event)
	}
}

// Collectors are the Job controller's metrics, for registration and for the
// metrics reference (hack/metricsdoc).
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{syncDuration, syncsTotal, jobsFinishedTotal, podsFinishedTotal,
		podsCreationTotal, terminatedPodsTrackingFinalizerTotal, finishedIndexesTotal, podFailuresHandledByPolicyTotal}
}

func (r *Reconciler) recordFinished(job *batchv1.Job, c *batchv1.JobCondition) {
	mode := completionModeLabel(job)
	if c.Type == batchv1.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			r.Recorder.Event(job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		r.Recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
		jobsFinishedTotal.WithLabelValues(mode, "succeeded", c.Reason).Inc()
		return
	}
	r.Recorder.Event(job, corev1.EventTypeWarning, c.Reason, c.Message)
	jobsFinishedTotal.WithLabelValues(mode, "failed", c.Reason).Inc()
}

func recordPodsFinished(job *batchv1.Job, before batchv1.JobStatus) {
	mode := completionModeLabel(job)
	var succeeded int
	if isIndexed(job) {
		completions := int(ptr.Deref(job.Spec.Completions, 0))
		if job.Status.CompletedIndexes != before.CompletedIndexes {
			succeeded = jobindex.Parse(job.Status.CompletedIndexes, completions).Total() - jobindex.Parse(before.CompletedIndexes, completions).Total()
		}
		limit := "global"
		if hasBackoffLimitPerIndex(job) {
			limit = "perIndex"
			if job.Status.FailedIndexes != nil && !ptr.Equal(job.Status.FailedIndexes, before.FailedIndexes) {
				failed := jobindex.Parse(*job.Status.FailedIndexes, completions).Total() - jobindex.Parse(ptr.Deref(before.FailedIndexes, ""), completions).Total()
				if failed > 0 {
					finishedIndexesTotal.WithLabelValues("failed", limit).Add(float64(failed))
				}
			}
		}
		finishedIndexesTotal.WithLabelValues("succeeded", limit).Add(float64(succeeded))
	} else {
		succeeded = int(job.Status.Succeeded - before.Succeeded)
	}
	podsFinishedTotal.WithLabelValues(mode, "succeeded").Add(float64(succeeded))
	podsFinishedTotal.WithLabelValues(mode, "failed").Add(float64(job.Status.Failed - before.Failed))
}

func recordPodsCreation(job *batchv1.Job, s *syncState, succeeded, failed int32) {
	reason := creationNew
	if ptr.Deref(job.Spec.PodReplacementPolicy, batchv1.TerminatingOrFailed) == batchv1.Failed && s.failed > 0 {
		reason = creationRecreateFailed
	} else if s.failed > 0 || s.terminating > 0 {
		reason = creationRecreateTerminatingOrFailed
	}
	// Upstream counts every attempt as succeeded as well; we count each
	// attempt once, by its outcome.
	if n := succeeded; n > 0 {
		podsCreationTotal.WithLabelValues(reason, "succeeded").Add(float64(n))
	}
	if failed > 0 {
		podsCreationTotal.WithLabelValues(reason, "failed").Add(float64(failed))
	}
}
