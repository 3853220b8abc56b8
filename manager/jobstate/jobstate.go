// Package jobstate says which of a manager Job's annotations are jobferry's
// own state — what the manager reads back as its own decisions: the
// placement, the dispatch attempt, the mirror it created, the workers it
// excluded, the scheduling it recorded — and seals them, so that state
// someone else wrote or changed is never taken for jobferry's.
//
// Two guards keep that state jobferry's. The API server refuses, by a
// ValidatingAdmissionPolicy the manager chart ships (admission.StatePolicy),
// any request but the manager's that sets or changes one of these
// annotations: it holds while the manager's webhooks are down. And the
// manager seals what it writes with an HMAC under a key only it holds (a
// Secret in its own namespace): a Job whose state does not match its seal
// is not acted on, whatever the annotations say — should the policy be
// missing, or someone with the rights to bypass it write there.
//
// Everything here is pure; the key comes from the caller.
package jobstate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Prefix is the domain of jobferry's annotations and labels.
const Prefix = "jobferry.dev/"

// InDomain: key is in jobferry's domain, whatever the case of its prefix.
// The API server validates an annotation key in lowercase, so
// "Jobferry.dev/worker" is a valid one; matched exactly, it would pass
// every filter of jobferry's keys (the state policy, the mirror's) as
// someone else's.
func InDomain(key string) bool {
	return len(key) >= len(Prefix) && strings.EqualFold(key[:len(Prefix)], Prefix)
}

// UserInputs are the jobferry.dev/ annotations a Job's author writes: input
// jobferry validates, never a decision of its own.
var UserInputs = []string{v1alpha1.ClusterSelectorAnnotation, v1alpha1.OnWorkerLostAnnotation}

// SealedAnnotations are the annotations the manager writes and reads back
// as its own decisions, in the order the seal covers them.
var SealedAnnotations = append(slices.Clone(sealedAlways), sealedWhenPresent...)

// sealedAlways are covered by the seal whether present or not (the seal's
// first version).
var sealedAlways = []string{
	v1alpha1.WorkerAnnotation,
	v1alpha1.DispatchAttemptAnnotation,
	v1alpha1.MirrorUIDAnnotation,
	v1alpha1.ExcludedWorkersAnnotation,
	v1alpha1.UserSchedulingAnnotation,
	v1alpha1.InjectedDirectivesAnnotation,
}

// sealedWhenPresent were added to the seal later: covered, by name and
// value, when present, and not at all when absent, so a seal written before
// they existed still verifies (an upgrade leaves every placed Job trusted),
// while adding, changing or removing one still breaks the seal.
var sealedWhenPresent = []string{
	v1alpha1.AdmittedPodsAnnotation,
	v1alpha1.QueuedAnnotation,
}

// Owned reports whether a jobferry.dev/ annotation or label key on a
// manager Job is jobferry's, which only the manager may set or change:
// every one but the UserInputs. HeldForPlacementAnnotation is owned too,
// but the opt-in webhook sets it at creation for the Job's author, so it
// is not sealed: it says only that the Job should start once placed,
// which its author could have asked for by not suspending it.
func Owned(key string) bool {
	return InDomain(key) && !slices.Contains(UserInputs, key)
}

// Key seals jobferry's state. Since is when it was made: a Job created
// before then may carry state an earlier manager wrote without a seal (or
// under a key since lost), which is adopted once; any later Job must carry
// a matching seal.
type Key struct {
	Secret []byte
	Since  time.Time
}

// KeySource gives the key that seals jobferry's state (statekey.Keys; a
// fixed key in unit tests).
type KeySource interface {
	Key(ctx context.Context) (Key, error)
}

// sealVersion prefixes every seal, so a later format can tell its own.
const sealVersion = "v1."

