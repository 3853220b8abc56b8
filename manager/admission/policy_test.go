package admission

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func testPolicy(t *testing.T, allowWeaker bool) *DispatchPolicy {
	t.Helper()
	p, err := NewDispatchPolicy(labels.SelectorFromSet(labels.Set{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled}), []string{"jobferry-system"}, allowWeaker)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func namespace(name string, kv ...string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		ns.Labels[kv[i]] = kv[i+1]
	}
	return ns
}

// restrictedPod passes every Pod Security level.
func restrictedPod() corev1.PodSpec {
	return corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "main", Image: "x", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	}
}

func privilegedPod() corev1.PodSpec {
	return corev1.PodSpec{
		Volumes:    []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		Containers: []corev1.Container{{Name: "main", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
	}
}

// baselinePod passes baseline but not restricted.
func baselinePod() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "x"}}}
}

func TestDispatchPolicyAdmit(t *testing.T) {
	optedIn := []string{v1alpha1.DispatchNamespaceLabel, v1alpha1.DispatchEnabled}
	cases := map[string]struct {
		ns           *corev1.Namespace
		pod          corev1.PodSpec
		wantRule     string
		wantMessage  []string
		wantWarnings []string
	}{
		"an opted-in namespace without Pod Security labels admits anything": {
			ns: namespace("team-a", optedIn...), pod: privilegedPod(),
		},
		"a namespace not opted in is refused, naming the label to set": {
			ns: namespace("team-b"), pod: restrictedPod(), wantRule: RuleNamespaceOptIn,
			wantMessage: []string{`namespace "team-b" is not opted in`, "jobferry.dev/dispatch=enabled", "kubectl label namespace team-b jobferry.dev/dispatch=enabled"},
		},
		"a namespace that does not exist is not opted in": {
			ns: nil, pod: restrictedPod(), wantRule: RuleNamespaceOptIn,
		},
		"kube-system is reserved even when opted in": {
			ns: namespace("kube-system", optedIn...), pod: restrictedPod(), wantRule: RuleReserved,
			wantMessage: []string{`namespace "kube-system" is reserved`, "jobferry-system, kube-node-lease, kube-public, kube-system"},
		},
		"any kube-* namespace is reserved, as the worker chart's policy has it": {
			ns: namespace("kube-addons", optedIn...), pod: restrictedPod(), wantRule: RuleReserved,
			wantMessage: []string{`namespace "kube-addons" is reserved`, "every kube-* namespace"},
		},
		"a configured namespace is reserved": {
			ns: namespace("jobferry-system", optedIn...), pod: restrictedPod(), wantRule: RuleReserved,
		},
		"a privileged pod in a restricted namespace is refused with Pod Security's message": {
			ns:  namespace("team-a", append(optedIn, "pod-security.kubernetes.io/enforce", "restricted")...),
			pod: privilegedPod(), wantRule: RulePodSecurity,
			wantMessage: []string{`violates PodSecurity "restricted:latest": privileged (container "main" must not set securityContext.privileged=true)`, `restricted volume types (volume "root" uses restricted volume type "hostPath")`},
		},
		"the enforce version is honoured": {
			ns:  namespace("team-a", append(optedIn, "pod-security.kubernetes.io/enforce", "baseline", "pod-security.kubernetes.io/enforce-version", "v1.30")...),
			pod: privilegedPod(), wantRule: RulePodSecurity,
			wantMessage: []string{`violates PodSecurity "baseline:v1.30"`},
		},
		"an enforce level that does not parse is restricted, as Pod Security admission takes it, and the refusal says so": {
			ns:  namespace("team-a", append(optedIn, "pod-security.kubernetes.io/enforce", "strict")...),
			pod: baselinePod(), wantRule: RulePodSecurity,
			wantMessage: []string{`violates PodSecurity "restricted:latest"`, `has Pod Security labels that do not parse`, `Invalid value: "strict"`},
		},
		"a restricted pod passes a restricted namespace": {
			ns:  namespace("team-a", append(optedIn, "pod-security.kubernetes.io/enforce", "restricted")...),
			pod: restrictedPod(),
		},
		"warn and audit levels give warnings, not refusals": {
			ns: namespace("team-a", append(optedIn, "pod-security.kubernetes.io/enforce", "baseline",
				"pod-security.kubernetes.io/warn", "restricted", "pod-security.kubernetes.io/audit", "restricted")...),
			pod:          baselinePod(),
			wantWarnings: []string{`jobferry: the pods this Job would run on a worker would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false`},
		},
	}
	p := testPolicy(t, false)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nsName := "team-b"
			if tc.ns != nil {
				nsName = tc.ns.Name
			}
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: "j"}, Spec: batchv1.JobSpec{
				ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Template: corev1.PodTemplateSpec{Spec: tc.pod},
			}}
			warnings, refusal := p.Admit(job, tc.ns)
			switch {
			case tc.wantRule == "" && refusal != nil:
				t.Fatalf("refused (%s): %s", refusal.Rule, refusal.Message)
			case tc.wantRule != "" && refusal == nil:
				t.Fatalf("admitted, want a refusal by rule %s", tc.wantRule)
			case refusal != nil && refusal.Rule != tc.wantRule:
				t.Errorf("refused by rule %s, want %s: %s", refusal.Rule, tc.wantRule, refusal.Message)
			}
			for _, part := range tc.wantMessage {
				if !strings.Contains(refusal.Message, part) {
					t.Errorf("message %q lacks %q", refusal.Message, part)
				}
			}
			if len(warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(tc.wantWarnings))
			}
			for i, w := range tc.wantWarnings {
				if !strings.HasPrefix(warnings[i], w) {
					t.Errorf("warning %q, want it to start with %q", warnings[i], w)
				}
			}
		})
	}
}

