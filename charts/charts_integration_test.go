//go:build integration

package charts

import (
	"bytes"

	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/jobferry/jobferry/e2e/testenv"
	"github.com/jobferry/jobferry/internal/memorylimit"
	"github.com/jobferry/jobferry/manager/admission"
)

const kubeVersion = "1.36.3"

func binary(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		t.Fatal("KUBEBUILDER_ASSETS must point at bin/ (make test-integration sets it)")
	}
	return filepath.Join(dir, name)
}

func run(t *testing.T, stdin io.Reader, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary(t, name), args...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), err
}

// render is `helm template` of a chart with a values file (or none).
func render(t *testing.T, chart, valuesFile string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", chart, chart, "--namespace", "jobferry-system", "--kube-version", kubeVersion, "--include-crds"}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return run(t, nil, "helm", args...)
}

// GitOps tools render charts without a cluster: helm then assumes the
// Kubernetes version it was built for, which must satisfy the charts'
// kubeVersion (a helm built without its version ldflags assumes v1.20.0 and
// refuses them). With helm 3 and helm 4 alike.
func TestIntegrationChartsRenderWithoutACluster(t *testing.T) {
	for _, helm := range helms {
		for _, chart := range charts {
			t.Run(helm+"/"+chart, func(t *testing.T) {
				out, err := run(t, nil, helm, "template", chart, chart, "--namespace", "jobferry-system")
				if err != nil {
					t.Fatalf("%s template without --kube-version: %v", helm, err)
				}
				if !strings.Contains(out, "kind: Deployment") {
					t.Errorf("%s template rendered no Deployment:\n%s", helm, out)
				}
				if out, err := run(t, nil, helm, "lint", "--strict", chart); err != nil {
					t.Errorf("%s lint without --kube-version: %v\n%s", helm, err, out)
				}
			})
		}
	}
}

// Each chart's Deployment rolls a new pod in, ready, before it stops an
// old one, whatever its replica count: Kubernetes' default (25 % each way)
// stops an old pod first from four replicas on, and the manager's webhooks
// would refuse Jobs meanwhile (e2e TestUpgradeWithJobsInFlight measures
// the rollout).
func TestIntegrationChartsRollOutBeforeTheyStop(t *testing.T) {
	for _, chart := range charts {
		for _, replicas := range []string{"1", "2", "5"} {
			out, err := render(t, chart, "", "replicas="+replicas)
			if err != nil {
				t.Fatal(err)
			}
			var deployment struct {
				Spec struct {
					Strategy struct {
						Type          string
						RollingUpdate struct{ MaxUnavailable, MaxSurge any }
					}
				}
			}
			if err := decodeKind(out, "Deployment", &deployment); err != nil {
				t.Fatal(err)
			}
			s := deployment.Spec.Strategy
			if s.Type != "RollingUpdate" || fmt.Sprint(s.RollingUpdate.MaxUnavailable) != "0" || fmt.Sprint(s.RollingUpdate.MaxSurge) != "1" {
				t.Errorf("%s with %s replicas: strategy %+v, want RollingUpdate with maxUnavailable 0, maxSurge 1", chart, replicas, s)
			}
		}
	}
}

// helms are the helm majors the charts support (bin/helm is helm 3).
var helms = []string{"helm", "helm4"}

