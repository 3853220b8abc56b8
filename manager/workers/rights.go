package workers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Right is one request the manager makes of a worker's API server: in one
// namespace, or in all ("") for a namespaced resource; on one object (name)
// when the credential may be limited to it.
type Right struct {
	Verb, Group, Resource string
	Namespace, Name       string
}

func (r Right) String() string {
	s := r.Verb + " " + r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Name != "" {
		s += " " + r.Name
	}
	switch {
	case r.Namespace != "" && r.Resource != "namespaces":
		s += " in " + r.Namespace
	case r.Namespace == "" && (r.Resource == "jobs" || r.Resource == "events" || r.Resource == "pods"):
		s += " in all namespaces"
	}
	return s
}

// requiredRights lists what the manager must be allowed on a worker: it
// caches its mirrors (list, watch jobs; get one only to tell its own from a
// same-named Job after a refused create) and the capacity summary (list,
// watch the ClusterCapacity named cluster), creates, updates and deletes
// mirrors, and reads the namespaces they go to (get: their Pod
// Security labels). With namespaces (the worker chart's namespaced mode) the
// Job and namespace rights are needed in those only.
func requiredRights(namespaces []string) []Right {
	scopes := rightScopes(namespaces)
	var out []Right
	for _, ns := range scopes {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "delete"} {
			out = append(out, Right{Verb: verb, Group: "batch", Resource: "jobs", Namespace: ns})
		}
	}
	for _, verb := range []string{"list", "watch"} {
		out = append(out, Right{Verb: verb, Group: v1alpha1.GroupVersion.Group, Resource: "clustercapacities", Name: v1alpha1.ClusterCapacityName})
	}
	for _, ns := range scopes {
		// A namespace is its own namespace for RBAC: a Role in it may allow
		// getting it.
		out = append(out, Right{Verb: "get", Resource: "namespaces", Namespace: ns, Name: ns})
	}
	return out
}

// rightScopes are the namespaces rights are needed in: those the manager may
// use there, or all ("").
func rightScopes(namespaces []string) []string {
	if len(namespaces) == 0 {
		return []string{""}
	}
	return namespaces
}

// CreateNamespacesRight is optional: with it (and a credential for
// every namespace) the manager creates a missing namespace for a mirror;
// without it, a worker lacking the Job's namespace is not chosen for it.
var CreateNamespacesRight = Right{Verb: "create", Resource: "namespaces"}

// RelabelNamespacesRight is optional with it: with it the manager keeps the
// Pod Security labels of the namespaces it created in step with the
// manager's (planWorkerNamespace); without it, such a namespace left weaker
// than the manager's takes no more Jobs, saying so. The worker chart fences
// it with an admission policy: those namespaces only, those labels only.
var RelabelNamespacesRight = Right{Verb: "patch", Resource: "namespaces"}

// CollectNamespacesRights are optional with CreateNamespacesRight: with
// them the orphan collector finds the namespaces this manager created there
// (a list by its ID label) and deletes each once the manager's namespace of
// that name has been gone for --worker-namespace-grace and no Job is left
// in it (nor a ServiceAccount but default: list serviceaccounts); without
// them those namespaces stay. The worker chart grants them
// with managerIdentity.allowNamespaceDeletion and fences delete with the
// same admission policy: namespaces labelled with the manager's ID and
// nothing else but Pod Security's, never kube-*, default or its own.
var CollectNamespacesRights = []Right{{Verb: "list", Resource: "namespaces"}, {Verb: "delete", Resource: "namespaces"}, {Verb: "list", Resource: "serviceaccounts"}}

// warningEventsRights are optional too: with them the manager watches the
// worker's Warning Events and forwards those of its mirrors and their pods
// to the manager Jobs (package warnings); without them Jobs still run, and
// their worker-side failure reasons are seen only on the worker.
func warningEventsRights(namespaces []string) []Right {
	var out []Right
	for _, ns := range rightScopes(namespaces) {
		for _, verb := range []string{"list", "watch"} {
			out = append(out, Right{Verb: verb, Resource: "events", Namespace: ns})
		}
	}
	return out
}

// podWarningsRights are optional with warningEventsRights: a pod's Warning
// is forwarded only once the pod it names is read (its metadata, by name,
// never listed or cached) and found to be that Event's pod (its UID) and the
// mirror's (its controller); without them only the mirrors' own Warnings
// are forwarded. An Event is anyone's to write who may create Events in its
// namespace, naming any pod there.
func podWarningsRights(namespaces []string) []Right {
	var out []Right
	for _, ns := range rightScopes(namespaces) {
		out = append(out, Right{Verb: "get", Resource: "pods", Namespace: ns})
	}
	return out
}

// rightsCheckInterval is how often a worker whose credential had every right
// is checked again; one lacking a right is checked at every health probe, so
// it proceeds within seconds of being granted it.
const rightsCheckInterval = time.Minute

// rightsState is what the last check of a worker's credential found.
type rightsState struct {
	checked time.Time
	// missing are required rights the credential lacks.
	missing []Right
	// namespaces: what the credential may do to namespaces.
	namespaces NamespaceRights
	// mayWatchWarnings: the credential may list and watch Events wherever
	// the manager keeps mirrors (warningEventsRights).
	mayWatchWarnings bool
	// mayReadPods: the credential may get pods wherever the manager keeps
	// mirrors (podWarningsRights), so their pods' Warnings are forwarded.
	mayReadPods bool
}

// MissingMessage names the missing rights for a condition or an Event.
func MissingMessage(missing []Right) string {
	return "its credential may not " + rightsList(missing)
}

// rightsList names rights, comma-separated.
func rightsList(rights []Right) string {
	names := make([]string, len(rights))
	for i, r := range rights {
		names[i] = r.String()
	}
	return strings.Join(names, ", ")
}

// MayCreateMirrors: no right missing to create Jobs in namespace ns.
func MayCreateMirrors(missing []Right, ns string) bool {
	return !slices.ContainsFunc(missing, func(r Right) bool {
		return r.Verb == "create" && r.Resource == "jobs" && (r.Namespace == "" || r.Namespace == ns)
	})
}

// reviewRights asks the worker, with one SelfSubjectAccessReview per right,
// which of the rights its credential lacks.
func reviewRights(ctx context.Context, c kubernetes.Interface, rights []Right) ([]Right, error) {
	var missing []Right
	for _, r := range rights {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: r.Verb, Group: r.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name},
		}}
		got, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking whether the credential may %s: %w", r, err)
		}
		if !got.Status.Allowed {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// NamespaceRights are what the worker credential may do to namespaces
// (reviewed with the other rights: see reviewRights).
type NamespaceRights struct {
	// Create: the manager creates a missing namespace for a mirror.
	Create bool
	// Relabel: the manager keeps the Pod Security labels of the namespaces
	// it created in step with the manager's (patch namespaces; the worker
	// chart's admission policy lets it change nothing else, and only on
	// those namespaces).
	Relabel bool
	// Collect: the manager deletes the namespaces it created once the
	// manager's namespace of that name is gone and no Job is left in them
	// (list and delete namespaces, CollectNamespacesRights; the same
	// admission policy fences delete).
	Collect bool
}
