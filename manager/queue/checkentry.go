package queue

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/manager/queue/workload"
)

// ControllerName is the spec.controllerName of the AdmissionChecks
// jobferry answers.
const ControllerName = "jobferry.dev/dispatch"

// FieldOwner is the field manager under which jobferry applies its entry
// of a Workload's status.admissionChecks.
const FieldOwner = "jobferry-dispatch"

// checkEntry is the Workload status jobferry applies: its own entry of
// status.admissionChecks and nothing else, on the Workload's version as
// read (resourceVersion version; "" for none).
func checkEntry(namespace, workload, version, check string, u workload.CheckUpdate, now metav1.Time) (*unstructured.Unstructured, error) {
	entry := kueue.AdmissionCheckState{
		Name: kueue.AdmissionCheckReference(check), State: u.State, Message: u.Message, LastTransitionTime: now,
		PodSetUpdates: u.Updates, RequeueAfterSeconds: u.RequeueAfterSeconds,
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&entry)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding check %s: %w", describe(namespace, workload), check, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueue.GroupVersion.String(), "kind": "Workload",
		"metadata": map[string]any{"namespace": namespace, "name": workload},
		"status":   map[string]any{"admissionChecks": []any{fields}},
	}}
	if version != "" {
		// A precondition: the entry is decided on the Workload as read,
		// and Kueue may have changed it since (evicted it, resetting every
		// check to Pending). Applied over that, a Ready would tell Kueue
		// of a placement already let go; a Retry, on a Workload already
		// evicted, would hold it out of the queue for good (Kueue acts on
		// a Retry only by evicting). The API server refuses the apply as a
		// Conflict instead, and the Job is reconciled on what Kueue wrote.
		obj.SetResourceVersion(version)
	}
	return obj, nil
}

// describe names a Workload for an error.
func describe(namespace, name string) string { return fmt.Sprintf("Workload %s/%s", namespace, name) }
