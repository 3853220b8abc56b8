package devenv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/queue"
)

// What an administrator makes once for Kueue to use jobferry, in the e2e
// tests and the bench alike: one ResourceFlavor for the workers' capacity
// and one AdmissionCheck jobferry controls.
const (
	KueueFlavor = "workers"
	KueueCheck  = "jobferry"
)

// NewKueueClient is a client of cfg's cluster that knows Kueue's API and
// jobferry's.
func NewKueueClient(cfg *rest.Config) (client.Client, error) {
	scheme := v1alpha1.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// CreateUnlessExists creates each object in turn, leaving one that exists
// alone.
func CreateUnlessExists(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// SetUpKueueCheck makes the ResourceFlavor KueueFlavor and the
// AdmissionCheck KueueCheck (controller jobferry's) unless they exist, and
// waits until the check is Active, which only jobferry's controller sets.
func SetUpKueueCheck(ctx context.Context, c client.Client, timeout time.Duration) error {
	if err := CreateUnlessExists(ctx, c,
		&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: KueueFlavor}},
		&kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: KueueCheck}, Spec: kueue.AdmissionCheckSpec{ControllerName: queue.ControllerName}},
	); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var ac kueue.AdmissionCheck
		if err := c.Get(ctx, client.ObjectKey{Name: KueueCheck}, &ac); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for jobferry to make the AdmissionCheck %s Active: %w", KueueCheck, err)
	}
	return nil
}

// KueueClusterQueue is a ClusterQueue for every namespace with quota of
// the flavor KueueFlavor (the resources it covers are quota's) and
// jobferry's check.
func KueueClusterQueue(name string, quota corev1.ResourceList) *kueue.ClusterQueue {
	return ClusterQueueWithChecks(name, quota, KueueCheck)
}

// ClusterQueueWithChecks is a ClusterQueue for every namespace with quota
// of the flavor KueueFlavor (the resources it covers are quota's) and the
// admission checks named, none for a queue admitting on its own cluster.
func ClusterQueueWithChecks(name string, quota corev1.ResourceList, checks ...string) *kueue.ClusterQueue {
	covered := slices.Sorted(maps.Keys(quota))
	var resources []kueue.ResourceQuota
	for _, r := range covered {
		resources = append(resources, kueue.ResourceQuota{Name: r, NominalQuota: quota[r]})
	}
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: covered,
			Flavors: []kueue.FlavorQuotas{{Name: KueueFlavor, Resources: resources}}}},
	}}
	if len(checks) > 0 {
		cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{}
		for _, check := range checks {
			cq.Spec.AdmissionChecksStrategy.AdmissionChecks = append(cq.Spec.AdmissionChecksStrategy.AdmissionChecks,
				kueue.AdmissionCheckStrategyRule{Name: kueue.AdmissionCheckReference(check)})
		}
	}
	return cq
}

// KueueLocalQueue is the LocalQueue name in namespace ns of the
// ClusterQueue clusterQueue.
func KueueLocalQueue(ns, name, clusterQueue string) *kueue.LocalQueue {
	return &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(clusterQueue)}}
}