func TestWorkerNamespaceRejects(t *testing.T) {
	enforce := func(level string, version ...string) *corev1.Namespace {
		kv := []string{"pod-security.kubernetes.io/enforce", level}
		if len(version) > 0 {
			kv = append(kv, "pod-security.kubernetes.io/enforce-version", version[0])
		}
		return namespace("team-a", kv...)
	}
	cases := map[string]struct {
		manager, worker *corev1.Namespace
		allowWeaker     bool
		want            string
	}{
		"jobferry creates the namespace (with the manager's labels)": {manager: enforce("restricted"), worker: nil},
		"the same level":   {manager: enforce("restricted"), worker: enforce("restricted")},
		"a stricter level": {manager: enforce("baseline"), worker: enforce("restricted")},
		"a privileged manager namespace asks for nothing": {manager: namespace("team-a"), worker: namespace("team-a")},
		"a weaker level is refused": {manager: enforce("restricted"), worker: enforce("baseline"),
			want: `its namespace team-a enforces PodSecurity "baseline:latest", weaker than "restricted:latest" on the manager`},
		"no labels on the worker is privileged, weaker": {manager: enforce("baseline"), worker: namespace("team-a"),
			want: `enforces PodSecurity "privileged:latest", weaker than "baseline:latest"`},
		"an older version of the same level is weaker": {manager: enforce("restricted", "v1.35"), worker: enforce("restricted", "v1.22"),
			want: `"restricted:v1.22", weaker than "restricted:v1.35"`},
		"an administrator may allow weaker workers": {manager: enforce("restricted"), worker: enforce("baseline"), allowWeaker: true},
		"a manager level that does not parse is restricted, and says so": {manager: enforce("strict"), worker: enforce("baseline"),
			want: `weaker than "restricted:latest" on the manager (namespace team-a has Pod Security labels that do not parse: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict"`},
		"a worker level that does not parse is restricted, not weaker": {manager: enforce("restricted"), worker: enforce("strict")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := testPolicy(t, tc.allowWeaker).WorkerNamespaceRejects(tc.manager, tc.worker)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("WorkerNamespaceRejects = %q, want %q", got, tc.want)
			}
		})
	}
}

// With Kueue and RequireQueueName, a Job that names no LocalQueue is
// refused, naming the label; one that names one passes; without the rule
// both pass.
func TestDispatchPolicyRequiresAQueueName(t *testing.T) {
	ns := namespace("team-a", v1alpha1.DispatchNamespaceLabel, v1alpha1.DispatchEnabled)
	job := func(queueName string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "j"}, Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Template: corev1.PodTemplateSpec{Spec: restrictedPod()}}}
		if queueName != "" {
			j.Labels = map[string]string{v1alpha1.KueueQueueNameLabel: queueName}
		}
		return j
	}
	p := testPolicy(t, false)
	if _, refusal := p.Admit(job(""), ns); refusal != nil {
		t.Errorf("without the rule, a Job with no queue name was refused: %s", refusal.Message)
	}
	p.RequireQueueName = true
	_, refusal := p.Admit(job(""), ns)
	if refusal == nil || refusal.Rule != RuleQueueName || !strings.Contains(refusal.Message, "this Job names no LocalQueue: set its label kueue.x-k8s.io/queue-name") {
		t.Errorf("a Job with no queue name: %+v, want refused by %s naming the label", refusal, RuleQueueName)
	}
	if _, refusal := p.Admit(job("team"), ns); refusal != nil {
		t.Errorf("a queued Job was refused: %s", refusal.Message)
	}
}
