package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The plugin is what users install next to kubectl: it must not carry the
// controllers or the test harness (local clusters, fixtures) with it.
func TestPluginLinksNeitherControllersNorTestHarness(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed only %d packages: %q", len(deps), deps)
	}
	for _, dep := range deps {
		for _, forbidden := range []string{"github.com/jobferry/jobferry/e2e", "github.com/jobferry/jobferry/devtools", "github.com/jobferry/jobferry/manager", "github.com/jobferry/jobferry/worker"} {
			if dep == forbidden || strings.HasPrefix(dep, forbidden+"/") {
				t.Errorf("kubectl-jobferry links %s", dep)
			}
		}
	}
}
