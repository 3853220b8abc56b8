//go:build integration

package dispatch

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/jobferry/jobferry/dispatch/dispatchtest"
)

// oldestClaimed is the oldest minor the charts claim (kubeVersion).
func oldestClaimed(t *testing.T) *version.Version {
	t.Helper()
	v, err := dispatchtest.OldestClaimedMinor("..")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Each row's Since is the first minor whose feature gate is on by default,
// as the pinned Kubernetes (hack/tools) declares it in
// pkg/features/kube_features.go. A gate gone from there (GA, then removed)
// must have been on from a minor no later than the oldest the charts claim.
// The e2e test checks the rows against real API servers; this one, that
// they are the gates' own history, not a list kept by hand.
func TestIntegrationVersionedFeaturesFollowKubernetesFeatureGates(t *testing.T) {
	onByDefault, oldestClaimed := kubernetesGatesOnByDefault(t), oldestClaimed(t)
	for _, f := range VersionedFeatures {
		since, ok := onByDefault[f.Gate]
		if !ok {
			if f.Since.GreaterThan(oldestClaimed) {
				t.Errorf("%s: gate %s is not in the pinned Kubernetes's feature gates, and Since v%s is after the oldest claimed minor v%s", f.Field, f.Gate, f.Since, oldestClaimed)
			}
			continue
		}
		if !since.EqualTo(f.Since) {
			t.Errorf("%s: Since v%s, but gate %s is on by default from v%s", f.Field, f.Since, f.Gate, since)
		}
	}
}

// notDroppedFields are the gates the pinned Kubernetes's pod and Job
// strategies read, on by default after the oldest claimed minor, that guard
// no field an older worker would drop from a mirror without a word: what
// each guards instead.
var notDroppedFields = map[string]string{
	"DRAExtendedResource":                            "the pod's status (extendedResourceClaimStatus), which the worker writes",
	"InPlacePodLevelResourcesVerticalScaling":        "resizing a running pod's pod-level resources: no field of a Job",
	"MatchLabelKeysInPodTopologySpreadSelectorMerge": "how the scheduler merges matchLabelKeys into a spread's selector: no field",
	"MutablePodResourcesForSuspendedJobs":            "which updates of a suspended Job's template the API server allows: no field",
	"MutableSchedulingDirectivesForSuspendedJobs":    "which updates of a suspended Job's template the API server allows (mirror.TemplateMutable follows the worker's version)",
	"PodLifecycleSleepActionAllowZero":               "a value (a sleep of 0 s) an older API server refuses: the mirror's create fails, saying so",
	"PodObservedGenerationTracking":                  "the pod's status (observedGeneration), which the worker writes",
	"RelaxedDNSSearchValidation":                     "values an older API server refuses: the mirror's create fails, saying so",
	"ResourceHealthStatus":                           "the pod's status, which the worker writes",
	"ResourceHealthStatusMessage":                    "the pod's status, which the worker writes",
	"RestartAllContainersOnContainerExits":           "a value of restartPolicyRules (the ContainerRestartRules row) an older API server refuses",
}

// Every gate the pinned Kubernetes's pod and Job strategies read that is on
// by default after the oldest claimed minor — a field an older worker may
// drop — is a row of VersionedFeatures or in notDroppedFields, saying why not.
func TestIntegrationVersionedFeaturesCoverEveryGatedField(t *testing.T) {
	onByDefault, oldestClaimed := kubernetesGatesOnByDefault(t), oldestClaimed(t)
	notDropped := maps.Clone(notDroppedFields)
	rows := map[string]bool{}
	for _, f := range VersionedFeatures {
		rows[f.Gate] = true
	}
	dir := kubernetesModuleDir(t)
	for _, file := range []string{"pkg/api/pod/util.go", "pkg/registry/batch/job/strategy.go"} {
		for _, gate := range gatesReadIn(t, filepath.Join(dir, file)) {
			since, ok := onByDefault[gate]
			if !ok || !since.GreaterThan(oldestClaimed) {
				continue
			}
			_, why := notDropped[gate]
			if !rows[gate] && !why {
				t.Errorf("%s reads gate %s, on by default from v%s: a row of VersionedFeatures, or say in notDroppedFields why not", file, gate, since)
			}
			delete(notDropped, gate)
		}
	}
	for gate := range notDropped {
		t.Errorf("notDroppedFields names %s, which the pinned Kubernetes's strategies no longer read after v%s", gate, oldestClaimed)
	}
}

// gatesReadIn are the feature gates a Go file names (features.Name).
func gatesReadIn(t *testing.T, path string) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "features" && !seen[sel.Sel.Name] {
			seen[sel.Sel.Name] = true
			out = append(out, sel.Sel.Name)
		}
		return true
	})
	if len(out) == 0 {
		t.Fatalf("%s names no feature gate: the file's layout changed?", path)
	}
	return out
}

// kubernetesModuleDir is where the pinned k8s.io/kubernetes (hack/tools) is.
func kubernetesModuleDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join("..", "hack", "tools")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download k8s.io/kubernetes in hack/tools: %v\n%s", err, out)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil {
		t.Fatal(err)
	}
	return module.Dir
}

// kubernetesGatesOnByDefault reads the pinned Kubernetes's
// defaultVersionedKubernetesFeatureGates: per gate, the first version whose
// spec says Default: true.
func kubernetesGatesOnByDefault(t *testing.T) map[string]*version.Version {
	t.Helper()
	path := filepath.Join(kubernetesModuleDir(t), "pkg", "features", "kube_features.go")
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	gates := map[string]*version.Version{}
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Names) != 1 || spec.Names[0].Name != "defaultVersionedKubernetesFeatureGates" || len(spec.Values) != 1 {
			return true
		}
		table, ok := spec.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatalf("%s: defaultVersionedKubernetesFeatureGates is not a literal", path)
		}
		for _, elt := range table.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			gate, ok := kv.Key.(*ast.Ident)
			specs, isList := kv.Value.(*ast.CompositeLit)
			if !ok || !isList {
				continue
			}
			for _, s := range specs.Elts {
				if v := onByDefaultFrom(s); v != nil {
					gates[gate.Name] = v
					break
				}
			}
		}
		return false
	})
	if len(gates) < 50 {
		t.Fatalf("%s: read %d gates on by default; the file's layout changed?", path, len(gates))
	}
	return gates
}

// onByDefaultFrom is the Version of a VersionedSpec literal that says
// Default: true, nil for any other.
func onByDefaultFrom(e ast.Expr) *version.Version {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var v *version.Version
	on := false
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch key, _ := kv.Key.(*ast.Ident); {
		case key == nil:
		case key.Name == "Default":
			value, _ := kv.Value.(*ast.Ident)
			on = value != nil && value.Name == "true"
		case key.Name == "Version":
			// version.MustParse("1.29")
			call, ok := kv.Value.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				continue
			}
			arg, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				continue
			}
			s, err := strconv.Unquote(arg.Value)
			if err != nil {
				continue
			}
			v, _ = version.ParseGeneric(s)
		}
	}
	if !on {
		return nil
	}
	return v
}
