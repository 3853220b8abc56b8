package jobstate

import (
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

var (
	keyMade = time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	key     = Key{Secret: []byte("0123456789abcdef0123456789abcdef"), Since: keyMade}
)

func job(annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "uid-1",
		CreationTimestamp: metav1.NewTime(keyMade.Add(time.Hour)), Annotations: annotations}}
}

func placedOn(worker string) *batchv1.Job {
	return Sealed(job(map[string]string{
		v1alpha1.WorkerAnnotation: worker, v1alpha1.DispatchAttemptAnnotation: "1",
		v1alpha1.ClusterSelectorAnnotation: "zone=a",
	}), key)
}

func TestVerify(t *testing.T) {
	cases := map[string]struct {
		job    *batchv1.Job
		want   Verdict
		naming []string
	}{
		"a Job jobferry never wrote on": {
			job: job(map[string]string{v1alpha1.ClusterSelectorAnnotation: "zone=a", v1alpha1.HeldForPlacementAnnotation: "true"}), want: Trusted,
		},
		"the state the manager sealed": {job: placedOn("w1"), want: Trusted},
		"its author changes a user input": {
			job: func() *batchv1.Job {
				j := placedOn("w1")
				j.Annotations[v1alpha1.ClusterSelectorAnnotation] = "zone=b"
				j.Annotations[v1alpha1.OnWorkerLostAnnotation] = v1alpha1.OnWorkerLostWait
				return j
			}(), want: Trusted,
		},
		"the placement moved to another worker": {
			job: func() *batchv1.Job {
				j := placedOn("w1")
				j.Annotations[v1alpha1.WorkerAnnotation] = "w2"
				return j
			}(), want: Tampered, naming: []string{v1alpha1.WorkerAnnotation, v1alpha1.DispatchAttemptAnnotation, v1alpha1.StateSealAnnotation},
		},
		"the attempt raised": {
			job: func() *batchv1.Job {
				j := placedOn("w1")
				j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2"
				return j
			}(), want: Tampered, naming: []string{v1alpha1.DispatchAttemptAnnotation},
		},
		"an annotation added": {
			job: func() *batchv1.Job {
				j := placedOn("w1")
				j.Annotations[v1alpha1.MirrorUIDAnnotation] = "someone-elses"
				return j
			}(), want: Tampered, naming: []string{v1alpha1.MirrorUIDAnnotation},
		},
		"an annotation removed": {
			job: func() *batchv1.Job {
				j := placedOn("w1")
				delete(j.Annotations, v1alpha1.DispatchAttemptAnnotation)
				return j
			}(), want: Tampered, naming: []string{v1alpha1.WorkerAnnotation},
		},
		"the state removed, its seal left": {
			job: func() *batchv1.Job {
				j := placedOn("w1")
				delete(j.Annotations, v1alpha1.WorkerAnnotation)
				delete(j.Annotations, v1alpha1.DispatchAttemptAnnotation)
				return j
			}(), want: Tampered, naming: []string{v1alpha1.StateSealAnnotation},
		},
		"what the namespace admitted, sealed with the placement": {
			job: Sealed(job(map[string]string{v1alpha1.WorkerAnnotation: "w1", v1alpha1.DispatchAttemptAnnotation: "1",
				v1alpha1.AdmittedPodsAnnotation: `{"charge":{"usage":{"pods":"1"}}}`}), key), want: Trusted,
		},
		"what the namespace admitted, changed": {
			job: func() *batchv1.Job {
				j := Sealed(job(map[string]string{v1alpha1.WorkerAnnotation: "w1", v1alpha1.DispatchAttemptAnnotation: "1",
					v1alpha1.AdmittedPodsAnnotation: `{"charge":{"usage":{"pods":"4"}}}`}), key)
				j.Annotations[v1alpha1.AdmittedPodsAnnotation] = `{"charge":{"usage":{"pods":"0"}}}`
				return j
			}(), want: Tampered, naming: []string{v1alpha1.AdmittedPodsAnnotation},
		},
		"what the namespace admitted, removed": {
			job: func() *batchv1.Job {
				j := Sealed(job(map[string]string{v1alpha1.WorkerAnnotation: "w1", v1alpha1.DispatchAttemptAnnotation: "1",
					v1alpha1.AdmittedPodsAnnotation: `{"charge":{"usage":{"pods":"4"}}}`}), key)
				delete(j.Annotations, v1alpha1.AdmittedPodsAnnotation)
				return j
			}(), want: Tampered, naming: []string{v1alpha1.WorkerAnnotation},
		},
		"what the namespace admitted, added to sealed state": {
			job: func() *batchv1.Job {
				j := placedOn("w1")
				j.Annotations[v1alpha1.AdmittedPodsAnnotation] = `{"charge":{"usage":{"pods":"0"}}}`
				return j
			}(), want: Tampered, naming: []string{v1alpha1.AdmittedPodsAnnotation},
		},
		"a placement written at creation": {
			job: job(map[string]string{v1alpha1.WorkerAnnotation: "w1"}), want: Tampered, naming: []string{v1alpha1.WorkerAnnotation},
		},
		"a seal copied from another Job": {
			job: func() *batchv1.Job {
				other := placedOn("w1")
				j := job(other.Annotations)
				j.UID = "uid-2"
				return j
			}(), want: Tampered, naming: []string{v1alpha1.WorkerAnnotation},
		},
		"a seal made with another key": {
			job: Sealed(job(map[string]string{v1alpha1.WorkerAnnotation: "w1"}), Key{Secret: []byte("another key")}), want: Tampered,
		},
		"unsealed state on a Job older than the key": {
			job: func() *batchv1.Job {
				j := job(map[string]string{v1alpha1.WorkerAnnotation: "w1", v1alpha1.DispatchAttemptAnnotation: "3"})
				j.CreationTimestamp = metav1.NewTime(keyMade.Add(-time.Minute))
				return j
			}(), want: Legacy,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, names := Verify(tc.job, key)
			if got != tc.want {
				t.Fatalf("Verify = %s, want %s", got, tc.want)
			}
			for _, n := range tc.naming {
				if !slices.Contains(names, n) {
					t.Errorf("names %q, want %s among them", names, n)
				}
			}
			if got == Tampered && len(names) == 0 {
				t.Error("a tampered Job names no annotation")
			}
		})
	}
}

