package managercache

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/directives"
	"github.com/jobferry/jobferry/internal/heapretained"
	"github.com/jobferry/jobferry/manager/cachebudget"
)

// maxRetainedManagerJob is the most the cache keeps of one manager Job,
// whatever its author put in it, measured on the heap (the budgets are in
// entries and encoded bytes): most of it a status as large as a worker's
// Job controller writes (cachebudget.JobStatus).
const maxRetainedManagerJob = 2 << 20

// What the cache keeps of manager Jobs filled at random, from small to far
// over the budget, measured on the heap (heapretained), and of Jobs that
// hold all the budget allows.
func TestManagerJobCacheKeepsAtMostItsBudget(t *testing.T) {
	const n = 100
	over := 0
	total := heapretained.Bytes(n, func(i int) any {
		job := &batchv1.Job{}
		heapretained.Filler(int64(i), 1+i%24, (i%6)*400).Fill(job)
		job.Spec.ManagedBy = ptr.To(v1alpha1.ManagerManagedBy)
		job.Namespace, job.Name, job.UID = "team", fmt.Sprintf("j-%d", i), types.UID(fmt.Sprint(i))
		return job
	}, func(obj any) any {
		c := cacheOf(t, obj.(*batchv1.Job))
		if _, tombstone := OverBudgetOf(c); tombstone {
			over++
		}
		return c
	})
	// A second fill, of fewer but longer lists, so that single fields
	// (owner references, overhead, volumes) go over on their own.
	whole := n - over
	if whole == 0 || over == 0 {
		t.Fatalf("%d of %d Jobs over the budget: the fill does not span it", over, n)
	}
	per := total / whole
	t.Logf("%d of %d manager Jobs filled at random kept whole; %d bytes kept per Job kept whole", whole, n, per)
	if per > maxRetainedManagerJob {
		t.Errorf("the cache keeps %d bytes per manager Job, over %d", per, maxRetainedManagerJob)
	}

	// Jobs holding all their budgets allow: in the fields whose entries
	// cost the most (tolerations, or quantities: the pod's overhead; their
	// status's conditions), and in bytes (the status's completed indexes).
	own := map[string]func(*batchv1.Job){
		"tolerations": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Tolerations = make([]corev1.Toleration, cachebudget.ManagerJobCached.Entries-8)
		},
		"overhead": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Overhead = corev1.ResourceList{}
			for i := range cachebudget.ManagerJobCached.Entries - 16 {
				j.Spec.Template.Spec.Overhead[corev1.ResourceName(fmt.Sprintf("r%d", i))] = *resource.NewQuantity(int64(i), resource.DecimalSI)
			}
		},
	}
	status := map[string]func(*batchv1.JobStatus){
		"conditions": func(s *batchv1.JobStatus) {
			s.Conditions = make([]batchv1.JobCondition, cachebudget.JobStatus.Entries-8)
		},
		"completed indexes": func(s *batchv1.JobStatus) { s.CompletedIndexes = strings.Repeat("1", cachebudget.JobStatus.Bytes-64) },
	}
	for ownName, fillOwn := range own {
		for statusName, fillStatus := range status {
			per = heapretained.Bytes(n/4, func(i int) any {
				job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("full-%d", i), UID: types.UID(fmt.Sprint(i))},
					Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)}}
				fillOwn(job)
				fillStatus(&job.Status)
				return job
			}, func(obj any) any {
				c := cacheOf(t, obj.(*batchv1.Job))
				if why, tombstone := OverBudgetOf(c); tombstone {
					t.Fatalf("a Job within its budgets was kept as its identity only: %s", why)
				}
				return c
			}) / (n / 4)
			t.Logf("Jobs with all the %s and %s their budgets allow: %d bytes kept per Job", ownName, statusName, per)
			if per > maxRetainedManagerJob {
				t.Errorf("the cache keeps %d bytes per manager Job at its budgets (%s, %s), over %d", per, ownName, statusName, maxRetainedManagerJob)
			}
		}
	}
}

// cacheOf is what the cache keeps of job.
func cacheOf(t *testing.T, job *batchv1.Job) *cachedJob {
	t.Helper()
	c, err := trimJob(job)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*cachedJob)
}

