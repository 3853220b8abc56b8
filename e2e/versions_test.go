//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/dispatch/dispatchtest"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// TestMixedKubernetesMinors runs jobferry across Kubernetes minors: a
// worker on the oldest minor the charts claim under a manager on the pinned
// one, and the reverse; and the worker's Job controller against the
// oldest minor's API server, compared with that minor's own.
func TestMixedKubernetesMinors(t *testing.T) {
	dir := outputDir(t)
	// The oldest minor the charts claim, built beside the pinned one by
	// hack/tools (bin/kubernetes-1.N/).
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := dispatchtest.OldestClaimedMinor(root)
	if err != nil {
		t.Fatal(err)
	}
	oldestMinor := claimed.String()
	t.Run("v"+oldestMinor+"-worker-under-the-pinned-manager", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		d := startOwnDispatchEnv(ctx, t, devenv.Options{
			Dir: filepath.Join(dir, "old-worker"),
			Workers: []localcluster.Spec{
				{Name: "worker-1", Kubernetes: oldestMinor, Pools: []localcluster.Pool{devenv.GeneralPool(2)}},
				{Name: "worker-2", Pools: []localcluster.Pool{devenv.GeneralPool(2)}},
			},
			ManagerArgs: []string{"--worker-health-interval=2s"},
		})
		versions := workerVersionsShown(ctx, t, d)
		t.Run("versioned-features-hold-on-each-minor", func(t *testing.T) { versionedFeaturesHold(ctx, t, d, versions) })
		t.Run("dispatch-and-status-copy", func(t *testing.T) { dispatchAcrossMinors(ctx, t, d, "worker-1") })
		t.Run("a-field-the-old-worker-drops-waits-for-a-newer-one", func(t *testing.T) { fieldWaitsForNewerWorker(ctx, t, d, versions) })
	})
	t.Run("pinned-worker-under-a-v"+oldestMinor+"-manager", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		d := startOwnDispatchEnv(ctx, t, devenv.Options{
			Dir:               filepath.Join(dir, "old-manager"),
			ManagerKubernetes: oldestMinor,
			Workers:           []localcluster.Spec{{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(2)}}},
			ManagerArgs:       []string{"--worker-health-interval=2s"},
		})
		workerVersionsShown(ctx, t, d)
		t.Run("dispatch-and-status-copy", func(t *testing.T) { dispatchAcrossMinors(ctx, t, d, "worker-1") })
	})
	t.Run("worker-job-controller-on-v"+oldestMinor, func(t *testing.T) {
		kcm, worker := startConformanceSides(t, oldestMinor)
		for _, sc := range conformanceScenarios() {
			t.Run(sc.name, func(t *testing.T) {
				if !sc.sequential {
					t.Parallel()
				}
				compareScenario(t, kcm, worker, sc, differOnOldestMinor[sc.name]...)
			})
		}
	})
}

// differOnOldestMinor are the steps of conformance scenarios whose upstream
// semantics changed after the oldest minor: jobferry's worker runs Jobs as
// the pinned minor's controller does on every minor (docs/reference/compatibility.md),
// so there it differs from the oldest minor's own, as each says. A
// suspended Job's startTime is cleared from v1.36 (feature gate
// MutableSchedulingDirectivesForSuspendedJobs) and set anew at the resume;
// v1.32's controller keeps it while suspended and resets it at the resume.
var differOnOldestMinor = map[string][]knownDifference{
	"suspend-resume": {
		{step: "suspended: pods deleted, not failed, startTime cleared", kcmStartTime: "kept", workerStartTime: "cleared"},
		{step: "resumed: startTime reset", kcmStartTime: "reset", workerStartTime: "set"},
	},
}

// workerVersionsShown waits until each WorkerCluster shows its worker's
// Kubernetes version, as the worker's API server says it, and `kubectl
// jobferry status` shows it too. It returns them by worker.
func workerVersionsShown(ctx context.Context, t *testing.T, d *dispatchEnv) map[string]*version.Version {
	t.Helper()
	want := map[string]string{}
	out := map[string]*version.Version{}
	for name, c := range d.workers {
		info, err := c.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		want[name] = info.GitVersion
		out[name] = version.MustParseGeneric(info.GitVersion)
	}
	got := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.WorkerClusterList
		if err := d.managerClient.List(ctx, &list); err != nil {
			return false, err
		}
		for _, wc := range list.Items {
			got[wc.Name] = wc.Status.KubernetesVersion
		}
		return cmp.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("WorkerClusters show versions %v, the workers say %v: %v", got, want, err)
	}
	table := mustPlugin(ctx, t, d.Manager.KubeconfigPath, "status")
	t.Logf("kubectl jobferry status:\n%s", table)
	for name, v := range want {
		if !strings.Contains(table, name) || !strings.Contains(table, v) {
			t.Errorf("kubectl jobferry status does not show %s on %s", name, v)
		}
	}
	return out
}

// versionedFeaturesHold checks dispatch.VersionedFeatures against the
// workers' API servers: each row's field, set by its sample, is kept by a
// server on its Since minor or later, and dropped by an older one — or
// refused as invalid, where the older server's validation knows the field
// enough to (a mirror's create would fail, saying so, rather than run
// without it).
func versionedFeaturesHold(ctx context.Context, t *testing.T, d *dispatchEnv, versions map[string]*version.Version) {
	for name, c := range d.workers {
		v := versions[name]
		for _, f := range dispatch.VersionedFeatures {
			job := sleepJob("default", "sample", time.Second)
			job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			dispatchtest.FeatureSamples[f.Gate](job)
			created, err := c.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			want := v.AtLeast(f.Since)
			if err != nil {
				if want || !apierrors.IsInvalid(err) {
					t.Errorf("%s (v%s): a Job with %s: %v", name, v, f.Field, err)
				} else {
					t.Logf("%s (v%s) refuses %s: %v", name, v, f.Field, err)
				}
				continue
			}
			kept := f.Uses(created)
			if kept != want {
				t.Errorf("%s (v%s) keeps %s: %v; dispatch.VersionedFeatures says it is kept from v%s", name, v, f.Field, kept, f.Since)
			}
		}
	}
}