func TestSealedLeavesNoSealWithoutState(t *testing.T) {
	j := placedOn("w1")
	delete(j.Annotations, v1alpha1.WorkerAnnotation)
	delete(j.Annotations, v1alpha1.DispatchAttemptAnnotation)
	if _, ok := Sealed(j, key).Annotations[v1alpha1.StateSealAnnotation]; ok {
		t.Error("a Job without sealed annotations keeps a seal")
	}
	if v, _ := Verify(Sealed(j, key), key); v != Trusted {
		t.Errorf("Verify = %s, want Trusted", v)
	}
}

func TestSealedLeavesTheJobItWasGivenBe(t *testing.T) {
	j := placedOn("w1")
	j.Annotations[v1alpha1.WorkerAnnotation] = "w2"
	given := j.DeepCopy()
	sealed := Sealed(j, key)
	if seal := sealed.Annotations[v1alpha1.StateSealAnnotation]; seal == "" || seal == given.Annotations[v1alpha1.StateSealAnnotation] {
		t.Fatalf("the move to w2 was not sealed anew: %q", seal)
	}
	if !reflect.DeepEqual(j, given) {
		t.Errorf("Sealed changed the Job it was given: %v, was %v", j.Annotations, given.Annotations)
	}
}

func TestOwned(t *testing.T) {
	for key, want := range map[string]bool{
		v1alpha1.WorkerAnnotation:           true,
		v1alpha1.HeldForPlacementAnnotation: true,
		v1alpha1.StateSealAnnotation:        true,
		"jobferry.dev/anything-new":         true,
		// An annotation key's prefix is validated in lowercase: these
		// are valid annotations, and jobferry's.
		"Jobferry.dev/worker":              true,
		"JOBFERRY.DEV/mirror-uid":          true,
		v1alpha1.ClusterSelectorAnnotation: false,
		v1alpha1.OnWorkerLostAnnotation:    false,
		"e2e.jobferry.dev/worker":          false,
		"example.com/team":                 false,
	} {
		if got := Owned(key); got != want {
			t.Errorf("Owned(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestAttempt(t *testing.T) {
	j := job(map[string]string{v1alpha1.DispatchAttemptAnnotation: "4"})
	j.Labels = map[string]string{v1alpha1.DispatchAttemptLabel: "9"}
	if got := Attempt(j); got != 4 {
		t.Errorf("Attempt = %d, want 4 (the annotation, not the label)", got)
	}
	j.Annotations = nil
	if got := Attempt(j); got != 0 {
		t.Errorf("Attempt without the annotation = %d, want 0 whatever the label says", got)
	}
}

func TestWithout(t *testing.T) {
	j := placedOn("w1")
	j.Annotations[v1alpha1.HeldForPlacementAnnotation] = "true"
	j.Annotations["example.com/team"] = "a"
	got := Without(j).Annotations
	want := map[string]string{v1alpha1.ClusterSelectorAnnotation: "zone=a", "example.com/team": "a"}
	if len(got) != len(want) || got[v1alpha1.ClusterSelectorAnnotation] != "zone=a" || got["example.com/team"] != "a" {
		t.Errorf("Without kept %v, want %v", got, want)
	}
	if _, ok := j.Annotations[v1alpha1.WorkerAnnotation]; !ok {
		t.Error("Without changed the Job it was given")
	}
}

// A mirror's attempt seal holds for its own origin UID and attempt under
// the key, for nothing else; it is a valid label value.
func TestAttemptSeal(t *testing.T) {
	key := []byte("k1")
	mirror := func(uid string, attempt, sealedAttempt int, sealKey []byte) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Labels: map[string]string{
			v1alpha1.OriginUIDLabel: uid, v1alpha1.DispatchAttemptLabel: strconv.Itoa(attempt),
			v1alpha1.AttemptSealLabel: AttemptSeal(sealKey, types.UID(uid), sealedAttempt)}}
	}
	if errs := validation.IsValidLabelValue(AttemptSeal(key, "u1", 1)); len(errs) > 0 {
		t.Errorf("the seal is no label value: %v", errs)
	}
	for name, tc := range map[string]struct {
		m    *metav1.ObjectMeta
		want bool
	}{
		"as sealed":                {mirror("u1", 2, 2, key), true},
		"its attempt raised since": {mirror("u1", 3, 2, key), false},
		"under another key":        {mirror("u1", 2, 2, []byte("k2")), false},
		"no seal":                  {&metav1.ObjectMeta{Labels: map[string]string{v1alpha1.OriginUIDLabel: "u1", v1alpha1.DispatchAttemptLabel: "2"}}, false},
		"another Job's seal, moved": {func() *metav1.ObjectMeta {
			m := mirror("u2", 2, 2, key)
			m.Labels[v1alpha1.OriginUIDLabel] = "u1"
			return m
		}(), false},
		"an attempt that is no number": {&metav1.ObjectMeta{Labels: map[string]string{v1alpha1.OriginUIDLabel: "u1", v1alpha1.DispatchAttemptLabel: "x"}}, false},
	} {
		if got := AttemptSealed(key, tc.m); got != tc.want {
			t.Errorf("%s: sealed %v, want %v", name, got, tc.want)
		}
	}
}

// A seal written before AdmittedPodsAnnotation was sealed (the seal's
// first version: every sealed annotation by presence and value, six of
// them) still verifies: an upgrade leaves every placed Job trusted.
func TestSealsFromBeforeTheAdmittedPodsStillVerify(t *testing.T) {
	j := job(map[string]string{v1alpha1.WorkerAnnotation: "w1", v1alpha1.DispatchAttemptAnnotation: "2", v1alpha1.MirrorUIDAnnotation: "m-1"})
	// The first version's seal, as it was computed (jobstate before
	// AdmittedPodsAnnotation), written out here rather than by Seal.
	old := "v1.ruP9h1HeWP5EVp3iiP7Uubltg3B45t_tHntP-34oWLM"
	j.Annotations[v1alpha1.StateSealAnnotation] = old
	if got, names := Verify(j, key); got != Trusted {
		t.Fatalf("a first-version seal verifies as %s (%v), want Trusted", got, names)
	}
}
