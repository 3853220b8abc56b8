package tenantlimits

import (
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/mirror"
)

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestChargeCountsAsTheQuotaPluginDoes(t *testing.T) {
	job := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](3), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		PriorityClassName:     "batch-low",
		ActiveDeadlineSeconds: ptr.To[int64](600),
		Containers: []corev1.Container{{Name: "main"}, {Name: "side", Resources: corev1.ResourceRequirements{
			Requests: list("cpu", "250m", "example.com/gpu", "1"), Limits: list("cpu", "1", "example.com/gpu", "1")}}},
	}}}}
	// The pod as admission gave it back: a LimitRange defaulted main.
	admitted := &corev1.Pod{Spec: *job.Spec.Template.Spec.DeepCopy()}
	admitted.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "1Gi"), Limits: list("cpu", "2", "memory", "1Gi")}
	got := Admitted(job, admitted)
	if main, ok := got.Containers["main"]; len(got.Containers) != 1 || !ok || main.Requests.Cpu().String() != "500m" {
		t.Errorf("containers %v, want main's defaulted resources only", got.Containers)
	}
	want := map[string]string{
		"pods": "3", "count/pods": "3", "cpu": "2250m", "requests.cpu": "2250m", "limits.cpu": "9",
		"memory": "3Gi", "requests.memory": "3Gi", "limits.memory": "3Gi", "requests.example.com/gpu": "3",
	}
	usage := ChargedNow(job, got.Charge).Usage()
	for name, q := range want {
		if have := usage[corev1.ResourceName(name)]; have.Cmp(resource.MustParse(q)) != 0 {
			t.Errorf("%s: %s, want %s (3 pods at once)", name, have.String(), q)
		}
	}
	if len(usage) != len(want) {
		t.Errorf("usage %v, want exactly %v", usage, want)
	}
	// Parallelism raised after placement: counted as it is now.
	job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](50), nil
	if pods := ChargedNow(job, got.Charge).Usage()[corev1.ResourcePods]; pods.String() != "50" {
		t.Errorf("pods %s after parallelism went to 50, want 50", pods.String())
	}
	if !got.Charge.Terminating || got.Charge.BestEffort || got.Charge.PriorityClassName != "batch-low" {
		t.Errorf("scopes %+v, want terminating, not best effort, batch-low", got.Charge)
	}

	spec := job.Spec.Template.Spec.DeepCopy()
	mirror.WithAdmitted(spec, got)
	if spec.Containers[0].Resources.Limits.Cpu().String() != "2" || spec.Containers[1].Resources.Requests.Cpu().String() != "250m" {
		t.Errorf("the mirror's containers %v, want main defaulted and side as written", spec.Containers)
	}
}

