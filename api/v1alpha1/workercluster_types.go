package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobControllerMode says which controller runs mirror Jobs on a worker.
// +kubebuilder:validation:Enum=Builtin;Worker
type JobControllerMode string

const (
	// JobControllerBuiltin leaves mirrors to the worker's kube-controller-manager.
	JobControllerBuiltin JobControllerMode = "Builtin"
	// JobControllerWorker gives mirrors spec.managedBy jobferry.dev/worker, so the
	// jobferry worker binary runs them instead.
	JobControllerWorker JobControllerMode = "Worker"
)

// ConditionReady summarises the others, for what reads one condition
// (kubectl wait, kstatus, Argo CD and Flux health checks): True while the
// worker is connected, its credential has every right the manager uses
// (Authorized), it is jobferry's alone (OriginExclusive) and its token has
// not expired (CredentialRenewal); False with the reason and message of
// the first of them that is not so. A cordoned worker is Ready: it takes no
// new Job because it was asked not to, not because something is wrong.
const ConditionReady = "Ready"

// ReasonReady: every condition Ready summarises holds.
const ReasonReady = "Ready"

// ConditionConnected is True while the manager can reach the worker's API server.
const ConditionConnected = "Connected"

// ConditionAuthorized is True while the worker's credential has every right
// the manager uses there; False names the missing ones, and no new Job is
// placed on the worker until they are granted.
const ConditionAuthorized = "Authorized"

// ConditionCredentialRenewal is present while the worker credential is a
// token that expires: True while it is valid and the manager renews it in
// time, False (reason CredentialExpiring) when a renewal failed, well before
// the token expires, or when the manager cannot renew it.
const ConditionCredentialRenewal = "CredentialRenewal"

// ConditionOriginExclusive is True while no mirror of another manager
// installation with this manager's origin has been seen on the worker;
// False (reason OriginShared) names one: two managers with one origin would
// take each other's mirrors for their own, so until one changes its origin
// this manager deletes no mirror there it cannot tell is its own.
const ConditionOriginExclusive = "OriginExclusive"

// Reasons of the OriginExclusive condition.
const (
	// ReasonOriginExclusive: no mirror of another manager installation
	// with this manager's origin was seen there.
	ReasonOriginExclusive = "OriginExclusive"
	// ReasonOriginShared: a mirror of another manager installation with
	// this manager's origin was seen there (the message names it).
	ReasonOriginShared = "OriginShared"
)

// SecretKeyRef points at one key of a Secret in the manager's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key in the Secret holding the kubeconfig.
	// +kubebuilder:default=kubeconfig
	// +optional
	Key string `json:"key,omitempty"`
}

// DefaultKubeConfigKey is the Secret key read when SecretKeyRef.Key is empty.
const DefaultKubeConfigKey = "kubeconfig"

// KeyOrDefault is the key to read: Key, or DefaultKubeConfigKey when it is
// empty (a WorkerCluster written before defaulting, or a client's copy).
func (r SecretKeyRef) KeyOrDefault() string {
	if r.Key == "" {
		return DefaultKubeConfigKey
	}
	return r.Key
}

// KubeConfigSource says where the kubeconfig for a worker is.
type KubeConfigSource struct {
	// SecretRef is a Secret in the manager's namespace holding a kubeconfig for
	// the worker. Kubeconfigs with exec plugins, token or certificate file paths,
	// or insecure-skip-tls-verify are rejected.
	SecretRef SecretKeyRef `json:"secretRef"`
}

// SchedulingDirectives are merged into the pod template of every Job placed on
// a worker (KEP-2926), so its pods land on the nodes meant for dispatched work.
type SchedulingDirectives struct {
	// NodeSelector is added to the pod template's nodeSelector; a key the
	// Job sets to another value makes the Job not fit this worker.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations are added to the pod template's, unless already there.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeAffinity is combined with the pod template's: its required terms
	// with the Job's by AND (every term of the Job joined with every term
	// of the worker), its preferred terms appended.
	// +optional
	NodeAffinity *corev1.NodeAffinity `json:"nodeAffinity,omitempty"`
}

// WorkerClusterSpec describes how to reach a worker and what to inject into
// Jobs placed on it.
type WorkerClusterSpec struct {
	KubeConfig KubeConfigSource `json:"kubeConfig"`
	// +optional
	Scheduling SchedulingDirectives `json:"scheduling,omitempty"`
	// Cordoned stops new placements on this worker; Jobs already there continue.
	// +optional
	Cordoned bool `json:"cordoned,omitempty"`
	// JobController says which controller runs mirrors on this worker.
	// +kubebuilder:default=Builtin
	// +optional
	JobController JobControllerMode `json:"jobController,omitempty"`
	// Namespaces limits the manager to these namespaces of the worker, where
	// its credential has Roles (the worker chart's namespaced mode) rather
	// than a ClusterRole. Empty: every namespace. Jobs from other namespaces
	// are not placed here, and the manager creates no namespace here.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
	// QuotaCap is the most this worker adds, per resource, to the nominal
	// quota of a ClusterQueue that follows capacity
	// (QuotaFromCapacityAnnotation). A worker's capacity is what it
	// publishes, and whoever can write its nodes' status (a node
	// credential) can inflate it: the cap bounds what that buys across all
	// workers' queues. A resource it does not list is not capped; the
	// capacity above a cap is logged each time the quota is set.
	// +optional
	QuotaCap corev1.ResourceList `json:"quotaCap,omitempty"`
}

