// Package v1alpha1 holds the jobferry.dev/v1alpha1 API: WorkerCluster, which the
// manager cluster uses to know its workers, and ClusterCapacity, the per-worker
// capacity summary the worker binary publishes. Deepcopy code and CRD manifests
// are generated from these types by controller-gen (`make generate`).
//
// +kubebuilder:object:generate=true
// +groupName=jobferry.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "jobferry.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
