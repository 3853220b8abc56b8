package uninstall

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/jobferry/jobferry/internal/managedjobs"
)

// The refusal names what would be stranded, why, and the ways out.
func TestRefusal(t *testing.T) {
	f := Findings{
		Workers:    []string{"worker-1"},
		Namespaces: []string{"team-a"},
		Jobs: []managedjobs.Job{
			{Namespace: "team-a", Name: "a", Worker: "worker-1", Phase: "Running"},
			{Namespace: "team-a", Name: "b", Phase: "Pending"},
		},
	}
	got := Refusal(f, Release{Name: "jobferry-manager", Namespace: "jobferry-system", Revision: 3}, labels.SelectorFromSet(labels.Set{"jobferry.dev/dispatch": "enabled"}))
	for _, want := range []string{
		"- 1 workers are registered; remove each first", "kubectl jobferry remove WORKER\n  worker-1\n",
		"- 1 namespaces are opted in (jobferry.dev/dispatch=enabled)", "  team-a\n",
		"- 2 Jobs jobferry manages are unfinished", "spec.managedBy is immutable",
		"  team-a/a (Running, on worker worker-1)\n  team-a/b (Pending, not placed yet)\n",
		"`helm rollback jobferry-manager 3 -n jobferry-system` makes it deployed again",
		"helm uninstall --no-hooks, or set uninstallCheck.enabled=false",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, got)
		}
	}
	only := Refusal(Findings{Workers: []string{"w"}}, Release{Name: "r", Namespace: "n", Revision: 1}, labels.Everything())
	if strings.Contains(only, "namespaces are opted in") || strings.Contains(only, "Jobs jobferry manages") {
		t.Errorf("a refusal for a registered worker only names more:\n%s", only)
	}
	if !(Findings{}).Clear() || f.Clear() {
		t.Error("Clear: want true for no findings only")
	}
}
