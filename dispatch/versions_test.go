package dispatch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/jobferry/jobferry/dispatch/dispatchtest"
)

// Each row has a sample, the sample sets that row's field and none of a
// later minor's, and a Job of none uses none: the e2e test of the table
// against real API servers uses these samples.
func TestVersionedFeaturesHaveOneSampleEach(t *testing.T) {
	if used := UsedFeatures(job("1", 1)); len(used) != 0 {
		t.Errorf("a plain Job uses %v", used)
	}
	gates := map[string]bool{}
	for _, f := range VersionedFeatures {
		if gates[f.Gate] {
			t.Errorf("gate %s has two rows", f.Gate)
		}
		gates[f.Gate] = true
		sample, ok := dispatchtest.FeatureSamples[f.Gate]
		if !ok {
			t.Errorf("no sample sets %s (%s)", f.Field, f.Gate)
			continue
		}
		j := job("1", 1)
		sample(j)
		for _, other := range VersionedFeatures {
			got := other.Uses(j)
			if other.Gate == f.Gate && !got || other.Since.GreaterThan(f.Since) && got {
				t.Errorf("the sample of %s: %s Uses = %v", f.Gate, other.Gate, got)
			}
		}
	}
	for gate := range dispatchtest.FeatureSamples {
		if !gates[gate] {
			t.Errorf("sample %s has no row", gate)
		}
	}
	if !slices.IsSortedFunc(VersionedFeatures, func(a, b VersionedFeature) int {
		if a.Since.LessThan(b.Since) {
			return -1
		}
		if b.Since.LessThan(a.Since) {
			return 1
		}
		return 0
	}) {
		t.Errorf("VersionedFeatures are not oldest first")
	}
}

func TestPlaceKnowsWorkerVersions(t *testing.T) {
	idle := res("cpu", "10", "pods", "100")
	at := func(name, v string, mods ...func(*Worker)) Worker {
		w := worker(name, pool("general", idle, idle))
		if v != "" {
			w.Version = version.MustParseGeneric(v)
		}
		for _, m := range mods {
			m(&w)
		}
		return w
	}
	workerMode := func(w *Worker) { w.WorkerJobController = true }
	podLevel := func(j *batchv1.Job) { dispatchtest.FeatureSamples["PodLevelResources"](j) }
	successPolicy := func(j *batchv1.Job) { dispatchtest.FeatureSamples["JobSuccessPolicy"](j) }
	cases := map[string]struct {
		job     *batchv1.Job
		workers []Worker
		want    string
		// rejected are the words each rejected worker's reason contains.
		rejected map[string][]string
		// never is what NeverFits says ("": the Job waits).
		never string
	}{
		"a plain Job goes anywhere, version known or not": {
			job: job("1", 1), workers: []Worker{at("a", ""), at("b", "v1.32.13")}, want: "a",
		},
		"pod-level resources go only where they are kept": {
			job: job("1", 1, podLevel), workers: []Worker{at("a", "v1.32.13"), at("b", "v1.34.0")}, want: "b",
			rejected: map[string][]string{"a": {"Kubernetes v1.32.13 there would drop", "spec.template.spec.resources, kept from v1.34 (feature gate PodLevelResources)"}},
		},
		"nowhere they are kept, the Job waits naming each version": {
			job: job("1", 1, podLevel, successPolicy), workers: []Worker{at("a", "v1.30.4"), at("b", "v1.33.1-eks-1")},
			rejected: map[string][]string{
				"a": {"Kubernetes v1.30.4", "spec.successPolicy, kept from v1.31", "spec.template.spec.resources, kept from v1.34"},
				"b": {"Kubernetes v1.33.1", "spec.template.spec.resources, kept from v1.34"},
			},
		},
		"a version not known yet holds back only Jobs that use a versioned field": {
			job: job("1", 1, podLevel), workers: []Worker{at("a", "")},
			rejected: map[string][]string{"a": {"version is not known yet", "spec.template.spec.resources"}},
		},
		"a worker running mirrors with jobferry's Job controller needs spec.managedBy kept": {
			job: job("1", 1), workers: []Worker{at("a", "v1.31.14", workerMode), at("b", "v1.32.0", workerMode)}, want: "b",
			rejected: map[string][]string{"a": {"its mirrors carry (jobController: Worker) spec.managedBy, kept from v1.32 (feature gate JobManagedBy)"}},
		},
		"the version would do once upgraded, the pools never: it never fits": {
			job: job("100", 1, podLevel), workers: []Worker{at("a", "v1.32.13")},
			rejected: map[string][]string{"a": {"Kubernetes v1.32.13"}}, never: "needs 100 cpu at once",
		},
		"a Job's own spec.managedBy is not the mirror's": {
			job: job("1", 1, dispatchtest.FeatureSamples["JobManagedBy"]), workers: []Worker{at("a", "v1.30.4")}, want: "a",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := Place(tc.job, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			if d.Worker != tc.want {
				t.Errorf("placed on %q, want %q (%s)", d.Worker, tc.want, d.Summary())
			}
			for w, words := range tc.rejected {
				if d.Codes[w] != ReasonKubernetesVersion {
					t.Errorf("%s rejected with code %q, want %s (%s)", w, d.Codes[w], ReasonKubernetesVersion, d.Rejected[w])
				}
				for _, word := range words {
					if !strings.Contains(d.Rejected[w], word) {
						t.Errorf("%s rejected with %q, want it to say %q", w, d.Rejected[w], word)
					}
				}
			}
			// What a worker's version rejects, an upgrade can change: it
			// waits rather than fails, unless the pools never fit.
			if why := NeverFits(tc.job, tc.workers); (why == "") != (tc.never == "") || !strings.Contains(why, tc.never) {
				t.Errorf("NeverFits = %q, want %q", why, tc.never)
			}
			for _, w := range tc.workers {
				code, why := Admits(tc.job, w)
				if rejected := tc.rejected[w.Name] != nil; rejected != (code == ReasonKubernetesVersion) {
					t.Errorf("Admits on %s = %s %q", w.Name, code, why)
				}
			}
		})
	}
}

// The oldest minor the charts claim is the one hack/tools builds beside the
// pinned one (its own module, its binaries in bin/kubernetes-1.N/), which
// the mixed-minor e2e tests run.
func TestOldestClaimedMinorIsBuilt(t *testing.T) {
	claimed, err := dispatchtest.OldestClaimedMinor("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("kubernetes-%d.%d", claimed.Major(), claimed.Minor())
	mod, err := os.ReadFile(filepath.Join("..", "hack", "tools", dir, "go.mod"))
	if err != nil {
		t.Fatalf("the charts claim v%s, and hack/tools has no module building it: %v", claimed, err)
	}
	if pin := fmt.Sprintf("k8s.io/kubernetes v%d.%d.", claimed.Major(), claimed.Minor()); !strings.Contains(string(mod), pin) {
		t.Errorf("hack/tools/%s/go.mod pins no %s*", dir, pin)
	}
	build, err := os.ReadFile(filepath.Join("..", "hack", "tools", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, binary := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if entry := dir + "/" + binary + "|"; !strings.Contains(string(build), entry) {
			t.Errorf("hack/tools/build.sh builds no %s", entry)
		}
	}
}
