package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool is the capacity of the nodes of a worker that share one value of
// the pool label.
type NodePool struct {
	// Name is the value of the pool label shared by the pool's nodes.
	Name string `json:"name"`
	// Nodes counts the pool's schedulable, ready nodes.
	Nodes int32 `json:"nodes"`
	// Labels common to every node of the pool.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Taints common to every node of the pool.
	// +optional
	// +listType=atomic
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Allocatable is the sum of the nodes' allocatable resources.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Requested is the sum of the requests of the pool's non-terminal pods,
	// counting terminating pods, which still hold their resources (KEP-3939).
	// +optional
	Requested corev1.ResourceList `json:"requested,omitempty"`
	// Free is Allocatable minus Requested.
	// +optional
	Free corev1.ResourceList `json:"free,omitempty"`
}

// ClusterCapacitySpec configures how the worker summarises its nodes.
type ClusterCapacitySpec struct {
	// PoolLabel is the node label whose values name the pools.
	// +kubebuilder:default="jobferry.dev/pool"
	// +optional
	PoolLabel string `json:"poolLabel,omitempty"`
}

// ClusterCapacityStatus is the capacity summary of one worker.
type ClusterCapacityStatus struct {
	// Pools are the worker's ready, schedulable nodes grouped by their value
	// of the pool label (those without it in the pool "default"), sorted by
	// name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Pools []NodePool `json:"pools,omitempty"`
	// HeartbeatTime is when the worker last confirmed this summary.
	// +optional
	HeartbeatTime *metav1.Time `json:"heartbeatTime,omitempty"`
}

// ClusterCapacity is the singleton capacity summary a worker publishes so the
// manager reads one small object per worker instead of watching its pods.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ccap,categories=jobferry
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="ClusterCapacity is a singleton: its name must be 'cluster'"
// +kubebuilder:printcolumn:name="Pools",type=string,JSONPath=`.status.pools[*].name`
// +kubebuilder:printcolumn:name="Nodes",type=string,JSONPath=`.status.pools[*].nodes`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.heartbeatTime`
type ClusterCapacity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ClusterCapacitySpec `json:"spec,omitempty"`
	// +optional
	Status ClusterCapacityStatus `json:"status,omitempty"`
}

// ClusterCapacityList is a list of ClusterCapacity objects.
// +kubebuilder:object:root=true
type ClusterCapacityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterCapacity `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterCapacity{}, &ClusterCapacityList{})
}