func TestQuotaRefuses(t *testing.T) {
	quota := func(name string, hard corev1.ResourceList, scoped ...corev1.ScopedResourceSelectorRequirement) corev1.ResourceQuota {
		q := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		if len(scoped) > 0 {
			q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: scoped}
		}
		return q
	}
	pods := func(n string) Charged {
		count := resource.MustParse(n)
		return Charged{QuotaCharge: v1alpha1.QuotaCharge{PerPod: list("pods", "1", "requests.cpu", "1")}, Pods: count.Value()}
	}
	high := func(c Charged) Charged { c.PriorityClassName = "high"; return c }
	onlyHigh := corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}

	for name, tc := range map[string]struct {
		quotas  []corev1.ResourceQuota
		charged []Charged
		adding  Charged
		refused string // the quota resource refused, "" when admitted
	}{
		"room left":                      {[]corev1.ResourceQuota{quota("pods-2", list("pods", "2"))}, []Charged{pods("1")}, pods("1"), ""},
		"the third of a quota of two":    {[]corev1.ResourceQuota{quota("pods-2", list("pods", "2"))}, []Charged{pods("1"), pods("1")}, pods("1"), "pods"},
		"one Job larger than the quota":  {[]corev1.ResourceQuota{quota("cpu-2", list("requests.cpu", "2"))}, nil, pods("3"), "requests.cpu"},
		"a resource the Job charges not": {[]corev1.ResourceQuota{quota("gpus", list("requests.example.com/gpu", "0"))}, nil, pods("1"), ""},
		"a scope the Job is out of":      {[]corev1.ResourceQuota{quota("high-1", list("pods", "1"), onlyHigh)}, []Charged{high(pods("1"))}, pods("1"), ""},
		"a scope the Job is in":          {[]corev1.ResourceQuota{quota("high-1", list("pods", "1"), onlyHigh)}, []Charged{high(pods("1"))}, high(pods("1")), "pods"},
		"charged Jobs out of the scope":  {[]corev1.ResourceQuota{quota("high-1", list("pods", "1"), onlyHigh)}, []Charged{pods("1"), pods("1")}, high(pods("1")), ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := QuotaRefuses("team-a", tc.quotas, tc.charged, tc.adding)
			switch {
			case tc.refused == "" && got != nil:
				t.Errorf("refused: %s", got.Message)
			case tc.refused != "" && got == nil:
				t.Errorf("admitted, want %s refused", tc.refused)
			case got != nil && (got.Resource != tc.refused || !strings.Contains(got.Message, "ResourceQuota "+got.Quota+" in namespace team-a: "+tc.refused)):
				t.Errorf("refused %s: %s", got.Resource, got.Message)
			}
		})
	}

	// What runs on the manager cluster itself counts too (status.used).
	used := quota("pods-2", list("pods", "2"))
	used.Status.Used = list("pods", "1")
	got := QuotaRefuses("team-a", []corev1.ResourceQuota{used}, []Charged{pods("1")}, pods("1"))
	if got == nil {
		t.Fatal("a quota of 2 pods with 1 on the manager and 1 dispatched took one more")
	}
	want := "ResourceQuota pods-2 in namespace team-a: pods would be 3, over its hard limit of 2: this Job's pods take 1, and 2 is taken already (1 by 1 dispatched unfinished Jobs of the namespace on worker clusters, 1 on this cluster); it waits until enough of them finish"
	if got.Message != want {
		t.Errorf("message\n%s\nwant\n%s", got.Message, want)
	}
}

// Counting a Job's pods cannot overflow into a negative charge that would
// switch the quota off (1Ti of memory times 9,000 pods), and the BestEffort
// scope reads the pod's QoS as upstream does.
func TestChargeCannotOverflowAndReadsQoSAsUpstream(t *testing.T) {
	huge := Charged{QuotaCharge: v1alpha1.QuotaCharge{PerPod: list("requests.memory", "1Ti")}, Pods: 9000}
	got := huge.Usage()[corev1.ResourceRequestsMemory]
	if got.Sign() <= 0 || got.Cmp(resource.MustParse("9000Ti")) != 0 {
		t.Errorf("1Ti times 9,000: %s, want 9000Ti", got.String())
	}
	quota := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "mem"}, Spec: corev1.ResourceQuotaSpec{Hard: list("requests.memory", "2Ti")}}
	if QuotaRefuses("team-a", []corev1.ResourceQuota{quota}, nil, huge) == nil {
		t.Error("9000Ti of memory passed a quota of 2Ti")
	}

	podLevel := &corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: list("cpu", "1")}, Containers: []corev1.Container{{Name: "main"}}}
	if chargeOf(podLevel).BestEffort {
		t.Error("a pod with pod-level cpu requests is taken for BestEffort")
	}
	zero := &corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: list("cpu", "0")}}}}
	if !chargeOf(zero).BestEffort {
		t.Error("a pod requesting 0 cpu is not BestEffort, as upstream's QoS has it")
	}
}

// A refusal reads the same at every dry-run: the name the API server
// generated for the pod is written as its prefix and xxxxx, wherever the
// message names it (a webhook's denial in its own words too).
func TestARefusalReadsTheSameAtEveryDryRun(t *testing.T) {
	err := apierrors.NewForbidden(corev1.Resource("pods"), "train-0-x7k2p",
		errors.New(`admission webhook "validate.kyverno.svc" denied the request: policy Pod/team-a/train-0-x7k2p for resource violation: require-labels`))
	got := withoutRandomName(err, "train-0-")
	if strings.Contains(got, "x7k2p") || !strings.Contains(got, `pods "train-0-xxxxx" is forbidden`) || !strings.Contains(got, "Pod/team-a/train-0-xxxxx for resource violation") {
		t.Errorf("message %q still names the generated pod", got)
	}
}
