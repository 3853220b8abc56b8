package jobs

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestStatusOnlyChangeIsSkipped(t *testing.T) {
	base := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", ResourceVersion: "1", Generation: 1,
		Annotations: map[string]string{v1alpha1.WorkerAnnotation: "worker-1"}}}
	status := base.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.Active = 1
	if !statusOnlyChange(base, status) {
		t.Error("a status write is not recognised as status only")
	}
	for name, change := range map[string]func(*batchv1.Job){
		"annotation": func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "" },
		"finalizer":  func(j *batchv1.Job) { j.Finalizers = []string{v1alpha1.MirrorFinalizer} },
		"deletion":   func(j *batchv1.Job) { now := metav1.Now(); j.DeletionTimestamp = &now },
		"spec":       func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true); j.Generation = 2 },
	} {
		changed := base.DeepCopy()
		changed.ResourceVersion = "2"
		change(changed)
		if statusOnlyChange(base, changed) {
			t.Errorf("a %s change is taken for a status write and skipped", name)
		}
		if !(notOwnStatusWrite{}).Update(event.UpdateEvent{ObjectOld: base, ObjectNew: changed}) {
			t.Errorf("the predicate drops a %s change", name)
		}
	}
	if (notOwnStatusWrite{}).Update(event.UpdateEvent{ObjectOld: base, ObjectNew: status}) {
		t.Error("the predicate lets a status-only write through")
	}
	// A change of what the cache does not keep (the Job's own
	// annotations): the cached Job moves its resourceVersion only.
	unseen := base.DeepCopy()
	unseen.ResourceVersion = "2"
	if statusOnlyChange(base, unseen) || !(notOwnStatusWrite{}).Update(event.UpdateEvent{ObjectOld: base, ObjectNew: unseen}) {
		t.Error("a change the cache does not show is taken for a status write and dropped")
	}
}