// dispatchAcrossMinors runs an ordinary Job and an Indexed one with a
// success policy and a per-index backoff limit on the worker: both finish
// on the manager with the mirror's status, nothing added that the mirror's
// status does not have.
func dispatchAcrossMinors(ctx context.Context, t *testing.T, d *dispatchEnv, worker string) {
	ns := d.optedInNamespace(ctx, t)
	plain := sleepJob(ns, "plain", time.Second)
	indexed := sleepJob(ns, "indexed", time.Second)
	dispatchtest.FeatureSamples["JobSuccessPolicy"](indexed)
	indexed.Spec.Completions = ptr.To[int32](3)
	indexed.Spec.Parallelism = ptr.To[int32](3)
	indexed.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	indexed.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	for _, job := range []*batchv1.Job{plain, indexed} {
		workerClient := d.dispatchTo(ctx, t, job, worker)
		done := pollJob(ctx, t, d.manager, ns, job.Name, 2*time.Minute, "finished", func(j *batchv1.Job) bool {
			return hasCondition(j, batchv1.JobComplete) != nil || hasCondition(j, batchv1.JobFailed) != nil
		})
		if hasCondition(done, batchv1.JobComplete) == nil {
			t.Errorf("%s finished with %s, want Complete", job.Name, describeStatus(done))
		}
		mirror, err := workerClient.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(comparableStatus(mirror.Status), comparableStatus(done.Status)); diff != "" {
			t.Errorf("%s: the manager's status differs from the mirror's (-mirror +manager):\n%s", job.Name, diff)
		}
		if extra := fieldsAdded(t, mirror.Status, done.Status); len(extra) > 0 {
			t.Errorf("%s: the manager's status has %v, which the mirror's does not", job.Name, extra)
		}
		t.Logf("%s on %s: %s", job.Name, worker, describeStatus(done))
		if job == indexed && hasCondition(done, batchv1.JobSuccessCriteriaMet) == nil {
			t.Errorf("the Indexed Job with a success policy has no SuccessCriteriaMet condition")
		}
	}
	deleteJobsWaitNoMirrors(ctx, t, d, ns)
}

// fieldsAdded are the top-level status fields the manager's status sets
// and the mirror's does not.
func fieldsAdded(t *testing.T, mirror, manager batchv1.JobStatus) []string {
	t.Helper()
	keys := func(s batchv1.JobStatus) map[string]bool {
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for k := range m {
			out[k] = true
		}
		return out
	}
	have := keys(mirror)
	var extra []string
	for k := range keys(manager) {
		if !have[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	return extra
}

// fieldWaitsForNewerWorker: a Job with pod-level resources, which the old
// worker's API server would drop, waits naming that worker's version while
// only the old worker may take it, and goes to the newer worker once it may
// go anywhere, its field intact on the mirror.
func fieldWaitsForNewerWorker(ctx context.Context, t *testing.T, d *dispatchEnv, versions map[string]*version.Version) {
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "pod-level-resources", time.Second)
	dispatchtest.FeatureSamples["PodLevelResources"](job)
	job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=worker-1"}
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	oldVersion := "v" + versions["worker-1"].String()
	held := pollJob(ctx, t, d.manager, ns, job.Name, 30*time.Second, "waiting, naming the old worker's version", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return c != nil && c.Reason == policy.ReasonNoWorkerFits && strings.Contains(c.Message, oldVersion)
	})
	msg := suspendedCondition(held).Message
	t.Logf("the version-aware refusal: %s", msg)
	if !containsAll(msg, "worker-1: Kubernetes "+oldVersion+" there would drop", "spec.template.spec.resources", "kept from v1.34", "PodLevelResources") {
		t.Errorf("the waiting condition does not say which field the version drops: %q", msg)
	}
	events, err := d.manager.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job.Name})
	if err != nil {
		t.Fatal(err)
	}
	said := false
	for _, e := range events.Items {
		said = said || strings.Contains(e.Message, oldVersion)
	}
	if !said {
		t.Errorf("no Event on the Job names %s", oldVersion)
	}
	mergePatchJob(ctx, t, d.manager, ns, job.Name, `{"metadata":{"annotations":{"`+v1alpha1.ClusterSelectorAnnotation+`":null}}}`)
	placed := pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "placed", func(j *batchv1.Job) bool { return j.Annotations[v1alpha1.WorkerAnnotation] != "" })
	if w := placed.Annotations[v1alpha1.WorkerAnnotation]; w != "worker-2" {
		t.Fatalf("placed on %s, want worker-2 (the worker on v%s)", w, versions["worker-2"])
	}
	var mirror *batchv1.Job
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		m, err := d.workers["worker-2"].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		mirror = m
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no mirror on worker-2: %v", err)
	}
	if mirror.Spec.Template.Spec.Resources == nil {
		t.Errorf("the mirror on worker-2 lost spec.template.spec.resources")
	}
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	deleteJobsWaitNoMirrors(ctx, t, d, ns)
}
