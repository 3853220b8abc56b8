package workers

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestRequiredRights(t *testing.T) {
	names := func(rights []Right) []string {
		var out []string
		for _, r := range rights {
			out = append(out, r.String())
		}
		return out
	}
	cluster := []string{
		"get jobs.batch in all namespaces", "list jobs.batch in all namespaces", "watch jobs.batch in all namespaces",
		"create jobs.batch in all namespaces", "update jobs.batch in all namespaces", "delete jobs.batch in all namespaces",
		"list clustercapacities.jobferry.dev cluster", "watch clustercapacities.jobferry.dev cluster",
		"get namespaces",
	}
	if diff := cmp.Diff(cluster, names(requiredRights(nil))); diff != "" {
		t.Errorf("every namespace (-want +got):\n%s", diff)
	}
	if CreateNamespacesRight.String() != "create namespaces" {
		t.Errorf("the optional right is %q", CreateNamespacesRight)
	}
	namespaced := []string{
		"get jobs.batch in a", "list jobs.batch in a", "watch jobs.batch in a", "create jobs.batch in a", "update jobs.batch in a", "delete jobs.batch in a",
		"get jobs.batch in b", "list jobs.batch in b", "watch jobs.batch in b", "create jobs.batch in b", "update jobs.batch in b", "delete jobs.batch in b",
		"list clustercapacities.jobferry.dev cluster", "watch clustercapacities.jobferry.dev cluster",
		"get namespaces a", "get namespaces b",
	}
	if diff := cmp.Diff(namespaced, names(requiredRights([]string{"a", "b"}))); diff != "" {
		t.Errorf("namespaces a and b (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"list events in all namespaces", "watch events in all namespaces"}, names(warningEventsRights(nil))); diff != "" {
		t.Errorf("the optional Events rights, every namespace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"list events in a", "watch events in a", "list events in b", "watch events in b"}, names(warningEventsRights([]string{"a", "b"}))); diff != "" {
		t.Errorf("the optional Events rights, namespaces a and b (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"get pods in all namespaces"}, names(podWarningsRights(nil))); diff != "" {
		t.Errorf("the optional pod rights, every namespace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"get pods in a", "get pods in b"}, names(podWarningsRights([]string{"a", "b"}))); diff != "" {
		t.Errorf("the optional pod rights, namespaces a and b (-want +got):\n%s", diff)
	}
	missing := requiredRights([]string{"a", "b"})[9:10] // create jobs.batch in b
	if !MayCreateMirrors(missing, "a") || MayCreateMirrors(missing, "b") {
		t.Errorf("mayCreateMirrors with %v missing: a %t, b %t; want true, false", names(missing), MayCreateMirrors(missing, "a"), MayCreateMirrors(missing, "b"))
	}
}

func TestReviewRights(t *testing.T) {
	// A credential that may only read: the review names every write.
	c := fake.NewClientset()
	var reviewed []authorizationv1.ResourceAttributes
	c.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		reviewed = append(reviewed, *review.Spec.ResourceAttributes)
		switch review.Spec.ResourceAttributes.Verb {
		case "get", "list", "watch":
			review.Status.Allowed = true
		}
		return true, review, nil
	})
	missing, err := reviewRights(context.Background(), c, requiredRights([]string{"team-a"}))
	if err != nil {
		t.Fatal(err)
	}
	want := "its credential may not create jobs.batch in team-a, update jobs.batch in team-a, delete jobs.batch in team-a"
	if got := MissingMessage(missing); got != want {
		t.Errorf("missingMessage = %q, want %q", got, want)
	}
	// The namespace of a namespaced mode is asked about as RBAC sees it.
	if last := reviewed[len(reviewed)-1]; last.Resource != "namespaces" || last.Namespace != "team-a" || last.Name != "team-a" {
		t.Errorf("namespace review %+v, want get namespaces team-a in team-a", last)
	}
}
