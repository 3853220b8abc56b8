package jobs

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A status write carries the status's changes and the resourceVersion it
// was read at, nothing of the Job's metadata: what is gone is null, what
// stayed is left out, a list that changed is whole.
func TestStatusPatchCarriesOnlyTheStatusChange(t *testing.T) {
	started := metav1.Unix(1000, 0)
	before := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "j", ResourceVersion: "41", Labels: map[string]string{"app": "train"}},
		Status: batchv1.JobStatus{
			StartTime: &started, Active: 2, Ready: ptr.To[int32](1),
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse, Reason: "Resumed"}},
		},
	}
	after := *before.Status.DeepCopy()
	after.Active, after.Ready, after.Succeeded = 0, nil, 2
	after.Conditions = append(after.Conditions, batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue})

	patch, err := statusPatch(before, after)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"resourceVersion": "41"},
		"status": map[string]any{
			"active": nil, "ready": nil, "succeeded": float64(2),
			"conditions": []any{
				map[string]any{"type": "Suspended", "status": "False", "reason": "Resumed", "lastProbeTime": nil, "lastTransitionTime": nil},
				map[string]any{"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": nil, "lastTransitionTime": nil},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status patch (-want +got):\n%s", diff)
	}
}
