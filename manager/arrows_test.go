package manager

import (
	"os/exec"
	"strings"
	"testing"
)

// The arrows between packages point one way: the pieces the manager is
// built from import no controller of it, the Job controller's policy no
// client, the pool of connections knows no
// manager Job, and no controller imports another. A package that needs
// another's memory gets it through a subscription or an interface, not an
// import.
func TestImportArrowsPointOneWay(t *testing.T) {
	const module = "github.com/jobferry/jobferry/"
	controllers := []string{"manager/jobs", "manager/workercluster", "manager/orphans", "manager/admission", "manager/warnings"}
	forbidden := map[string][]string{
		"dispatch":             {"manager"},
		"mirror":               {"manager"},
		"internal/...":         {"manager"},
		"manager/metrics":      append([]string{"manager/workers"}, controllers...),
		"manager/managercache": append([]string{"manager/workers"}, controllers...),
		"manager/workers":      controllers,
		"manager/jobs":         {"manager/workercluster", "manager/orphans"},
		// The Job controller's policy decides from what was read: no
		// client, no cache, no package that holds one.
		"manager/jobs/policy": {"manager/jobs", "manager/workers", "manager/admission", "manager/managercache", "manager/tenantlimits",
			"=manager/queue", "sigs.k8s.io/controller-runtime/pkg/client", "sigs.k8s.io/controller-runtime/pkg/cache",
			"k8s.io/client-go/rest", "k8s.io/client-go/tools/cache"},
		"manager/queue/workload": {"=manager/queue", "sigs.k8s.io/controller-runtime/pkg/client", "k8s.io/client-go/rest"},
		"manager/workercluster":  {"manager/jobs", "manager/orphans", "manager/admission"},
		"manager/orphans":        {"manager/jobs", "manager/workercluster", "manager/admission"},
		"manager/admission":      {"manager/jobs", "manager/workercluster", "manager/orphans", "manager/workers"},
		"manager/queue":          controllers,
		"manager/inspection":     append([]string{"manager/workers"}, controllers...),
		"manager/statekey":       append([]string{"manager/workers"}, controllers...),
		"manager/cachebudget":    append([]string{"manager/workers", "manager/managercache"}, controllers...),
		"manager/tenantlimits":   append([]string{"manager/workers"}, controllers...),
		"manager/uninstall":      append([]string{"manager/workers"}, controllers...),
	}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	for pkg := range forbidden {
		args = append(args, "../"+pkg)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		rules, ok := forbidden[pkg]
		if !ok && strings.HasPrefix(pkg, "internal/") {
			rules, ok = forbidden["internal/..."]
		}
		if !ok {
			t.Errorf("go list named %s, which has no rule", pkg)
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			dep = strings.TrimPrefix(dep, module)
			for _, no := range rules {
				// "=path" forbids that package alone, not the ones under it.
				exact, ok := strings.CutPrefix(no, "=")
				if dep == exact || (!ok && strings.HasPrefix(dep, no+"/")) {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
	if checked < len(forbidden) {
		t.Errorf("checked %d packages, want at least %d", checked, len(forbidden))
	}
}

// The binaries users run take Kueue's API types only, never its controllers
// or their dependencies (issue 25: Kueue runs beside the manager, not in it),
// and never the development tooling.
func TestBinariesLinkOnlyKueueAPIs(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../cmd/manager", "../cmd/worker", "../cmd/kubectl-jobferry").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed only %d packages", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "sigs.k8s.io/kueue/") && !strings.HasPrefix(dep, "sigs.k8s.io/kueue/apis/") {
			t.Errorf("a binary links %s", dep)
		}
		// Nor the development tooling or the test harness.
		for _, harness := range []string{"github.com/jobferry/jobferry/devtools", "github.com/jobferry/jobferry/e2e"} {
			if dep == harness || strings.HasPrefix(dep, harness+"/") {
				t.Errorf("a binary links %s", dep)
			}
		}
	}
}
