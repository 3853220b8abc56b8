package workers

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// CreatedNamespaces is what the orphan collector uses of a connection to
// find and delete the namespaces this manager created on a worker
// (CollectNamespacesRights). Nothing of them is cached: they are read from
// the worker's API server at each collection.
type CreatedNamespaces interface {
	// List reads the namespaces labelled with managerID (their metadata,
	// without managedFields) a page at a time, handing each page to visit
	// before the next is read, until visit returns false or the pages end.
	List(ctx context.Context, managerID string, visit func([]metav1.PartialObjectMetadata) bool) error
	// Holds names something in namespace that jobferry did not put there
	// and Kubernetes does not put in every namespace — a Job (this
	// manager's or anyone's) or a ServiceAccount other than default, which
	// whatever else someone installs there nearly always has — or "".
	Holds(ctx context.Context, namespace string) (string, error)
	// Delete deletes the namespace as it was read (its UID and version);
	// false when it changed since, or is gone.
	Delete(ctx context.Context, ns *metav1.PartialObjectMetadata) (bool, error)
}

// CreatedNamespacesPage is how many of those namespaces one read holds
// (about 1 KiB each without managedFields): what the collector keeps of
// them at once. Only the worker's administrators and this manager may
// label namespaces there.
const CreatedNamespacesPage = 500

// CreatedNamespaces reads and deletes the namespaces this manager created
// there.
func (c *Connection) CreatedNamespaces() CreatedNamespaces { return createdNamespaces{c} }

type createdNamespaces struct{ c *Connection }

func (n createdNamespaces) List(ctx context.Context, managerID string, visit func([]metav1.PartialObjectMetadata) bool) error {
	if managerID == "" {
		return nil
	}
	page := &metav1.PartialObjectMetadataList{}
	page.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	for {
		opts := []client.ListOption{client.MatchingLabels{v1alpha1.ManagerIDLabel: managerID}, client.Limit(CreatedNamespacesPage)}
		if page.Continue != "" {
			opts = append(opts, client.Continue(page.Continue))
		}
		if err := n.c.cluster.GetAPIReader().List(ctx, page, opts...); err != nil {
			return fmt.Errorf("listing the namespaces this manager created on %s: %w", n.c.name, err)
		}
		for i := range page.Items {
			page.Items[i].ManagedFields = nil
		}
		if !visit(page.Items) || page.Continue == "" {
			return nil
		}
	}
}

func (n createdNamespaces) Holds(ctx context.Context, namespace string) (string, error) {
	jobs := &metav1.PartialObjectMetadataList{}
	jobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
	if err := n.c.cluster.GetAPIReader().List(ctx, jobs, client.InNamespace(namespace), client.Limit(1)); err != nil {
		return "", fmt.Errorf("listing the Jobs in namespace %s on %s: %w", namespace, n.c.name, err)
	}
	if len(jobs.Items) > 0 {
		return "Job " + jobs.Items[0].Name, nil
	}
	// Two are enough to find one that is not default, whatever their order.
	accounts := &metav1.PartialObjectMetadataList{}
	accounts.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccountList"))
	if err := n.c.cluster.GetAPIReader().List(ctx, accounts, client.InNamespace(namespace), client.Limit(2)); err != nil {
		return "", fmt.Errorf("listing the ServiceAccounts in namespace %s on %s: %w", namespace, n.c.name, err)
	}
	for _, sa := range accounts.Items {
		if sa.Name != "default" {
			return "ServiceAccount " + sa.Name, nil
		}
	}
	return "", nil
}

func (n createdNamespaces) Delete(ctx context.Context, ns *metav1.PartialObjectMetadata) (bool, error) {
	defer n.c.ForgetNamespace(ns.Name)
	target := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
	uid, version := ns.UID, ns.ResourceVersion
	err := n.c.Client().Delete(ctx, target, client.Preconditions{UID: &uid, ResourceVersion: &version})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	default:
		return false, fmt.Errorf("deleting namespace %s on %s: %w", ns.Name, n.c.name, err)
	}
}
