package main

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// The manager writes a WorkerCluster's status all the time: a join that
// loses the race for the update reads it again and succeeds.
func TestApplyWorkerClusterRetriesAConflict(t *testing.T) {
	existing := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-2"}}
	conflicts := 0
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(existing).
		WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if conflicts == 0 {
				conflicts++
				return apierrors.NewConflict(schema.GroupResource{Group: "jobferry.dev", Resource: "workerclusters"}, obj.GetName(), nil)
			}
			return c.Update(ctx, obj, opts...)
		}}).Build()
	want := existing.DeepCopy()
	want.ResourceVersion = "1"
	want.Spec.Namespaces = []string{"team-x"}
	result, err := applyWorkerCluster(context.Background(), c, want)
	if err != nil || result != "configured" {
		t.Fatalf("applyWorkerCluster = %q, %v; want configured after one conflict", result, err)
	}
	got := &v1alpha1.WorkerCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "worker-2"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Namespaces) != 1 || got.Spec.Namespaces[0] != "team-x" || conflicts != 1 {
		t.Errorf("after the retry: namespaces %v, conflicts %d", got.Spec.Namespaces, conflicts)
	}
}