// Seal is the seal of job's sealed annotations under key: an HMAC-SHA256
// of the Job's UID and each sealed annotation, present or not, so that
// neither a value nor an annotation's presence can change unnoticed, nor a
// seal move to another Job.
func Seal(key []byte, job *batchv1.Job) string {
	mac := hmac.New(sha256.New, key)
	write := func(s string) {
		mac.Write([]byte(strconv.Itoa(len(s))))
		mac.Write([]byte{':'})
		mac.Write([]byte(s))
	}
	write("jobferry.dev/state-seal")
	write(string(job.UID))
	for _, name := range sealedAlways {
		value, ok := job.Annotations[name]
		if !ok {
			write("-")
			continue
		}
		write("+" + name)
		write(value)
	}
	for _, name := range sealedWhenPresent {
		if value, ok := job.Annotations[name]; ok {
			write("+" + name)
			write(value)
		}
	}
	return sealVersion + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Sealed is the Job with its seal matching its sealed annotations now (none
// when it carries none): what every manager write of a Job leaves. It
// shares all but its annotations with job (every manager write is sealed:
// a whole copy each was 2 % of what the manager allocated).
func Sealed(job *batchv1.Job, key Key) *batchv1.Job {
	out := withOwnAnnotations(job)
	if len(present(out)) == 0 {
		delete(out.Annotations, v1alpha1.StateSealAnnotation)
		return out
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[v1alpha1.StateSealAnnotation] = Seal(key.Secret, out)
	return out
}

// Verdict is what Verify makes of a Job's state.
type Verdict int

const (
	// Trusted: no sealed annotation, or a seal that matches them.
	Trusted Verdict = iota
	// Legacy: unsealed, but the Job is older than the key: state an
	// earlier manager wrote, adopted and sealed anew.
	Legacy
	// Tampered: state the manager did not write, or changed since it did.
	Tampered
)

func (v Verdict) String() string {
	return [...]string{"Trusted", "Legacy", "Tampered"}[v]
}

// Verify says whether the Job's sealed annotations are the manager's, and,
// when they are not, names the ones present (and the seal), for the
// message that says so.
func Verify(job *batchv1.Job, key Key) (Verdict, []string) {
	names := present(job)
	seal, sealed := job.Annotations[v1alpha1.StateSealAnnotation]
	switch {
	case len(names) == 0 && !sealed:
		return Trusted, nil
	case sealed && hmac.Equal([]byte(seal), []byte(Seal(key.Secret, job))):
		return Trusted, nil
	case PredatesKey(job, key):
		return Legacy, nil
	}
	if sealed {
		names = append(names, v1alpha1.StateSealAnnotation)
	}
	return Tampered, names
}

// PredatesKey: the Job was created before the key was made, so an earlier
// manager may have written its state without a seal (or recorded no mirror
// UID).
func PredatesKey(job *batchv1.Job, key Key) bool {
	created := job.CreationTimestamp.Time
	return !created.IsZero() && created.Before(key.Since)
}

// present lists the sealed annotations the Job carries.
func present(job *batchv1.Job) []string {
	var out []string
	for _, name := range SealedAnnotations {
		if _, ok := job.Annotations[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// AttemptSeal seals a mirror's origin UID and dispatch attempt under key,
// as a label value (v1alpha1.AttemptSealLabel): 32 hex digits of an
// HMAC-SHA256, which no one without the key can make for another Job or
// attempt.
func AttemptSeal(key []byte, uid types.UID, attempt int) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("jobferry.dev/attempt-seal:" + string(uid) + ":" + strconv.Itoa(attempt)))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// AttemptSealed: the mirror's attempt-seal label matches its origin UID and
// attempt labels under key (a mirror the manager created, as it was made).
func AttemptSealed(key []byte, m metav1.Object) bool {
	labels := m.GetLabels()
	attempt, err := strconv.Atoi(labels[v1alpha1.DispatchAttemptLabel])
	if err != nil {
		return false
	}
	want := AttemptSeal(key, types.UID(labels[v1alpha1.OriginUIDLabel]), attempt)
	return hmac.Equal([]byte(labels[v1alpha1.AttemptSealLabel]), []byte(want))
}

// Attempt is the dispatch attempt the manager Job records (0: never
// placed). Only the annotation counts: a label on a manager Job is nobody's
// decision.
func Attempt(job *batchv1.Job) int {
	n, err := strconv.Atoi(job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Without is the Job without jobferry's annotations: what its mirror is
// built from, so that no state of the manager's travels to a worker, where
// it would mean nothing. It shares all but its annotations with job: to
// read (mirror.Build copies what it takes).
func Without(job *batchv1.Job) *batchv1.Job {
	out := withOwnAnnotations(job)
	for name := range out.Annotations {
		if Owned(name) {
			delete(out.Annotations, name)
		}
	}
	return out
}

// withOwnAnnotations is a shallow copy of job with a copy of its
// annotations, to change.
func withOwnAnnotations(job *batchv1.Job) *batchv1.Job {
	out := *job
	out.Annotations = maps.Clone(job.Annotations)
	return &out
}
