package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// AdmittedPods is what a manager namespace admitted of a Job's pods, as the
// server-side dry-run of one of them came back from its admission plugins
// and webhooks (AdmittedPodsAnnotation).
type AdmittedPods struct {
	// Containers and InitContainers are the resources of each container, by
	// name, that admission set or changed (LimitRange defaults): the mirror
	// gets them, so the pods run with what the manager namespace gives them.
	// +optional
	Containers map[string]corev1.ResourceRequirements `json:"containers,omitempty"`
	// +optional
	InitContainers map[string]corev1.ResourceRequirements `json:"initContainers,omitempty"`
	// Charge is what each of the Job's pods charges to the namespace's
	// ResourceQuotas (counted times the pods the Job runs at once, as its
	// parallelism is now).
	Charge QuotaCharge `json:"charge"`
}

// QuotaCharge is what one of a Job's pods charges to a namespace's
// ResourceQuotas, and what their scopes read of it.
type QuotaCharge struct {
	// PerPod is one pod's usage in the ResourceQuota's resource names
	// (pods, requests.cpu, limits.memory, ...).
	PerPod corev1.ResourceList `json:"perPod"`
	// PriorityClassName of the pods (the PriorityClass scope).
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Terminating: the pods have an activeDeadlineSeconds (the Terminating
	// and NotTerminating scopes).
	// +optional
	Terminating bool `json:"terminating,omitempty"`
	// BestEffort: the pods are of the BestEffort QoS class.
	// +optional
	BestEffort bool `json:"bestEffort,omitempty"`
	// CrossNamespaceAffinity: the pods' affinity terms name other
	// namespaces (the CrossNamespacePodAffinity scope).
	// +optional
	CrossNamespaceAffinity bool `json:"crossNamespaceAffinity,omitempty"`
}
