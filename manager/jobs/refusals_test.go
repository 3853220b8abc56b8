package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

func TestClassify(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	tooLong := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "big",
		field.ErrorList{field.TooLong(field.NewPath("metadata", "annotations"), "", 262144)})
	cases := map[string]struct {
		err  error
		want refusal
	}{
		"conflict":                       {apierrors.NewConflict(jobs, "x", errors.New("changed")), conflict},
		"forbidden":                      {apierrors.NewForbidden(jobs, "x", errors.New("no RBAC")), forbidden},
		"invalid, wrapped with context":  {fmt.Errorf("recording the placement on w: %w", tooLong), rejected},
		"bad request":                    {apierrors.NewBadRequest("no"), rejected},
		"entity too large":               {apierrors.NewRequestEntityTooLargeError("too big"), rejected},
		"timeout is worth a retry":       {apierrors.NewTimeoutError("slow", 1), transient},
		"a connection error is too":      {errors.New("connection refused"), transient},
		"the server unavailable is too":  {apierrors.NewServiceUnavailable("down"), transient},
		"too many requests is transient": {apierrors.NewTooManyRequests("later", 1), transient},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify = %d, want %d", got, tc.want)
			}
			if got, want := reported(tc.err), tc.want == forbidden || tc.want == rejected; got != want {
				t.Errorf("reported = %t, want %t", got, want)
			}
		})
	}
	if got := apiMessage(fmt.Errorf("context: %w", tooLong)); got != tooLong.ErrStatus.Message {
		t.Errorf("apiMessage = %q, want the API server's %q", got, tooLong.ErrStatus.Message)
	}
}

func TestRefusalMemo(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", UID: "uid-1", ResourceVersion: "10", Generation: 1}}
	memo := newRefusalMemo()
	if memo.blocked(job, policy.WritePlacement) {
		t.Fatal("blocked before any refusal")
	}
	memo.remember(job, policy.WritePlacement)
	memo.remember(job, policy.WriteMirrorSpec)
	if !memo.blocked(job, policy.WritePlacement) || !memo.blocked(job, policy.WriteMirrorSpec) {
		t.Fatal("not blocked right after the refusals")
	}
	if memo.blocked(job, policy.WriteMirror) {
		t.Error("a write that was not refused is blocked")
	}

	// jobferry's own status write keeps the placement refusal in force.
	memo.followOwnWrite(job, "11")
	job.ResourceVersion = "11"
	if !memo.blocked(job, policy.WritePlacement) {
		t.Error("the placement is retried after jobferry's own status write")
	}

	// A user's change (new resourceVersion, same spec) retries the placement
	// but not the spec update, which waits for a new generation.
	job.ResourceVersion = "12"
	if memo.blocked(job, policy.WritePlacement) {
		t.Error("the placement stays blocked after the Job changed")
	}
	if !memo.blocked(job, policy.WriteMirrorSpec) {
		t.Error("the spec update is retried without a new spec")
	}
	job.Generation = 2
	if memo.blocked(job, policy.WriteMirrorSpec) {
		t.Error("the spec update stays blocked after a new spec")
	}

	// A later Job of the same name starts clean, and forget drops all.
	memo.remember(job, policy.WriteMirrorSpec)
	again := job.DeepCopy()
	again.UID = types.UID("uid-2")
	if memo.blocked(again, policy.WriteMirrorSpec) {
		t.Error("a new Job of the same name inherits a refusal")
	}
	memo.forget(types.NamespacedName{Namespace: "ns", Name: "j"})
	if memo.blocked(job, policy.WriteMirrorSpec) {
		t.Error("still blocked after forget")
	}
}

// A rejected mirror deletion is tried again after a while, and said so: it
// is not held back until the Job changes (nothing on the Job could make it
// acceptable, and a stale attempt's mirror must not be given up). Other
// rejected writes are.
func TestRefusedWithRetryAfterIsNotHeldBack(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	r := &JobReconciler{Recorder: recorder}
	r.memory.refusals = newRefusalMemo()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", UID: "uid-1", ResourceVersion: "10"}}
	rejected := apierrors.NewBadRequest("deletes of this Job are not allowed")
	result, err := r.refused(context.Background(), job, policy.WriteMirrorGone, "deleting the mirror", "worker cluster w1's API server", rejected)
	if !errors.Is(err, errRefused) || result.RequeueAfter != policy.WriteMirrorGone.RetryAfter || policy.WriteMirrorGone.RetryAfter == 0 {
		t.Errorf("refused = %+v, %v; want a retry after %s", result, err, policy.WriteMirrorGone.RetryAfter)
	}
	if r.memory.refusals.blocked(job, policy.WriteMirrorGone) {
		t.Error("the rejected mirror deletion is held back until the Job changes")
	}
	if e := <-recorder.Events; !strings.Contains(e, "MirrorDeleteRejected") || !strings.Contains(e, "retrying in 1m0s") {
		t.Errorf("Event %q does not say the deletion is tried again", e)
	}
	result, err = r.refused(context.Background(), job, policy.WritePlacement, "recording the placement", "the manager cluster's API server", rejected)
	if !errors.Is(err, errRefused) || result.RequeueAfter != 0 || !r.memory.refusals.blocked(job, policy.WritePlacement) {
		t.Errorf("a rejected placement: %+v, %v, blocked %t; want it held back until the Job changes", result, err, r.memory.refusals.blocked(job, policy.WritePlacement))
	}
	if e := <-recorder.Events; !strings.Contains(e, "not retried until the Job changes") {
		t.Errorf("Event %q does not say the placement waits for a change", e)
	}
}
