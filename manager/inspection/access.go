package inspection

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// What the manager asks the API server on a caller's behalf.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// access answers whether a user may do verb on a resource: a
// SubjectAccessReview in production, a table in unit tests.
type access interface {
	allowed(ctx context.Context, u user.Info, attrs authorizationv1.ResourceAttributes) (bool, string, error)
}

// reviews asks the manager cluster's API server with SubjectAccessReviews,
// so the answer is whatever its authorizers (RBAC, webhooks) say.
type reviews struct {
	client authorizationclient.SubjectAccessReviewInterface
}

func (r reviews) allowed(ctx context.Context, u user.Info, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.GetExtra() {
		extra[k] = v
	}
	review, err := r.client.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extra, ResourceAttributes: &attrs,
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("asking the API server whether %s may %s %s: %w", u.GetName(), attrs.Verb, attrs.Resource, err)
	}
	return review.Status.Allowed, review.Status.Reason, nil
}
