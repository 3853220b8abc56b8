package dashboards

import "strings"

// The manager serves jobferry_jobs and jobferry_jobs_waiting from its cache on
// every replica, so those are read with max over replicas; the rest comes from
// the leader alone. The worker binaries' metrics carry the WorkerCluster's name
// in a `worker` label of their own (the worker chart's workerName,
// --worker-name).

const rate = "[$__rate_interval]"

// KueueWaitingReasons are the reasons of jobferry_jobs_waiting a Kueue user
// watches, KueueDispatchResults the results of jobferry_dispatch_total
// that only Kueue mode has (TestKueuePanelsReadTheManagersLabels).
var (
	KueueWaitingReasons  = []string{"queued", "no_worker_can_run", "pods_not_admitted"}
	KueueDispatchResults = []string{"requeued", "rejected"}
)

func quantiles(metric, by string) []Target {
	var out []Target
	for _, q := range []string{"0.5", "0.95", "0.99"} {
		out = append(out, Target{
			Expr:   "histogram_quantile(" + q + ", sum by (" + by + "le) (rate(" + metric + rate + ")))",
			Legend: "p" + q[2:] + legendSuffix(by),
		})
	}
	return out
}

func legendSuffix(by string) string {
	if by == "" {
		return ""
	}
	return " {{worker}}"
}

// All are jobferry's dashboards.
func All() []Dashboard {
	return []Dashboard{overview(), pipeline(), workers(), workerJobs()}
}

