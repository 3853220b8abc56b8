package manager

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestRequiredRightsAndReview(t *testing.T) {
	rights := requiredRights(true)
	if len(rights) != 13 || rights[12].String() != "create namespaces" || rights[3].String() != "create jobs.batch" || rights[9].String() != "get namespaces" {
		t.Fatalf("requiredRights(true) = %v", rights)
	}
	if got := len(requiredRights(false)); got != 12 {
		t.Errorf("requiredRights(false) has %d rights, want 12 (no namespace creation)", got)
	}

	// A credential that may only read: the review names every write.
	c := fake.NewClientset()
	c.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		switch review.Spec.ResourceAttributes.Verb {
		case "get", "list", "watch":
			review.Status.Allowed = true
		}
		return true, review, nil
	})
	missing, err := reviewRights(context.Background(), c, rights)
	if err != nil {
		t.Fatal(err)
	}
	want := "its credential may not create jobs.batch, update jobs.batch, delete jobs.batch, create namespaces (in all namespaces)"
	if got := missingMessage(missing); got != want {
		t.Errorf("missingMessage = %q, want %q", got, want)
	}
}
