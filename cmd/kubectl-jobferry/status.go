package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// managerLease is the manager's leader election Lease (cmd/manager).
const managerLease = "jobferry-manager"

// managerPodSelector selects the manager chart's pods.
const managerPodSelector = "app.kubernetes.io/name=jobferry-manager"

func newStatusCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the manager's leader and readiness, and per worker: connection, rights, cordon, credential expiry, pools and Jobs by phase",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkReportFormat(output); err != nil {
				return err
			}
			m, err := o.manager()
			if err != nil {
				return err
			}
			report, err := readStatus(cmd.Context(), m, o.systemNamespace, time.Now())
			if err != nil {
				return err
			}
			if printed, err := printReport(o.streams.Out, report, output); printed || err != nil {
				return err
			}
			printStatus(o.streams.Out, report, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: tables)")
	return cmd
}

// statusReport is what `status` shows; -o json|yaml prints it as it is.
type statusReport struct {
	Manager managerStatus  `json:"manager"`
	Workers []workerStatus `json:"workers"`
	// UnplacedJobs counts dispatched Jobs on no worker yet, by phase.
	UnplacedJobs map[string]int `json:"unplacedJobs"`
}

type managerStatus struct {
	// Leader is the holder of the leader election Lease; empty when there
	// is none (a single replica without leader election).
	Leader string `json:"leader,omitempty"`
	// LeaderRenewed is when the leader last renewed the Lease.
	LeaderRenewed *metav1.Time `json:"leaderRenewed,omitempty"`
	// LeaderCurrent: the Lease was renewed within its duration.
	LeaderCurrent bool `json:"leaderCurrent"`
	// Pods and ReadyPods count the manager chart's pods; none when the
	// manager runs outside the cluster.
	Pods      int `json:"pods"`
	ReadyPods int `json:"readyPods"`
}

type workerStatus struct {
	Name              string `json:"name"`
	Connected         string `json:"connected"`
	ConnectedReason   string `json:"connectedReason,omitempty"`
	ConnectedMessage  string `json:"connectedMessage,omitempty"`
	Authorized        string `json:"authorized"`
	AuthorizedMessage string `json:"authorizedMessage,omitempty"`
	Cordoned          bool   `json:"cordoned"`
	// KubernetesVersion is the worker's, as the manager last read it.
	KubernetesVersion   string       `json:"kubernetesVersion,omitempty"`
	CredentialExpiresAt *metav1.Time `json:"credentialExpiresAt,omitempty"`
	CredentialRenewal   string       `json:"credentialRenewal,omitempty"`
	Pools               []poolStatus `json:"pools"`
	// Jobs counts the manager Jobs placed here by phase (Pending, Running,
	// Succeeded, Failed).
	Jobs map[string]int `json:"jobs"`
}

type poolStatus struct {
	Name        string            `json:"name"`
	Nodes       int32             `json:"nodes"`
	Free        map[string]string `json:"free"`
	Allocatable map[string]string `json:"allocatable"`
}

var phases = []string{jobstatus.PhasePending, jobstatus.PhaseRunning, jobstatus.PhaseSucceeded, jobstatus.PhaseFailed}

func readStatus(ctx context.Context, m *managerClients, systemNamespace string, now time.Time) (*statusReport, error) {
	var workers v1alpha1.WorkerClusterList
	if err := m.client.List(ctx, &workers); err != nil {
		return nil, fmt.Errorf("listing WorkerClusters: %w", err)
	}
	jobs, err := m.kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Jobs on the manager: %w", err)
	}
	lease, err := m.kube.CoordinationV1().Leases(systemNamespace).Get(ctx, managerLease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the manager's leader Lease %s/%s: %w", systemNamespace, managerLease, err)
	}
	pods, err := m.kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: managerPodSelector})
	if err != nil {
		return nil, fmt.Errorf("listing the manager's pods in %s: %w", systemNamespace, err)
	}
	return buildStatus(workers.Items, jobs.Items, lease, pods.Items, now), nil
}