func overview() Dashboard {
	return Dashboard{
		UID: "jobferry-overview", Title: "jobferry / Overview",
		Description: "Manager Jobs by phase and worker, the dispatch rate and the Jobs that wait, by reason.",
		Panels: []Panel{
			{Title: "Manager Jobs by phase", Type: "timeseries", Description: "Manager Jobs of the selected workers (and unplaced ones when All) by phase.",
				Targets: []Target{{Expr: `max by (phase) (sum by (phase, instance) (jobferry_jobs{worker=~"$worker"}))`, Legend: "{{phase}}"}}},
			{Title: "Unfinished Jobs by worker", Type: "timeseries", Description: "Pending and running manager Jobs per worker; (unplaced) have no worker yet.",
				Targets: []Target{{Expr: `label_replace(max by (worker) (sum by (worker, instance) (jobferry_jobs{worker=~"$worker", phase=~"Pending|Running"})), "worker", "(unplaced)", "worker", "")`, Legend: "{{worker}}"}}},
			{Title: "Dispatch rate", Type: "timeseries", Unit: "ops", Description: "Dispatch attempts per second by worker and result (created, conflict, error, unschedulable).",
				Targets: []Target{{Expr: `sum by (worker, result) (rate(jobferry_dispatch_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{result}}"}}},
			{Title: "Waiting Jobs by reason", Type: "timeseries", Description: "Unfinished manager Jobs that do not run, by reason (no worker fits, worker lost, user suspended, invalid selector, ...).",
				Targets: []Target{{Expr: `max by (reason) (jobferry_jobs_waiting)`, Legend: "{{reason}}"}}},
			{Title: "Worker clusters connected", Type: "stat", Width: 6, Description: "Selected workers that are Connected now.",
				Targets: []Target{{Expr: `sum(max by (worker) (jobferry_workercluster_connected{worker=~"$worker"}))`}}},
			{Title: "Jobs waiting for room", Type: "stat", Width: 6, Description: "Manager Jobs no worker has room for now.",
				Targets: []Target{{Expr: `max(jobferry_jobs_waiting{reason="no_worker_fits"})`}}},
		},
	}
}

func pipeline() Dashboard {
	return Dashboard{
		UID: "jobferry-dispatch", Title: "jobferry / Dispatch pipeline",
		Description: "How fast Jobs get to a worker and their status back, what is refused, and the manager's work queue.",
		Panels: []Panel{
			{Title: "Dispatch duration (created → mirror created)", Type: "timeseries", Unit: "s",
				Description: "Time from a manager Job's creation to its mirror's creation on a worker, including the wait for a worker with room.",
				Targets:     quantiles("jobferry_dispatch_duration_seconds_bucket", "")},
			{Title: "Status-copy lag (mirror change seen → manager Job written)", Type: "timeseries", Unit: "s",
				Targets: quantiles("jobferry_status_sync_lag_seconds_bucket", "")},
			{Title: "Status copies by result", Type: "timeseries", Unit: "ops", Description: "Copies of mirror status to manager Jobs per second: written, conflict (retried), rejected, error.",
				Targets: []Target{{Expr: `sum by (worker, result) (rate(jobferry_status_sync_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{result}}"}}},
			{Title: "Status writes rejected (1h)", Type: "stat", Width: 6, Description: "Status copies the API server rejected in the last hour; anything but 0 is a jobferry bug.",
				Targets: []Target{{Expr: `sum(increase(jobferry_status_write_rejected_total[1h])) or vector(0)`}}},
			{Title: "Waiting Jobs woken", Type: "stat", Width: 6, Unit: "ops", Description: "Jobs that waited for room and were woken by a capacity or worker change, per second.",
				Targets: []Target{{Expr: `sum(rate(jobferry_waiting_jobs_woken_total` + rate + `))`}}},
			{Title: "Placement rejections by worker and reason", Type: "timeseries", Unit: "ops", Width: 24,
				Description: "Workers turned down when placing a Job, per second: not_connected, cordoned, cluster_selector, insufficient_capacity, ...",
				Targets:     []Target{{Expr: `sum by (worker, reason) (rate(jobferry_placement_rejections_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{reason}}"}}},
			{Title: "Kueue-queued Jobs waiting, by reason", Type: "timeseries", Description: "Kueue mode: manager Jobs queued in Kueue and not admitted yet (queued: quota or jobferry's check pending), and those jobferry's check rejected: no worker could ever run them (no_worker_can_run), or their namespace refuses their pods (pods_not_admitted, which Jobs Kueue does not queue count too).",
				Targets: []Target{{Expr: `max by (reason) (jobferry_jobs_waiting{reason=~"` + strings.Join(KueueWaitingReasons, "|") + `"})`, Legend: "{{reason}}"}}},
			{Title: "Kueue dispatch results", Type: "timeseries", Unit: "ops", Description: "Kueue mode, per second: placements let go because Kueue took the quota back (requeued, by worker), and Workloads whose jobferry check was Rejected: no worker could ever run their Job, or its namespace refuses its pods (rejected).",
				Targets: []Target{{Expr: `sum by (worker, result) (rate(jobferry_dispatch_total{result=~"` + strings.Join(KueueDispatchResults, "|") + `"}` + rate + `))`, Legend: "{{worker}} {{result}}"}}},
			{Title: "Work queue depth", Type: "timeseries", Description: "Items waiting in the manager's Job and WorkerCluster work queues.",
				Targets: []Target{{Expr: `sum by (name) (workqueue_depth{name=~"job|workercluster"})`, Legend: "{{name}}"}}},
			{Title: "Work queue wait and reconcile time (p99)", Type: "timeseries", Unit: "s",
				Targets: []Target{
					{Expr: `histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{name=~"job|workercluster"}` + rate + `)))`, Legend: "wait {{name}}"},
					{Expr: `histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{controller=~"job|workercluster"}` + rate + `)))`, Legend: "reconcile {{controller}}"},
				}},
			{Title: "Reconcile errors", Type: "timeseries", Unit: "ops", Description: "Reconciles that returned an error, per second.",
				Targets: []Target{{Expr: `sum by (controller) (rate(controller_runtime_reconcile_errors_total{controller=~"job|workercluster"}` + rate + `))`, Legend: "{{controller}}"}}},
		},
	}
}

func workers() Dashboard {
	capacity := func(resource string) []Target {
		return []Target{
			{Expr: `max by (worker, pool) (jobferry_workercluster_pool_free{worker=~"$worker", resource="` + resource + `"})`, Legend: "{{worker}}/{{pool}} free"},
			{Expr: `max by (worker, pool) (jobferry_workercluster_pool_allocatable{worker=~"$worker", resource="` + resource + `"})`, Legend: "{{worker}}/{{pool}} allocatable"},
		}
	}
	return Dashboard{
		UID: "jobferry-workers", Title: "jobferry / Worker clusters",
		Description: "Connection, capacity per node pool, credentials and the manager's requests, per worker cluster.",
		Panels: []Panel{
			{Title: "Connected", Type: "timeseries", Description: "1 while the manager is connected to the worker.",
				Targets: []Target{{Expr: `max by (worker) (jobferry_workercluster_connected{worker=~"$worker"})`, Legend: "{{worker}}"}}},
			{Title: "Credential expires in", Type: "timeseries", Unit: "s", Description: "Time left on each worker's token (none for credentials without expiry); renewed after 80 % of its lifetime.",
				Targets: []Target{{Expr: `min by (worker) (jobferry_workercluster_credential_expiry_timestamp_seconds{worker=~"$worker"}) - time()`, Legend: "{{worker}}"}}},
			{Title: "Pod slots free vs allocatable", Type: "timeseries", Targets: capacity("pods")},
			{Title: "CPU free vs allocatable", Type: "timeseries", Description: "Cores.", Targets: capacity("cpu")},
			{Title: "Memory free vs allocatable", Type: "timeseries", Unit: "bytes", Targets: capacity("memory")},
			{Title: "Schedulable nodes per pool", Type: "timeseries",
				Targets: []Target{{Expr: `max by (worker, pool) (jobferry_workercluster_pool_nodes{worker=~"$worker"})`, Legend: "{{worker}}/{{pool}}"}}},
			{Title: "Worker Warnings on manager Jobs", Type: "timeseries", Unit: "ops",
				Description: "Warning Events of mirrors and their pods (FailedScheduling, evictions, failed starts) recorded on manager Jobs, per second, by worker and object kind.",
				Targets:     []Target{{Expr: `sum by (worker, kind) (rate(jobferry_workercluster_warnings_forwarded_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{kind}}"}}},
			{Title: "Requests to the workers' API servers", Type: "timeseries", Unit: "reqps", Width: 24, Description: "By worker, verb and HTTP code (error: no answer).",
				Targets: []Target{{Expr: `sum by (worker, verb, code) (rate(jobferry_workercluster_requests_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{verb}} {{code}}"}}},
		},
	}
}

func workerJobs() Dashboard {
	return Dashboard{
		UID: "jobferry-worker-jobs", Title: "jobferry / Worker Job controller",
		Description: "The jobferry worker's Job controller on each worker cluster (its metrics carry the WorkerCluster's name in a worker label: the worker chart's workerName).",
		Panels: []Panel{
			{Title: "Job syncs by action", Type: "timeseries", Unit: "ops",
				Targets: []Target{{Expr: `sum by (worker, action) (rate(jobferry_worker_job_syncs_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{action}}"}}},
			{Title: "Job sync duration", Type: "timeseries", Unit: "s",
				Targets: quantiles(`jobferry_worker_job_sync_duration_seconds_bucket{worker=~"$worker"}`, "worker, ")},
			{Title: "Pods created", Type: "timeseries", Unit: "ops", Description: "By reason: new, or replacing a failed or terminating pod.",
				Targets: []Target{{Expr: `sum by (worker, reason) (rate(jobferry_worker_job_pods_creation_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{reason}}"}}},
			{Title: "Pods finished", Type: "timeseries", Unit: "ops",
				Targets: []Target{{Expr: `sum by (worker, result) (rate(jobferry_worker_job_pods_finished_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{result}}"}}},
			{Title: "Jobs finished by result and reason (1h)", Type: "timeseries",
				Targets: []Target{{Expr: `sum by (worker, result, reason) (increase(jobferry_worker_jobs_finished_total{worker=~"$worker"}[1h]))`, Legend: "{{worker}} {{result}} {{reason}}"}}},
			{Title: "Terminated pods with the tracking finalizer", Type: "timeseries", Unit: "ops", Description: "Seen (add) and released (delete), per second.",
				Targets: []Target{{Expr: `sum by (worker, event) (rate(jobferry_worker_terminated_pods_tracking_finalizer_total{worker=~"$worker"}` + rate + `))`, Legend: "{{worker}} {{event}}"}}},
		},
	}
}