// WorkerClusterStatus is what the manager last observed of a worker.
type WorkerClusterStatus struct {
	// Conditions are Ready, which summarises the others, Connected,
	// Authorized, CredentialRenewal (for a token that expires) and
	// OriginExclusive.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Capacity is the last ClusterCapacity summary read from the worker.
	// +optional
	Capacity *ClusterCapacityStatus `json:"capacity,omitempty"`
	// DispatchedJobs counts unfinished Jobs placed on this worker (refreshed
	// within seconds of a change).
	// +optional
	DispatchedJobs int32 `json:"dispatchedJobs"`
	// RunningJobs counts placed Jobs with at least one active pod.
	// +optional
	RunningJobs int32 `json:"runningJobs"`
	// KubernetesVersion is the worker's Kubernetes version, as its API
	// server last reported it (its gitVersion); empty until the manager
	// has read it. A Job using a field that version drops is not placed
	// there (docs/reference/compatibility.md).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Credential describes the token in the worker's kubeconfig Secret, when
	// it is one the manager can read: whose it is and when it expires.
	// +optional
	Credential *CredentialStatus `json:"credential,omitempty"`
}

// CredentialStatus describes a worker credential that is a bearer token
// (a JSON Web Token, as the TokenRequest API issues).
type CredentialStatus struct {
	// ServiceAccount the token belongs to on the worker, namespace/name;
	// empty when it is not a service-account token.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// IssuedAt is when the token was issued.
	// +optional
	IssuedAt *metav1.Time `json:"issuedAt,omitempty"`
	// ExpiresAt is when the token expires; unset for a token without expiry.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// RenewAt is when the manager renews the token (TokenRequest for its
	// ServiceAccount on the worker) and writes the new one into the Secret.
	// +optional
	RenewAt *metav1.Time `json:"renewAt,omitempty"`
}

// WorkerCluster is a cluster the manager dispatches Jobs to.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wc,categories=jobferry
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Connected",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].status`,priority=1
// +kubebuilder:printcolumn:name="Authorized",type=string,JSONPath=`.status.conditions[?(@.type=="Authorized")].status`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Cordoned",type=boolean,JSONPath=`.spec.cordoned`
// +kubebuilder:printcolumn:name="Dispatched",type=integer,JSONPath=`.status.dispatchedJobs`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.runningJobs`
// +kubebuilder:printcolumn:name="Credential Expires",type=date,JSONPath=`.status.credential.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkerCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec WorkerClusterSpec `json:"spec"`
	// +optional
	Status WorkerClusterStatus `json:"status,omitempty"`
}

// WorkerClusterList is a list of WorkerClusters.
// +kubebuilder:object:root=true
type WorkerClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WorkerCluster{}, &WorkerClusterList{})
}

// Reasons of the Connected condition.
const (
	// ReasonConnected: the kubeconfig is valid, the worker answers and its
	// cache is in sync.
	ReasonConnected = "Connected"
	// ReasonConnecting: the kubeconfig is valid; the cache is still syncing.
	ReasonConnecting = "Connecting"
	// ReasonSecretNotFound: the referenced Secret does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretUnreadable: reading the referenced Secret failed for
	// another reason (the manager may not, or its API server did not
	// answer); the message has the error.
	ReasonSecretUnreadable = "SecretUnreadable"
	// ReasonKubeConfigKeyMissing: the Secret has no such key.
	ReasonKubeConfigKeyMissing = "KubeConfigKeyMissing"
	// ReasonInvalidKubeConfig: the kubeconfig cannot be parsed or names no
	// usable cluster.
	ReasonInvalidKubeConfig = "InvalidKubeConfig"
	// ReasonInsecureKubeConfig: the kubeconfig skips TLS verification.
	ReasonInsecureKubeConfig = "InsecureKubeConfig"
	// ReasonExecPluginNotAllowed: the kubeconfig runs an exec plugin or an
	// auth provider, which would execute code in the manager.
	ReasonExecPluginNotAllowed = "ExecPluginNotAllowed"
	// ReasonFilePathNotAllowed: the kubeconfig points at files (certificate,
	// key, CA or token paths) instead of embedding their data.
	ReasonFilePathNotAllowed = "FilePathNotAllowed"
	// ReasonUnreachable: the worker's API server does not answer. Only this
	// counts towards the worker-lost timeout: a worker that answers may
	// still be running its mirrors.
	ReasonUnreachable = "Unreachable"
	// ReasonCredentialRejected: the worker's API server answers but refuses
	// the kubeconfig's credential (401): its token is invalid or expired.
	ReasonCredentialRejected = "CredentialRejected"
)

// Reasons of the CredentialRenewal condition.
const (
	// ReasonCredentialValid: the token is valid and is renewed at
	// status.credential.renewAt (each renewal also gives an Event
	// CredentialRenewed).
	ReasonCredentialValid = "CredentialValid"
	// ReasonCredentialExpiring: the token is due for renewal and the manager
	// could not renew it (the message says why); Jobs continue on it until
	// it expires.
	ReasonCredentialExpiring = "CredentialExpiring"
	// ReasonCredentialExpired: the token has expired; the worker refuses it.
	ReasonCredentialExpired = "CredentialExpired"
)

// Reasons of the Authorized condition.
const (
	// ReasonAuthorized: the credential has every right the manager uses.
	ReasonAuthorized = "Authorized"
	// ReasonMissingRights: the credential lacks rights the message names.
	ReasonMissingRights = "MissingRights"
	// ReasonRightsUnknown: the worker did not answer the access reviews.
	ReasonRightsUnknown = "RightsUnknown"
)
