package manager

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// right is one request the manager makes of a worker's API server, in every
// namespace (mirrors go to the namespace of their manager Job).
type right struct {
	verb, group, resource string
}

func (r right) String() string {
	if r.group == "" {
		return r.verb + " " + r.resource
	}
	return r.verb + " " + r.resource + "." + r.group
}

// requiredRights lists what the manager does on a worker: it caches
// mirrors, the capacity summary and the namespaces (get, list, watch: their
// Pod Security labels), creates, updates and deletes mirrors, and creates the
// namespaces they need when allowed to.
func requiredRights(createNamespaces bool) []right {
	var out []right
	for _, verb := range []string{"get", "list", "watch", "create", "update", "delete"} {
		out = append(out, right{verb, "batch", "jobs"})
	}
	for _, verb := range []string{"get", "list", "watch"} {
		out = append(out, right{verb, v1alpha1.GroupVersion.Group, "clustercapacities"})
	}
	for _, verb := range []string{"get", "list", "watch"} {
		out = append(out, right{verb, "", "namespaces"})
	}
	if createNamespaces {
		out = append(out, right{"create", "", "namespaces"})
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
	missing []right
}

// missingMessage names the missing rights for a condition or an Event.
func missingMessage(missing []right) string {
	names := make([]string, len(missing))
	for i, r := range missing {
		names[i] = r.String()
	}
	return "its credential may not " + strings.Join(names, ", ") + " (in all namespaces)"
}

// reviewRights asks the worker, with one SelfSubjectAccessReview per right,
// which of the rights its credential lacks.
func reviewRights(ctx context.Context, c kubernetes.Interface, rights []right) ([]right, error) {
	var missing []right
	for _, r := range rights {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: r.verb, Group: r.group, Resource: r.resource},
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