// buildStatus assembles the report from what was read.
func buildStatus(workers []v1alpha1.WorkerCluster, jobs []batchv1.Job, lease *coordinationv1.Lease, pods []corev1.Pod, now time.Time) *statusReport {
	report := &statusReport{UnplacedJobs: map[string]int{}}
	if lease != nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
		report.Manager.Leader = *lease.Spec.HolderIdentity
		if renewed := lease.Spec.RenewTime; renewed != nil {
			report.Manager.LeaderRenewed = &metav1.Time{Time: renewed.Time}
			held := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
			report.Manager.LeaderCurrent = now.Before(renewed.Add(held))
		}
	}
	for _, p := range pods {
		report.Manager.Pods++
		if slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			report.Manager.ReadyPods++
		}
	}
	byWorker := map[string]map[string]int{}
	for i := range jobs {
		job := &jobs[i]
		if ptr.Deref(job.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy {
			continue
		}
		worker := job.Annotations[v1alpha1.WorkerAnnotation]
		if worker == "" && !jobstatus.Finished(job.Status) {
			report.UnplacedJobs[jobstatus.Phase(job.Status)]++
			continue
		}
		if byWorker[worker] == nil {
			byWorker[worker] = map[string]int{}
		}
		byWorker[worker][jobstatus.Phase(job.Status)]++
	}
	slices.SortFunc(workers, func(a, b v1alpha1.WorkerCluster) int { return strings.Compare(a.Name, b.Name) })
	for _, wc := range workers {
		ws := workerStatus{Name: wc.Name, Connected: "Unknown", Authorized: "Unknown", Cordoned: wc.Spec.Cordoned, KubernetesVersion: wc.Status.KubernetesVersion, Jobs: map[string]int{}}
		if c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionConnected); c != nil {
			ws.Connected, ws.ConnectedReason, ws.ConnectedMessage = string(c.Status), c.Reason, c.Message
		}
		if c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionAuthorized); c != nil {
			ws.Authorized, ws.AuthorizedMessage = string(c.Status), c.Message
		}
		if c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionCredentialRenewal); c != nil {
			ws.CredentialRenewal = c.Reason
		}
		if cred := wc.Status.Credential; cred != nil {
			ws.CredentialExpiresAt = cred.ExpiresAt
		}
		if wc.Status.Capacity != nil {
			for _, p := range wc.Status.Capacity.Pools {
				ws.Pools = append(ws.Pools, poolStatus{Name: p.Name, Nodes: p.Nodes, Free: quantities(p.Free), Allocatable: quantities(p.Allocatable)})
			}
		}
		for phase, n := range byWorker[wc.Name] {
			ws.Jobs[phase] = n
		}
		report.Workers = append(report.Workers, ws)
	}
	return report
}

func quantities(list corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}

func printStatus(out io.Writer, r *statusReport, now time.Time) {
	leader := "none (no leader election Lease: a single replica without --leader-elect?)"
	if r.Manager.Leader != "" {
		leader = r.Manager.Leader
		if r.Manager.LeaderRenewed != nil {
			leader += fmt.Sprintf(" (renewed %s ago)", duration.HumanDuration(now.Sub(r.Manager.LeaderRenewed.Time)))
		}
		if !r.Manager.LeaderCurrent {
			leader += ", lease EXPIRED: no replica leads"
		}
	}
	ready := "no manager pods in the cluster (running outside it?)"
	if r.Manager.Pods > 0 {
		ready = fmt.Sprintf("%d/%d pods ready", r.Manager.ReadyPods, r.Manager.Pods)
	}
	fmt.Fprintf(out, "Manager:  leader: %s; %s\n\n", leader, ready)

	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "WORKER\tVERSION\tCONNECTED\tAUTHORIZED\tCORDONED\tCREDENTIAL EXPIRES\tPENDING\tRUNNING\tSUCCEEDED\tFAILED")
	for _, ws := range r.Workers {
		connected := ws.Connected
		if ws.ConnectedReason != "" {
			connected += " (" + ws.ConnectedReason + ")"
		}
		expires := "never"
		if ws.CredentialExpiresAt != nil {
			expires = fmt.Sprintf("%s (in %s)", ws.CredentialExpiresAt.UTC().Format(time.RFC3339), duration.HumanDuration(ws.CredentialExpiresAt.Sub(now)))
			if ws.CredentialRenewal == v1alpha1.ReasonCredentialExpiring || ws.CredentialRenewal == v1alpha1.ReasonCredentialExpired {
				expires += " " + ws.CredentialRenewal
			}
		}
		version := ws.KubernetesVersion
		if version == "" {
			version = "<unknown>"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\t%s\t%d\t%d\t%d\t%d\n", ws.Name, version, connected, ws.Authorized, ws.Cordoned, expires,
			ws.Jobs[jobstatus.PhasePending], ws.Jobs[jobstatus.PhaseRunning], ws.Jobs[jobstatus.PhaseSucceeded], ws.Jobs[jobstatus.PhaseFailed])
	}
	w.Flush()
	if len(r.Workers) == 0 {
		fmt.Fprintln(out, "no WorkerClusters: register one with `kubectl jobferry join`")
	}
	var unplaced []string
	for _, phase := range phases {
		if n := r.UnplacedJobs[phase]; n > 0 {
			unplaced = append(unplaced, fmt.Sprintf("%s %d", phase, n))
		}
	}
	if len(unplaced) > 0 {
		fmt.Fprintf(out, "\nJobs on no worker yet: %s\n", strings.Join(unplaced, ", "))
	}

	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "WORKER\tPOOL\tNODES\tCPU FREE/ALLOCATABLE\tMEMORY FREE/ALLOCATABLE\tOTHER FREE/ALLOCATABLE")
	for _, ws := range r.Workers {
		if len(ws.Pools) == 0 {
			fmt.Fprintf(w, "%s\t<no capacity summary>\t\t\t\t\n", ws.Name)
		}
		for _, p := range ws.Pools {
			var other []string
			for _, name := range sortedKeys(p.Allocatable) {
				if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) && name != string(corev1.ResourcePods) {
					other = append(other, fmt.Sprintf("%s %s/%s", name, orZero(p.Free[name]), p.Allocatable[name]))
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s/%s\t%s/%s\t%s\n", ws.Name, p.Name, p.Nodes,
				orZero(p.Free["cpu"]), orZero(p.Allocatable["cpu"]), orZero(p.Free["memory"]), orZero(p.Allocatable["memory"]), strings.Join(other, ", "))
		}
	}
	w.Flush()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
