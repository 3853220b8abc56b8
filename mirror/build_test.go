package mirror

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestBuild(t *testing.T) {
	uid := "4b1d"
	manager := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: "train", UID: "4b1d", ResourceVersion: "12",
			Labels: map[string]string{"app": "x", batchv1.ControllerUidLabel: uid, "controller-uid": uid, batchv1.JobNameLabel: "train", "job-name": "train",
				"kueue.x-k8s.io/queue-name": "team-queue", "kueue.x-k8s.io/priority-class": "high"},
			Annotations: map[string]string{"note": "keep", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
			Finalizers:  []string{v1alpha1.MirrorFinalizer},
		},
		Spec: batchv1.JobSpec{
			ManagedBy:               ptr.To(v1alpha1.ManagerManagedBy),
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}},
			ManualSelector:          ptr.To(false),
			TTLSecondsAfterFinished: ptr.To[int32](60),
			PodReplacementPolicy:    ptr.To(batchv1.Failed),
			BackoffLimitPerIndex:    ptr.To[int32](2),
			CompletionMode:          ptr.To(batchv1.IndexedCompletion),
			SuccessPolicy:           &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}},
			PodFailurePolicy:        &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", batchv1.ControllerUidLabel: uid, batchv1.JobNameLabel: "train"}},
				Spec:       corev1.PodSpec{NodeSelector: map[string]string{"a": "1"}},
			},
		},
		Status: batchv1.JobStatus{Active: 3},
	}
	directives := &v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"b": "2"}}
	id := Identity{Origin: "jobferry", UID: "4b1d", Attempt: 2}

	for name, tc := range map[string]struct {
		controller    v1alpha1.JobControllerMode
		wantManagedBy *string
	}{
		"builtin controller":  {controller: v1alpha1.JobControllerBuiltin},
		"jobferry controller": {controller: v1alpha1.JobControllerWorker, wantManagedBy: ptr.To(v1alpha1.WorkerManagedBy)},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Build(manager, id, tc.controller, directives)
			if err != nil {
				t.Fatal(err)
			}
			wantSpec := *manager.Spec.DeepCopy()
			wantSpec.ManagedBy = tc.wantManagedBy
			wantSpec.Selector, wantSpec.ManualSelector, wantSpec.TTLSecondsAfterFinished = nil, nil, nil
			wantSpec.Template.Labels = map[string]string{"app": "x"}
			wantSpec.Template.Spec.NodeSelector = map[string]string{"a": "1", "b": "2"}
			want := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: "team", Name: "train",
					Labels:      map[string]string{"app": "x", v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: uid, v1alpha1.DispatchAttemptLabel: "2"},
					Annotations: map[string]string{"note": "keep"},
				},
				Spec: wantSpec,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mirror (-want +got):\n%s", diff)
			}
			if !IsMirrorOf(got, "jobferry", manager.UID) || IsMirrorOf(got, "other-origin", manager.UID) || IsMirrorOf(got, "jobferry", "another-uid") {
				t.Error("IsMirrorOf does not recognise exactly its own mirror")
			}
		})
	}
}

func TestIsMirrorOfRejectsForeignJobs(t *testing.T) {
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Labels: map[string]string{"app": "x"}}}
	if IsMirrorOf(foreign, "jobferry", "") {
		t.Error("a Job without origin labels is taken for a mirror")
	}
}

// The labels the manager reads of a Job on a worker (IdentityLabelKeys,
// all the mirror cache keeps of jobferry's) are those a mirror's identity
// gives it, and the seal of its attempt.
func TestIdentityLabelKeysAreTheIdentitysLabels(t *testing.T) {
	labels := Identity{Origin: "o", UID: "u", Attempt: 2, Manager: "m"}.Labels()
	labels[v1alpha1.AttemptSealLabel] = "sealed by the manager as it creates the mirror"
	if len(labels) != len(IdentityLabelKeys) {
		t.Errorf("a mirror's identity gives %d labels, IdentityLabelKeys lists %d", len(labels), len(IdentityLabelKeys))
	}
	for _, k := range IdentityLabelKeys {
		if _, ok := labels[k]; !ok {
			t.Errorf("IdentityLabelKeys lists %s, which a mirror's identity does not give", k)
		}
	}
}
