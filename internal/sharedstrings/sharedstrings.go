// Package sharedstrings makes the Jobs the manager keeps in its caches share
// the strings every Job repeats. A Job decoded from the API server holds its
// own copy of each label and annotation key, of its namespace, of its
// containers' and resources' names and of its conditions' types, reasons
// and messages: at 100,000 cached Jobs those copies are most of the
// metadata's memory. The canonical copies come from the standard library's
// package unique, whose table holds a string only while something refers
// to it.
package sharedstrings

import (
	"unique"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Canonical is the canonical copy of s.
func Canonical(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// Keys makes m's keys canonical copies, in place: assigning to a key Go
// already holds replaces the key it stores with the one assigned.
func Keys(m map[string]string) {
	for k, v := range m {
		m[Canonical(k)] = v
	}
}

// Job makes job's repeated strings canonical, in place: its namespace, its
// and its template's label and annotation keys, its containers' names and
// the names of what they request, its conditions' types, reasons and
// messages; and its containers' requests and limits the shared maps of
// their kind (ResourceList), which the Job's readers must not write. Labels holding the Job's name or UID (the API server's
// job-name and controller-uid labels) share those fields' bytes.
func Job(job *batchv1.Job) {
	Meta(&job.ObjectMeta)
	for k, v := range job.Labels {
		switch v {
		case job.Name:
			job.Labels[k] = job.Name
		case string(job.UID):
			job.Labels[k] = string(job.UID)
		}
	}
	Keys(job.Spec.Template.Labels)
	Keys(job.Spec.Template.Annotations)
	for _, containers := range [][]corev1.Container{job.Spec.Template.Spec.InitContainers, job.Spec.Template.Spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.Name = Canonical(c.Name)
			resourceNames(c.Resources.Requests)
			resourceNames(c.Resources.Limits)
			c.Resources.Requests = ResourceList(c.Resources.Requests)
			c.Resources.Limits = ResourceList(c.Resources.Limits)
		}
	}
	Conditions(job.Status.Conditions)
}

// Meta makes an object's namespace and its label and annotation keys
// canonical.
func Meta(meta *metav1.ObjectMeta) {
	meta.Namespace = Canonical(meta.Namespace)
	Keys(meta.Labels)
	Keys(meta.Annotations)
}

// Conditions makes the conditions' types, reasons and messages canonical:
// the Job controller writes the same few for every Job.
func Conditions(conditions []batchv1.JobCondition) {
	for i := range conditions {
		c := &conditions[i]
		c.Type = batchv1.JobConditionType(Canonical(string(c.Type)))
		c.Reason, c.Message = Canonical(c.Reason), Canonical(c.Message)
	}
}

func resourceNames(list corev1.ResourceList) {
	for name, quantity := range list {
		list[corev1.ResourceName(Canonical(string(name)))] = quantity
	}
}