// A manager Job over its budget is kept as its identity (and jobferry's
// finalizer, so its deletion still reaches its mirrors), saying why; one
// within it keeps jobferry's annotations only.
func TestManagerJobOverBudgetIsKeptAsItsIdentity(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "j", UID: "u1", Finalizers: []string{v1alpha1.MirrorFinalizer, "example.com/other"},
			Annotations: map[string]string{v1alpha1.WorkerAnnotation: "w1", "kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("a", 200<<10)}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c"}}}}},
	}
	// The marker written on the Job (by whoever may bypass the state
	// policy, or through the status subresource) is not kept: only the
	// cache sets it.
	job.Annotations[overBudgetAnnotation] = "forged"
	within := Handed(job)
	if _, over := OverBudgetOf(within); over || len(within.Annotations) != 1 || within.Annotations[v1alpha1.WorkerAnnotation] != "w1" {
		t.Errorf("a Job whose large annotation the cache does not keep: over %v, annotations %d keys", over, len(within.Annotations))
	}
	job.Spec.Template.Spec.Tolerations = make([]corev1.Toleration, cachebudget.ManagerJobCached.Entries+1)
	cached := Handed(job)
	why, over := OverBudgetOf(cached)
	if !over || !strings.HasPrefix(why, "spec.template.spec.tolerations takes what the manager would keep of it to 2052 entries") {
		t.Fatalf("over %v: %q", over, why)
	}
	if cached.UID != "u1" || len(cached.Finalizers) != 1 || cached.Finalizers[0] != v1alpha1.MirrorFinalizer ||
		cached.Spec.Template.Spec.Tolerations != nil || cached.Annotations[v1alpha1.WorkerAnnotation] != "" {
		t.Errorf("kept other than the identity and jobferry's finalizer: %+v", cached.ObjectMeta)
	}
}

// Every field the cache keeps counts: a Job made large in any one of them
// — among them fields no reader reads on its own, kept with the metadata
// or the pod spec — is refused at admission and kept as its identity.
func TestEveryKeptFieldCounts(t *testing.T) {
	for name, grow := range map[string]func(j *batchv1.Job){
		"owner references": func(j *batchv1.Job) {
			for range 3000 {
				j.OwnerReferences = append(j.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "u"})
			}
		},
		"pod overhead": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Overhead = corev1.ResourceList{}
			for i := range 3000 {
				j.Spec.Template.Spec.Overhead[corev1.ResourceName(fmt.Sprintf("example.com/r-%04d", i))] = resource.MustParse("1")
			}
		},
		"pod resources": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
			for i := range 3000 {
				j.Spec.Template.Spec.Resources.Limits[corev1.ResourceName(fmt.Sprintf("example.com/r-%04d", i))] = resource.MustParse("1")
			}
		},
		"a container's requests": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
			for i := range 3000 {
				j.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceName(fmt.Sprintf("example.com/r-%04d", i))] = resource.MustParse("1")
			}
		},
		"a label of 200 KiB": func(j *batchv1.Job) { j.Labels = map[string]string{"big": strings.Repeat("l", 200<<10)} },
		// What placement reads for the worker's version (dispatch.VersionedFeatures).
		"resource claims": func(j *batchv1.Job) {
			for i := range 3000 {
				j.Spec.Template.Spec.ResourceClaims = append(j.Spec.Template.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("claim-%04d", i)})
			}
		},
		"a container's resize policy": func(j *batchv1.Job) {
			for i := range 3000 {
				j.Spec.Template.Spec.Containers[0].ResizePolicy = append(j.Spec.Template.Spec.Containers[0].ResizePolicy,
					corev1.ContainerResizePolicy{ResourceName: corev1.ResourceName(fmt.Sprintf("example.com/r-%04d", i))})
			}
		},
		"a container's restart rules": func(j *batchv1.Job) {
			for range 3000 {
				j.Spec.Template.Spec.Containers[0].RestartPolicyRules = append(j.Spec.Template.Spec.Containers[0].RestartPolicyRules,
					corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleActionRestart})
			}
		},
		"variables read from files": func(j *batchv1.Job) {
			for i := range 3000 {
				j.Spec.Template.Spec.Containers[0].Env = append(j.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("V%04d", i),
					ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}})
			}
		},
		"the pod's hostname override": func(j *batchv1.Job) { j.Spec.Template.Spec.HostnameOverride = ptr.To(strings.Repeat("h", 200<<10)) },
		"the pod spec's hostname": func(j *batchv1.Job) {
			// Not kept (nothing reads it): never counted, whatever its size.
			j.Spec.Template.Spec.Hostname = strings.Repeat("h", 200<<10)
		},
	} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "j", UID: "u1"},
			Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c"}}}}}}
		grow(job)
		admitted, cached := OverBudget(job, cachebudget.ManagerJob), newCachedManagerJob(job).overCacheBudget()
		if name == "the pod spec's hostname" {
			if admitted != nil || cached != nil {
				t.Errorf("%s: counted, though the cache does not keep it: %s", name, admitted)
			}
			continue
		}
		if admitted == nil || cached == nil {
			t.Errorf("%s: admitted (%v) or cached whole (%v)", name, admitted, cached)
			continue
		}
		if _, over := OverBudgetOf(Handed(job)); !over {
			t.Errorf("%s: the cache keeps the Job whole", name)
		}
		t.Logf("%s: %s", name, admitted)
	}
}