// helm 4 renders every chart, with its defaults and each example, into the
// same objects as helm 3 (what TestIntegrationChartsInstall checks of helm
// 3's holds of helm 4's).
func TestIntegrationChartsRenderTheSameWithHelm4(t *testing.T) {
	for _, chart := range charts {
		examples, err := filepath.Glob(filepath.Join(chart, "examples", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, values := range append([]string{""}, examples...) {
			args := []string{"template", chart, chart, "--namespace", "jobferry-system", "--kube-version", kubeVersion, "--include-crds"}
			if values != "" {
				args = append(args, "--values", values)
			}
			three, err := run(t, nil, "helm", args...)
			if err != nil {
				t.Fatal(err)
			}
			four, err := run(t, nil, "helm4", args...)
			if err != nil {
				t.Errorf("%s with %q: %v", chart, values, err)
				continue
			}
			// helm 4 may order objects of one kind otherwise.
			byName := func(objs []map[string]any) []map[string]any {
				key := func(o map[string]any) string {
					meta, _ := o["metadata"].(map[string]any)
					return fmt.Sprint(o["kind"], "/", meta["namespace"], "/", meta["name"])
				}
				slices.SortStableFunc(objs, func(a, b map[string]any) int { return strings.Compare(key(a), key(b)) })
				return objs
			}
			if diff := cmp.Diff(byName(documents(t, three)), byName(documents(t, four))); diff != "" {
				t.Errorf("%s with %q: helm 4 renders other objects than helm 3 (-helm3 +helm4):\n%s", chart, values, diff)
			}
		}
	}
}

// documents are the objects of a rendered manifest.
func documents(t *testing.T, manifest string) []map[string]any {
	t.Helper()
	var out []map[string]any
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var obj map[string]any
		err := decoder.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// Both charts lint clean; their default values and every example in their
// examples/ render, and what they render is accepted by a real API server
// (server-side dry-run, CRDs of the charts installed first); a value of the
// wrong type or a value that does not exist is refused by the chart's schema
// with a message naming it.
func TestIntegrationChartsInstall(t *testing.T) {
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	kubeconfig := writeKubeconfig(t, cfg.Host, cfg.CAData, cfg.CertData, cfg.KeyData)
	c := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"jobferry-system", "team-a", "team-b"} {
		if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// CRDs for real, so the dry-run knows the kinds.
	for _, crds := range []string{"jobferry-manager/crds", "jobferry-worker/crds", "testdata/stand-in-crds.yaml"} {
		if out, err := run(t, nil, "kubectl", "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", crds); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if out, err := run(t, nil, "kubectl", "--kubeconfig", kubeconfig, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	for _, chart := range charts {
		t.Run(chart+"/lint", func(t *testing.T) {
			if out, err := run(t, nil, "helm", "lint", "--strict", "--kube-version", kubeVersion, chart); err != nil {
				t.Errorf("helm lint: %v\n%s", err, out)
			}
		})
		examples, err := filepath.Glob(filepath.Join(chart, "examples", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, values := range append([]string{""}, examples...) {
			name := "defaults"
			if values != "" {
				name = strings.TrimSuffix(filepath.Base(values), ".yaml")
				if !strings.Contains(string(readme), "examples/"+filepath.Base(values)) {
					t.Errorf("%s's README does not document %s", chart, values)
				}
			}
			t.Run(chart+"/"+name, func(t *testing.T) {
				manifests, err := render(t, chart, values)
				if err != nil {
					t.Fatal(err)
				}
				out, err := run(t, strings.NewReader(manifests), "kubectl", "--kubeconfig", kubeconfig,
					"apply", "--server-side", "--dry-run=server", "--field-manager=helm", "-f", "-")
				if err != nil {
					t.Fatalf("the API server refused what the chart renders: %v", err)
				}
				t.Logf("%d objects accepted", strings.Count(out, "serverside-applied"))
			})
		}
	}

	// Both charts as subcharts of a platform team's umbrella chart, each
	// under a condition: (which puts enabled into its values) and with the
	// global values a parent shares (helm #10392: a strict schema that
	// refuses global breaks every parent chart).
	t.Run("as-subcharts", func(t *testing.T) {
		umbrella := t.TempDir()
		var deps strings.Builder
		for _, chart := range charts {
			abs, err := filepath.Abs(chart)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&deps, "  - name: %s\n    version: 0.1.0\n    repository: file://%s\n    condition: %s.enabled\n", chart, abs, chart)
		}
		files := map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: platform\nversion: 0.0.1\nkubeVersion: \">= 1.32.0-0\"\ndependencies:\n" + deps.String(),
			"values.yaml": "global:\n  imageRegistry: registry.example.com\n  team: platform\njobferry-manager:\n  enabled: true\n  commonLabels:\n    team: platform\njobferry-worker:\n  enabled: true\n",
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(umbrella, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := run(t, nil, "helm", "dependency", "build", umbrella); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if out, err := run(t, nil, "helm", "lint", "--strict", "--kube-version", kubeVersion, umbrella); err != nil {
			t.Errorf("helm lint of the umbrella chart: %v\n%s", err, out)
		}
		manifests, err := run(t, nil, "helm", "template", "platform", umbrella, "--namespace", "jobferry-system", "--kube-version", kubeVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(manifests, "platform-jobferry-manager") || !strings.Contains(manifests, "platform-jobferry-worker") || !strings.Contains(manifests, "team: platform") {
			t.Fatalf("the umbrella chart does not render both subcharts with its values")
		}
		out, err := run(t, strings.NewReader(manifests), "kubectl", "--kubeconfig", kubeconfig,
			"apply", "--server-side", "--dry-run=server", "--field-manager=helm", "-f", "-")
		if err != nil {
			t.Fatalf("the API server refused what the umbrella chart renders: %v", err)
		}
		t.Logf("%d objects accepted", strings.Count(out, "serverside-applied"))
		// Off under its condition: nothing of it rendered.
		off, err := run(t, nil, "helm", "template", "platform", umbrella, "--namespace", "jobferry-system", "--kube-version", kubeVersion, "--set", "jobferry-worker.enabled=false")
		if err != nil || strings.Contains(off, "platform-jobferry-worker") {
			t.Errorf("jobferry-worker.enabled=false still renders the worker chart: %v", err)
		}
	})

	t.Run("schema", func(t *testing.T) {
		cases := []struct {
			chart, set, want string
		}{
			{"jobferry-manager", "replicas=two", "at '/replicas': got string, want integer"},
			{"jobferry-manager", "dispatch.workerLostTimeout=15", "at '/dispatch/workerLostTimeout': got number, want string"},
			{"jobferry-manager", "webhook.certificates.mode=selfsigned", "value must be one of 'manager', 'certManager'"},
			{"jobferry-manager", "dispatch.namespaceSelector.matchLabels=null", "at '/dispatch/namespaceSelector'"},
			{"jobferry-manager", "replica=2", "additional properties 'replica' not allowed"},
			{"jobferry-manager", "memoryLimitRatio=0", "at '/memoryLimitRatio': exclusiveMinimum"},
			{"jobferry-manager", "metrics.secure=false", "at '/metrics/secure'"},
			{"jobferry-manager", "metrics.secure=false,metrics.authorize=false", ""},
			{"jobferry-worker", "managerIdentity.namespaces={team-a}", ""},
			{"jobferry-worker", "jobController.concurrentSyncs=0", "at '/jobController/concurrentSyncs': minimum: got 0, want 1"},
			{"jobferry-worker", "managerIdentity.namespaces={Team_A}", "at '/managerIdentity/namespaces/0'"},
			{"jobferry-worker", "managerIdentity.allowNamespaceDeletion=true", "at '/managerIdentity/allowNamespaceDeletion'"},
			{"jobferry-worker", "managerIdentity.allowNamespaceDeletion=true,managerIdentity.allowNamespaceCreation=true", ""},
			{"jobferry-manager", "dispatch.workerNamespaceGrace=10", "at '/dispatch/workerNamespaceGrace': got number, want string"},
		}
		for _, tc := range cases {
			_, err := render(t, tc.chart, "", tc.set)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s --set %s: %v", tc.chart, tc.set, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s --set %s: got %v, want a schema error mentioning %q", tc.chart, tc.set, err, tc.want)
			case tc.want != "":
				t.Logf("%s --set %s: %s", tc.chart, tc.set, schemaLine(err.Error()))
			}
		}
	})

	// Each binary learns its container's memory limit (the soft limit of
	// internal/memorylimit) from its own container's limits.memory.
	t.Run("memory-limit", func(t *testing.T) {
		for _, chart := range charts {
			manifests, err := render(t, chart, "")
			if err != nil {
				t.Fatal(err)
			}
			var deployment appsv1.Deployment
			if err := decodeKind(manifests, "Deployment", &deployment); err != nil {
				t.Fatal(err)
			}
			c := deployment.Spec.Template.Spec.Containers[0]
			var from *corev1.ResourceFieldSelector
			for _, e := range c.Env {
				if e.Name == memorylimit.EnvVar && e.ValueFrom != nil {
					from = e.ValueFrom.ResourceFieldRef
				}
			}
			if from == nil || from.ContainerName != c.Name || from.Resource != "limits.memory" {
				t.Errorf("%s: container %s's %s is %+v, want its own limits.memory", chart, c.Name, memorylimit.EnvVar, from)
			}
			if !slices.Contains(c.Args, "--memory-limit-ratio=0.9") {
				t.Errorf("%s: container %s's args lack --memory-limit-ratio=0.9: %v", chart, c.Name, c.Args)
			}
		}
	})

	// The NetworkPolicy admits each port of the manager's container from
	// exactly the peers its values name, and no other port (issue 44
	// item 5): the local clusters run no network plugin that enforces it,
	// so what is checked is what the chart asks for.
	t.Run("network-policy", func(t *testing.T) {
		if manifests, err := render(t, "jobferry-manager", ""); err != nil || decodeKind(manifests, "NetworkPolicy", &networkingv1.NetworkPolicy{}) == nil {
			t.Errorf("a NetworkPolicy rendered by default (%v)", err)
		}
		manifests, err := render(t, "jobferry-manager", filepath.Join("jobferry-manager", "examples", "production.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var policy networkingv1.NetworkPolicy
		var deployment appsv1.Deployment
		if err := decodeKind(manifests, "NetworkPolicy", &policy); err != nil {
			t.Fatal(err)
		}
		if err := decodeKind(manifests, "Deployment", &deployment); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(deployment.Spec.Selector.MatchLabels, policy.Spec.PodSelector.MatchLabels); diff != "" {
			t.Errorf("the policy selects other pods than the Deployment's (-deployment +policy):\n%s", diff)
		}
		admitted := map[string]string{}
		for _, rule := range policy.Spec.Ingress {
			from, _ := yaml.Marshal(rule.From)
			for _, p := range rule.Ports {
				admitted[p.Port.String()] = strings.TrimSpace(string(from))
			}
		}
		want := map[string]string{
			"webhook":    "- ipBlock:\n    cidr: 10.0.0.0/24",
			"inspection": "- ipBlock:\n    cidr: 10.0.0.0/24",
			"metrics":    "- namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: monitoring",
			"probes":     "null", // any source
		}
		for _, port := range deployment.Spec.Template.Spec.Containers[0].Ports {
			if _, ok := want[port.Name]; !ok {
				t.Errorf("container port %s: the test does not say who may reach it", port.Name)
			}
		}
		if diff := cmp.Diff(want, admitted); diff != "" {
			t.Errorf("who the policy admits to each port (-want +policy):\n%s", diff)
		}
	})

	t.Run("webhooks-match-the-code", func(t *testing.T) {
		manifests, err := render(t, "jobferry-manager", "")
		if err != nil {
			t.Fatal(err)
		}
		var mutating admissionregistrationv1.MutatingWebhookConfiguration
		var validating admissionregistrationv1.ValidatingWebhookConfiguration
		if err := decodeKind(manifests, "MutatingWebhookConfiguration", &mutating); err != nil {
			t.Fatal(err)
		}
		if err := decodeKind(manifests, "ValidatingWebhookConfiguration", &validating); err != nil {
			t.Fatal(err)
		}
		selector, err := metav1.ParseToLabelSelector(admission.DefaultDispatchNamespaceSelector)
		if err != nil {
			t.Fatal(err)
		}
		reserved := append(append([]string{}, admission.AlwaysReserved...), "jobferry-system")
		wantMutating, wantValidating := admission.WebhookConfigurations("https://unused", nil, selector, reserved, "system:serviceaccount:jobferry-system:jobferry-manager")
		ignore := func(w *admissionregistrationv1.WebhookClientConfig) {
			*w = admissionregistrationv1.WebhookClientConfig{}
		}
		ignore(&mutating.Webhooks[0].ClientConfig)
		ignore(&wantMutating.Webhooks[0].ClientConfig)
		for _, webhooks := range [][]admissionregistrationv1.ValidatingWebhook{validating.Webhooks, wantValidating.Webhooks} {
			for i := range webhooks {
				ignore(&webhooks[i].ClientConfig)
			}
		}
		sortReserved := func(w *admissionregistrationv1.MutatingWebhook) {
			for i := range w.NamespaceSelector.MatchExpressions {
				values := w.NamespaceSelector.MatchExpressions[i].Values
				sortStrings(values)
			}
		}
		sortReserved(&mutating.Webhooks[0])
		sortReserved(&wantMutating.Webhooks[0])
		if diff := cmp.Diff(wantMutating.Webhooks, mutating.Webhooks); diff != "" {
			t.Errorf("the chart's opt-in webhook differs from admission.WebhookConfigurations (-code +chart):\n%s", diff)
		}
		if diff := cmp.Diff(wantValidating.Webhooks, validating.Webhooks); diff != "" {
			t.Errorf("the chart's validating webhook differs from admission.WebhookConfigurations (-code +chart):\n%s", diff)
		}
	})
}

// The charts' admission policies are the code's, for the manager's
// ServiceAccount, bound to deny: admission.StatePolicy in the manager chart;
// in the worker chart admission.ManagerJobsPolicy always, and
// admission.NamespacePolicy where the manager may create namespaces, each
// for the manager the chart names.
func TestIntegrationChartPoliciesMatchTheCode(t *testing.T) {
	const user = "system:serviceaccount:jobferry-system:jobferry-manager"
	type policyFunc func(name, user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	cases := []struct {
		chart string
		set   []string
		// want are the policies the chart renders, by name.
		want map[string]policyFunc
	}{
		{"jobferry-manager", nil, map[string]policyFunc{"jobferry-manager-state": admission.StatePolicy, "jobferry-manager-dry-run-pods": admission.DryRunPodsPolicy}},
		{"jobferry-worker", []string{"managerIdentity.allowNamespaceCreation=true"}, map[string]policyFunc{
			"jobferry-worker-manager-namespaces": namespacePolicyFor(""), "jobferry-worker-manager-jobs": jobsPolicyListing()}},
		{"jobferry-worker", []string{"managerIdentity.allowNamespaceCreation=true", "managerIdentity.managerID=4b08bdc19a598b13"}, map[string]policyFunc{
			"jobferry-worker-manager-namespaces": namespacePolicyFor("4b08bdc19a598b13"), "jobferry-worker-manager-jobs": jobsPolicyFor("4b08bdc19a598b13")}},
		{"jobferry-worker", nil, map[string]policyFunc{"jobferry-worker-manager-jobs": jobsPolicyListing()}},
		{"jobferry-worker", []string{"managerIdentity.namespaces={team-a,team-b}"}, map[string]policyFunc{"jobferry-worker-manager-jobs": jobsPolicyListing("team-a", "team-b")}},
		{"jobferry-worker", []string{"managerIdentity.managerID=4b08bdc19a598b13"}, map[string]policyFunc{"jobferry-worker-manager-jobs": jobsPolicyFor("4b08bdc19a598b13")}},
	}
	for _, tc := range cases {
		t.Run(tc.chart+" "+strings.Join(tc.set, " "), func(t *testing.T) {
			manifests, err := render(t, tc.chart, "", tc.set...)
			if err != nil {
				t.Fatal(err)
			}
			policies, err := decodeAll[admissionregistrationv1.ValidatingAdmissionPolicy](manifests, "ValidatingAdmissionPolicy")
			if err != nil {
				t.Fatal(err)
			}
			bindings, err := decodeAll[admissionregistrationv1.ValidatingAdmissionPolicyBinding](manifests, "ValidatingAdmissionPolicyBinding")
			if err != nil {
				t.Fatal(err)
			}
			for name := range policies {
				if tc.want[name] == nil {
					t.Errorf("the chart renders admission policy %s, which the code has not", name)
				}
			}
			for name, want := range tc.want {
				policy, ok := policies[name]
				if !ok {
					t.Errorf("the chart renders no admission policy %s", name)
					continue
				}
				binding, ok := bindings[name]
				if !ok {
					t.Errorf("the chart renders no binding %s", name)
					continue
				}
				wantPolicy, wantBinding := want(name, user)
				if diff := cmp.Diff(wantPolicy.Spec, policy.Spec); diff != "" {
					t.Errorf("the chart's admission policy %s differs from the code's (-code +chart):\n%s", name, diff)
				}
				if diff := cmp.Diff(wantBinding.Spec, binding.Spec); diff != "" {
					t.Errorf("the chart's admission policy binding %s differs from the code's (-code +chart):\n%s", name, diff)
				}
			}
		})
	}
}

// jobsPolicyListing is admission.ManagerJobsPolicy with the namespaces the
// worker chart lists.
func jobsPolicyListing(listed ...string) func(name, user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return func(name, user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
		return admission.ManagerJobsPolicy(name, user, "", listed...)
	}
}

// jobsPolicyFor is admission.ManagerJobsPolicy for the manager the worker
// chart names.
func jobsPolicyFor(managerID string) func(name, user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return func(name, user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
		return admission.ManagerJobsPolicy(name, user, managerID)
	}
}

// namespacePolicyFor is admission.NamespacePolicy for the manager the
// worker chart names (none: "").
func namespacePolicyFor(managerID string) func(name, user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return func(name, user string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
		return admission.NamespacePolicy(name, user, managerID)
	}
}

// decodeAll decodes every manifest of kind, by name.
func decodeAll[T any, PT interface {
	*T
	GetName() string
}](manifests, kind string) (map[string]*T, error) {
	out := map[string]*T{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if doc["kind"] != kind {
			continue
		}
		data, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		item := new(T)
		if err := yaml.Unmarshal(data, item); err != nil {
			return nil, err
		}
		out[PT(item).GetName()] = item
	}
}

// schemaLine is the line of helm's error that names the value.
func schemaLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "- at ") {
			return strings.TrimSpace(line)
		}
	}
	return s
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// decodeKind decodes the one object of the kind from a multi-document YAML.
func decodeKind(manifests, kind string, into any) error {
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("no %s rendered", kind)
			}
			return err
		}
		if doc["kind"] != kind {
			continue
		}
		data, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		return yaml.Unmarshal(data, into)
	}
}

func writeKubeconfig(t *testing.T, host string, ca, cert, key []byte) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// An alert switched off is not in the PrometheusRule; the rest keep their
// runbook_url, pointed at runbookBaseURL when it is set.
func TestIntegrationAlertSwitches(t *testing.T) {
	manifests, err := render(t, "jobferry-manager", "", "metrics.prometheusRule.enabled=true",
		"metrics.prometheusRule.disabledAlerts={JobferryPlacementBacklogGrowing}", "metrics.prometheusRule.runbookBaseURL=https://docs.example.com/troubleshooting")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert       string
					Annotations map[string]string
				}
			}
		}
	}
	if err := decodeKind(manifests, "PrometheusRule", &rule); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "JobferryPlacementBacklogGrowing" {
				t.Errorf("the switched-off alert %s is rendered", r.Alert)
			}
			if !strings.HasPrefix(r.Annotations["runbook_url"], "https://docs.example.com/troubleshooting#") {
				t.Errorf("%s: runbook_url %q, want it under runbookBaseURL", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
	if n != 5 {
		t.Errorf("%d alerts rendered, want the 6 but the one switched off", n)
	}
}
