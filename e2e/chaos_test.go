//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jobferry/jobferry/devtools/chaos"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// A short chaos run: a few hundred Jobs of every shape through three workers
// while tens of faults drawn from the seed of the day hit the manager's
// replicas, the clusters' API servers, etcd, credentials, webhooks,
// namespaces and nodes, overlapping; the checker finds no broken promise in
// the recorded history. CHAOS_SEED replays another day's seed.
func TestChaosShortRun(t *testing.T) {
	seed := chaos.SeedOfTheDay(time.Now())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
	}
	const span = 150 * time.Second
	t.Logf("seed %d (replay: CHAOS_SEED=%d go test -tags e2e ./e2e -run TestChaosShortRun, or bin/jobferry-dev chaos --seed=%d --span=%s)", seed, seed, seed, span)
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	report, err := chaos.Run(t.Context(), chaos.Options{
		Seed: seed, Span: span, Dir: filepath.Join(root, "_output", "e2e", "chaos"), Progress: testWriter{t},
	})
	if report != nil {
		t.Logf("\n%s", report)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Not a run that tested nothing: the plan's faults happened, and the
	// Jobs ran.
	injected, jobs := 0, 0
	for _, f := range report.ByFault {
		injected += f.Injected
	}
	for _, s := range report.ByShape {
		jobs += s.Jobs
	}
	if injected < 10 || jobs < 200 {
		t.Errorf("%d faults injected and %d Jobs seen: want tens of faults and a few hundred Jobs", injected, jobs)
	}
	if !report.Passed() {
		t.Errorf("%d of jobferry's promises broken (seed %d): the report above shows each with its Job's history", len(report.Violations), seed)
	}
}