// A Job the admission webhook lets in (within cachebudget.ManagerJob) is
// still kept whole once jobferry has placed it: the worker's scheduling
// directives merged into its template, jobferry's state recorded.
func TestAdmittedJobIsCachedWholeOncePlaced(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "j", UID: "u1"},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c"}}}}},
	}
	// As many tolerations as the webhook admits.
	for i := 0; OverBudget(job, cachebudget.ManagerJob) == nil; i++ {
		job.Spec.Template.Spec.Tolerations = append(job.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("example.com/t-%04d", i), Operator: corev1.TolerationOpExists})
	}
	job.Spec.Template.Spec.Tolerations = job.Spec.Template.Spec.Tolerations[:len(job.Spec.Template.Spec.Tolerations)-1]
	d := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"jobferry.dev/pool": "general"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}}}
	placed, err := directives.Merge(job.Spec.Template, d)
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.Template = placed
	job.Annotations = map[string]string{v1alpha1.WorkerAnnotation: "w1", v1alpha1.UserSchedulingAnnotation: strings.Repeat("u", 100<<10)}
	if over := OverBudget(job, cachebudget.ManagerJobCached); over != nil {
		t.Errorf("an admitted Job, placed, is over what the cache keeps whole: %s", over)
	}
}

// The largest pod failure policy the API server takes (20 rules of 255
// exit codes) is admitted: numbers count as bytes, not entries.
func TestLargestPodFailurePolicyIsAdmitted(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "j"},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), PodFailurePolicy: &batchv1.PodFailurePolicy{},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}}}
	for range 20 {
		codes := make([]int32, 255)
		for i := range codes {
			codes[i] = int32(i + 1)
		}
		job.Spec.PodFailurePolicy.Rules = append(job.Spec.PodFailurePolicy.Rules, batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: codes}})
	}
	if over := OverBudget(job, cachebudget.ManagerJob); over != nil {
		t.Errorf("refused: %s", over)
	}
}

// Grows compares what the cache counts of two versions of a Job (its own
// parts and its status), not the fields the API server sets on every write;
// OverCacheBudget is the cache's own verdict.
func TestGrowsComparesWhatTheCacheCounts(t *testing.T) {
	job := func(labels int, mutate ...func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", ResourceVersion: "9", Generation: 1, Labels: map[string]string{}},
			Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(false)}}
		for i := range labels {
			j.Labels[fmt.Sprintf("example.com/l-%04d", i)] = "x"
		}
		for _, m := range mutate {
			m(j)
		}
		return j
	}
	later := func(j *batchv1.Job) { j.ResourceVersion, j.Generation = "1000000", 2 }
	for name, tc := range map[string]struct {
		prev, next *batchv1.Job
		grows      bool
	}{
		"a label more":                           {job(3), job(4), true},
		"a label fewer":                          {job(4), job(3), false},
		"a later resourceVersion and generation": {job(3), job(3, later), false},
		"suspended":                              {job(3), job(3, later, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }), false},
		"a status condition more": {job(3), job(3, func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}
		}), true},
	} {
		if got := Grows(tc.prev, tc.next); got != tc.grows {
			t.Errorf("%s: Grows = %v, want %v", name, got, tc.grows)
		}
	}
	if over := OverCacheBudget(job(cachebudget.ManagerJobCached.Entries + 1)); over == nil || !strings.Contains(over.Field, "metadata.labels") {
		t.Errorf("OverCacheBudget of a Job of too many labels: %v", over)
	}
	if over := OverCacheBudget(job(3, func(j *batchv1.Job) {
		j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: make([]types.UID, cachebudget.JobStatus.Entries+1)}
	})); over == nil || over.Field != "status" {
		t.Errorf("OverCacheBudget of a Job of too large a status: %v", over)
	}
	if over := OverCacheBudget(job(cachebudget.ManagerJob.Entries + 1)); over != nil {
		t.Errorf("OverCacheBudget of a Job within the cache's budget: %v", over)
	}
}
