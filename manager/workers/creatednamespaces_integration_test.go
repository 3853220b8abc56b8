//go:build integration

package workers

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// On a real API server: CreatedNamespaces lists exactly the namespaces
// labelled with the manager's ID, across pages; says whether a namespace
// holds any Job, this manager's or not; deletes a namespace only as it was
// listed — one relabelled since is kept.
func TestIntegrationCreatedNamespaces(t *testing.T) {
	cfg, scheme, api := startWorkerAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const pageAndMore = CreatedNamespacesPage + 3
	var want []string
	for i := range pageAndMore {
		name := "team-" + string(rune('a'+i%26)) + "-" + time.Duration(i).String()
		want = append(want, name)
		if err := api.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.ManagerIDLabel: "m1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, id := range map[string]string{"team-other": "m2", "team-unlabelled": ""} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if id != "" {
			ns.Labels = map[string]string{v1alpha1.ManagerIDLabel: id}
		}
		if err := api.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	conn := syncedConnection(ctx, t, cfg, scheme, "m1", nil, nil)
	created := conn.CreatedNamespaces()

	var listed []metav1.PartialObjectMetadata
	pages := 0
	if err := created.List(ctx, "m1", func(page []metav1.PartialObjectMetadata) bool {
		pages++
		for _, ns := range page {
			if len(ns.ManagedFields) > 0 {
				t.Errorf("namespace %s listed with its managedFields", ns.Name)
			}
		}
		listed = append(listed, page...)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if pages != 2 {
		t.Errorf("listed in %d pages, want 2 (pages of %d)", pages, CreatedNamespacesPage)
	}
	var got []string
	for _, ns := range listed {
		got = append(got, ns.Name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d namespaces, want the %d labelled m1 (first listed: %v)", len(got), len(want), got[:min(3, len(got))])
	}

	// A Job of anyone's keeps a namespace, and a ServiceAccount but the
	// default one (envtest runs no controller that makes it: made here).
	held, empty, installed := listed[0].Name, listed[1].Name, listed[3].Name
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: held, Name: "someones"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "example/c:1"}}}}}}
	for _, obj := range []client.Object{foreign,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: empty, Name: "default"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: installed, Name: "default"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: installed, Name: "zz-add-on"}},
	} {
		if err := api.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	for ns, want := range map[string]string{held: "Job someones", empty: "", installed: "ServiceAccount zz-add-on"} {
		if got, err := created.Holds(ctx, ns); err != nil || got != want {
			t.Errorf("Holds(%s) = %q, %v; want %q", ns, got, err, want)
		}
	}

	// Relabelled since it was listed: kept.
	changed := &corev1.Namespace{}
	if err := api.Get(ctx, types.NamespacedName{Name: empty}, changed); err != nil {
		t.Fatal(err)
	}
	changed.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := api.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if deleted, err := created.Delete(ctx, &listed[1]); err != nil || deleted {
		t.Errorf("deleting a namespace relabelled since it was listed: %v, %v; want kept", deleted, err)
	}
	if err := api.Get(ctx, types.NamespacedName{Name: empty}, changed); err != nil || changed.DeletionTimestamp != nil {
		t.Errorf("the relabelled namespace: %v, deletion %v; want it kept", err, changed.DeletionTimestamp)
	}
	// As listed: deleted (envtest runs no namespace controller, so it
	// stays Terminating).
	if deleted, err := created.Delete(ctx, &listed[2]); err != nil || !deleted {
		t.Fatalf("deleting a namespace as listed: %v, %v; want deleted", deleted, err)
	}
	gone := &corev1.Namespace{}
	if err := api.Get(ctx, types.NamespacedName{Name: listed[2].Name}, gone); err != nil || gone.DeletionTimestamp == nil {
		t.Errorf("the deleted namespace: %v, deletion %v; want it being deleted", err, gone.DeletionTimestamp)
	}
	visited := 0
	if err := created.List(ctx, "", func(page []metav1.PartialObjectMetadata) bool { visited += len(page); return true }); err != nil || visited != 0 {
		t.Errorf("List with no manager ID visited %d namespaces, %v; want none", visited, err)
	}
	// Stopped after the first page: the second is not read.
	pages = 0
	if err := created.List(ctx, "m1", func([]metav1.PartialObjectMetadata) bool { pages++; return false }); err != nil || pages != 1 {
		t.Errorf("List stopped by its visitor read %d pages, %v; want 1", pages, err)
	}
}
