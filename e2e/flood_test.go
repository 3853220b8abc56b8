//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/workers"
)

// floodEvents and floodEventBytes: issue 23's flood, 1,000 Warning Events of
// 1 MB each (core/v1 Events without eventTime have no size limit of their
// own; the API server's is 3 MB a request).
const (
	floodEvents     = 1000
	floodEventBytes = 1 << 20
)

// floodJobs: Jobs of about floodEventBytes each that carry jobferry's
// origin label, made by the same worker user, their bytes in what the
// manager's mirror cache used to keep of such a Job (floodJob).
const floodJobs = 1000

// managerMemoryLimit is the chart's memory request for the manager: what it
// must stay within, flood or not (its limit is 1 GiB).
const managerMemoryLimit = 256 << 20

// Anyone who may create Events (and Jobs) in one worker namespace cannot
// exhaust the manager's memory: a user allowed only that creates 1,000
// Warning Events of 1 MB there while the manager watches the worker, and
// 1,000 Jobs of about 1 MiB with jobferry's origin label (and another
// manager's id, so they stay, cached) in the fields the mirror cache keeps
// (floodJob), and the manager's peak resident memory (VmHWM, over the
// whole run) stays within its request. The manager still forwards what it
// should (a Warning about a mirror's pod made after the flood reaches the
// manager Job), dispatches (a Job created after it runs), and says on the
// WorkerCluster that it kept the Jobs as their identity only.
func TestWorkerEventsFloodDoesNotExhaustTheManager(t *testing.T) {
	ctx := t.Context()
	d := startOwnDispatchEnv(ctx, t, devenv.Options{Dir: outputDir(t),
		Workers: []localcluster.Spec{{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(1)}}}})
	env := d.Env
	worker := d.workers["worker-1"]
	before := procMemory(t, env.ManagerProcess.PID)

	// A mirror whose pod the last Warning is about.
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "watched", 10*time.Minute)
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})

	// mallory may create Events in namespace flood of the worker, nothing else.
	const floodNS = "flood"
	if _, err := worker.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floodNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindRole(ctx, t, worker, floodNS, "mallory", "event-writer",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}})
	malloryConfig := env.Workers[0].RESTConfig()
	// Protobuf: a Job of thousands of small entries costs the API server
	// less to decode so (the test's time, not what it proves).
	malloryConfig.ContentType = "application/vnd.kubernetes.protobuf"
	mallory := impersonate(t, malloryConfig, "mallory")

	var peak sync.WaitGroup
	stop := make(chan struct{})
	maxRSS := before.rss
	peak.Add(1)
	go func() {
		defer peak.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if m, err := readProcMemory(env.ManagerProcess.PID); err == nil && m.rss > maxRSS {
					maxRSS = m.rss
				}
			}
		}
	}()
	message := strings.Repeat("x", floodEventBytes)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range floodEvents {
		g.Go(func() error {
			ev := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Namespace: floodNS, Name: fmt.Sprintf("flood-%04d", i)},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: floodNS, Name: fmt.Sprintf("pod-%04d-x7k2p", i)},
				Type:           corev1.EventTypeWarning, Reason: "Flood", Message: message,
			}
			_, err := mallory.CoreV1().Events(floodNS).Create(gctx, ev, metav1.CreateOptions{})
			return err
		})
	}
	for i := range floodJobs {
		g.Go(func() error {
			j := floodJob(floodNS, fmt.Sprintf("forged-%04d", i), floodEventBytes)
			_, err := mallory.BatchV1().Jobs(floodNS).Create(gctx, j, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("mallory's Events and Jobs: %v", err)
	}
	created := time.Since(start)

	// The manager is still forwarding: the Warning after the flood arrives.
	pods := jobPods(ctx, t, worker, ns, job.Name)
	if len(pods) != 1 {
		t.Fatalf("%d pods of the mirror, want 1", len(pods))
	}
	last := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: "after-flood-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pods[0].Name, UID: pods[0].UID},
		Type:           corev1.EventTypeWarning, Reason: "AfterTheFlood", Message: "made after the flood",
	}
	if _, err := worker.CoreV1().Events(ns).Create(ctx, last, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(ctx, t, d.manager, ns, job.Name, "AfterTheFlood", 2*time.Minute, "worker worker-1, pod "+ns+"/"+pods[0].Name)
	// The WorkerCluster says the manager kept mallory's Jobs as their
	// identity only (cluster-scoped objects' Events are in default).
	overBudget := waitEvent(ctx, t, d.manager, metav1.NamespaceDefault, "worker-1", workers.ReasonObjectsOverBudget, 2*time.Minute,
		"are kept as their name, UID and jobferry's labels only", "The latest: Job "+floodNS+"/forged-", "over its budget of 256 entries and 16 KiB")
	t.Logf("WorkerCluster worker-1: %s: %s", overBudget.Reason, overBudget.Message)
	// And that it left out all but the most a namespace of mallory's Jobs
	// (another installation's ID, as far as it can tell).
	notCached := waitEvent(ctx, t, d.manager, metav1.NamespaceDefault, "worker-1", workers.ReasonForeignJobsNotCached, 2*time.Minute,
		"were not cached: the manager keeps at most 64 such Jobs a namespace", "The latest: Job "+floodNS+"/forged-")
	t.Logf("WorkerCluster worker-1: %s: %s", notCached.Reason, notCached.Message)
	// And dispatching: a Job created after the flood runs.
	next := sleepJob(ns, "after-flood", time.Minute)
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, next, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, next.Name, 2*time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	close(stop)
	peak.Wait()
	after := procMemory(t, env.ManagerProcess.PID)
	t.Logf("%d Warning Events and %d Jobs with jobferry's labels, of %d bytes each, created in %s; manager RSS %d MiB before, %d MiB after, peak sampled %d MiB, VmHWM %d MiB",
		floodEvents, floodJobs, floodEventBytes, created.Round(time.Second), before.rss>>20, after.rss>>20, maxRSS>>20, after.hwm>>20)
	if after.hwm > managerMemoryLimit {
		t.Errorf("the manager's peak resident memory was %d MiB, over its %d MiB", after.hwm>>20, managerMemoryLimit>>20)
	}
}

// floodJob is a suspended Job with jobferry's origin label (and another
// manager's id, so no manager deletes it) holding about size bytes in the
// parts of a Job the manager's mirror cache read before it kept each within
// a budget: jobferry.dev/ labels, the pod template's node selector,
// tolerations, scheduling gates and node affinity, a fifth each. (Its
// status, written by whoever may update jobs/status, the unit tests fill:
// writing 1,000 statuses of 1 MiB more doubles what the worker's etcd
// takes.) Its managedBy names no controller that runs, so nothing on the
// worker acts on it.
func floodJob(ns, name string, size int) *batchv1.Job {
	part := size / 5
	value := func(i int) string { return fmt.Sprintf("%06d-%s", i, strings.Repeat("v", 56)) } // 63 bytes, a label value's most
	j := sleepJob(ns, name, time.Hour)
	j.Spec.Suspend = ptrTo(true)
	j.Spec.ManagedBy = ptrTo("mallory.example/nobody")
	j.Labels = map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: name,
		v1alpha1.DispatchAttemptLabel: "1", v1alpha1.ManagerIDLabel: "mallory"}
	spec := &j.Spec.Template.Spec
	spec.NodeSelector = map[string]string{}
	var values []string
	for i := 0; i*84 < part; i++ {
		j.Labels[fmt.Sprintf("jobferry.dev/x-%06d", i)] = value(i)
		spec.NodeSelector[fmt.Sprintf("example.com/n-%06d", i)] = value(i)
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("example.com/t-%06d", i), Operator: corev1.TolerationOpEqual, Value: value(i), Effect: corev1.TaintEffectNoSchedule})
		spec.SchedulingGates = append(spec.SchedulingGates, corev1.PodSchedulingGate{Name: fmt.Sprintf("example.com/g-%06d-%s", i, strings.Repeat("g", 54))})
		values = append(values, value(i))
	}
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "example.com/a", Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
	return j
}

// processMemory is a process's resident memory now (rss) and its peak
// (hwm, VmHWM), in bytes.
type processMemory struct{ rss, hwm int64 }

func procMemory(t *testing.T, pid int) processMemory {
	t.Helper()
	m, err := readProcMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readProcMemory(pid int) (processMemory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return processMemory{}, err
	}
	defer f.Close()
	var m processMemory
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.hwm = kb << 10
		}
	}
	return m, s.Err()
}
