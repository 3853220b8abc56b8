package queue

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=admissionchecks,verbs=list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=admissionchecks/status,verbs=update

// Reasons of the Active condition jobferry keeps on its AdmissionChecks.
const (
	ReasonActive = "JobferryDispatches"
	// ReasonParametersUnsupported: the check names parameters; jobferry
	// takes none (placement is configured on the WorkerClusters).
	ReasonParametersUnsupported = "ParametersUnsupported"
)

// CheckReconciler keeps the AdmissionChecks that name jobferry
// (ControllerName) Active: Kueue keeps a ClusterQueue that uses a check
// inactive until the check's controller says it is.
type CheckReconciler struct {
	Client client.Client
}

// SetupWithManager registers the controller for jobferry's AdmissionChecks.
func (r *CheckReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("admissioncheck").
		For(&kueue.AdmissionCheck{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			ac, ok := obj.(*kueue.AdmissionCheck)
			return ok && ac.Spec.ControllerName == ControllerName
		}))).
		Complete(r)
}

// Reconcile writes the check's Active condition when it is not what
// activeCondition says.
func (r *CheckReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ac := &kueue.AdmissionCheck{}
	if err := r.Client.Get(ctx, req.NamespacedName, ac); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ac.Spec.ControllerName != ControllerName {
		return reconcile.Result{}, nil
	}
	if !meta.SetStatusCondition(&ac.Status.Conditions, activeCondition(ac)) {
		return reconcile.Result{}, nil
	}
	err := r.Client.Status().Update(ctx, ac)
	if apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil
	}
	return reconcile.Result{}, err
}

// activeCondition is the Active condition of one of jobferry's checks: True
// unless it names parameters, which jobferry does not take.
func activeCondition(ac *kueue.AdmissionCheck) metav1.Condition {
	c := metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: ReasonActive, ObservedGeneration: ac.Generation,
		Message: "jobferry places each Workload with quota reserved on a worker cluster and sets this check Ready with the placement"}
	if p := ac.Spec.Parameters; p != nil {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonParametersUnsupported
		c.Message = "jobferry takes no parameters (placement is configured on the WorkerClusters); remove spec.parameters (" + p.Kind + " " + p.Name + ")"
	}
	return c
}
