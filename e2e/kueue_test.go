//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// The part of Kueue's external admission check contract jobferry's Kueue
// mode will stand on, pinned against the real Kueue controller the tools
// build: a suspended Job with the queue label and jobferry's managedBy gets a
// Workload with quota reserved and the check Pending, and Kueue leaves the
// Job alone; the check set Ready (written under its own field manager) with
// pod set updates makes Kueue admit and unsuspend the Job with the updates
// in its pod template and managedBy kept; the Job's status copied Complete
// finishes the Workload and frees the quota. The check's controller is
// played here by the test.
func TestKueueExternalAdmissionCheckContract(t *testing.T) {
	cluster, clientset := startCluster(t, localcluster.Spec{Name: "kueue-manager"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cluster.StartKueue(ctx, localcluster.KueueOptions{}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cluster.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(ctx, t, clientset)

	const check = "jobferry"
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	create(&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "workers"}})
	ac := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: check}, Spec: kueue.AdmissionCheckSpec{ControllerName: "jobferry.dev/dispatch"}}
	create(ac)
	// What jobferry's controller will do: keep its check Active, or the
	// ClusterQueue stays inactive.
	meta.SetStatusCondition(&ac.Status.Conditions, metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", Message: "jobferry dispatches"})
	if err := c.Status().Update(ctx, ac); err != nil {
		t.Fatal(err)
	}
	create(&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}, Spec: kueue.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []kueue.FlavorQuotas{{Name: "workers", Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("2")}}}}}},
		AdmissionChecksStrategy: &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: check}}},
	}})
	create(&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "tenants"}})

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", Labels: map[string]string{workload.NameLabel: "team"}},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "example.com/train:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}},
		},
	}
	// Kueue makes the Workload at once; it reserves quota once the
	// ClusterQueue is active (the check seen Active).
	create(job)

	// Quota reserved, the check Pending, the Job untouched.
	var wl kueue.Workload
	waitWorkload := func(what string, done func(*kueue.Workload) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var list kueue.WorkloadList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err
			}
			for i := range list.Items {
				for _, owner := range list.Items[i].OwnerReferences {
					if owner.UID == job.UID {
						wl = list.Items[i]
						return done(&wl), nil
					}
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("waiting for the Workload of the Job to be %s: %v; last seen %+v", what, err, wl.Status)
		}
	}
	checkState := func(w *kueue.Workload) kueue.CheckState {
		for _, s := range w.Status.AdmissionChecks {
			if s.Name == check {
				return s.State
			}
		}
		return ""
	}
	waitWorkload("quota reserved with the check Pending", func(w *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadQuotaReserved) && checkState(w) == kueue.CheckStatePending
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(job.Spec.Suspend, false) || ptr.Deref(job.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy {
		t.Fatalf("Kueue changed the Job before the check was Ready: suspend %v, managedBy %v", job.Spec.Suspend, job.Spec.ManagedBy)
	}

	// The check Ready, with the placement as pod set updates, applied under
	// the check controller's own field manager: only its own entry.
	patch := &kueue.Workload{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: wl.Name},
		Status: kueue.WorkloadStatus{AdmissionChecks: []kueue.AdmissionCheckState{{
			Name: check, State: kueue.CheckStateReady, Message: "placed on worker-1", LastTransitionTime: metav1.Now(),
			PodSetUpdates: []kueue.PodSetUpdate{{Name: kueue.DefaultPodSetName,
				NodeSelector: map[string]string{"jobferry.dev/pool": "general"},
				Annotations:  map[string]string{v1alpha1.WorkerAnnotation: "worker-1"}}},
		}}},
	}
	if err := c.Status().Patch(ctx, patch, client.Apply, client.FieldOwner("jobferry-dispatch"), client.ForceOwnership); err != nil {
		t.Fatalf("applying the check's state: %v", err)
	}
	waitWorkload("admitted", func(w *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadAdmitted)
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		return !ptr.Deref(job.Spec.Suspend, true), nil
	})
	if err != nil {
		t.Fatalf("Kueue did not unsuspend the admitted Job: %v", err)
	}
	tmpl := job.Spec.Template
	if tmpl.Spec.NodeSelector["jobferry.dev/pool"] != "general" || tmpl.Annotations[v1alpha1.WorkerAnnotation] != "worker-1" {
		t.Errorf("the pod set updates are not in the admitted Job's template: nodeSelector %v, annotations %v", tmpl.Spec.NodeSelector, tmpl.Annotations)
	}
	if got := ptr.Deref(job.Spec.ManagedBy, ""); got != v1alpha1.ManagerManagedBy {
		t.Errorf("Kueue changed managedBy to %q", got)
	}

	// The mirror's final status, copied as jobferry copies it, finishes the
	// Workload and frees the quota.
	start := metav1.NewTime(time.Now().Add(-2 * time.Second).Truncate(time.Second))
	end := metav1.NewTime(time.Now().Truncate(time.Second))
	job.Status = batchv1.JobStatus{StartTime: &start, Active: 1, Ready: ptr.To[int32](1)}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatalf("copying a running status: %v", err)
	}
	job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &end, Succeeded: 1, Ready: ptr.To[int32](0),
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: end, LastProbeTime: end},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: end, LastProbeTime: end},
		}}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatalf("copying the final status: %v", err)
	}
	waitWorkload("finished", func(w *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var cq kueue.ClusterQueue
		if err := c.Get(ctx, types.NamespacedName{Name: "tenants"}, &cq); err != nil {
			return false, err
		}
		return cq.Status.ReservingWorkloads == 0 && cq.Status.AdmittedWorkloads == 0, nil
	})
	if err != nil {
		t.Errorf("the finished Workload still holds quota: %v", err)
	}
	t.Logf("Workload %s: quota reserved, check Pending; Ready with pod set updates: admitted, Job unsuspended with them; Complete copied: finished, quota free", wl.Name)
}
