package main

import (
	"strings"
	"testing"

	"github.com/jobferry/jobferry/internal/managedjobs"
)

// The refusal names the Jobs, why they would be stranded and the ways out.
func TestUninstallRefusal(t *testing.T) {
	var jobs []managedjobs.Job
	for _, name := range []string{"a", "b"} {
		jobs = append(jobs, managedjobs.Job{Namespace: "team-a", Name: name, Worker: "worker-1", Phase: "Running"})
	}
	got := refusal(jobs)
	for _, want := range []string{
		"uninstall refused: 2 Jobs managed by jobferry are unfinished",
		"spec.managedBy is immutable",
		"  team-a/a (Running, on worker worker-1)\n  team-a/b (Running, on worker worker-1)\n",
		"kubectl jobferry remove WORKER",
		"helm uninstall --no-hooks, or set uninstallCheck.enabled=false",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, got)
		}
	}
}
