package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/workerkubeconfig"
)

// What `describe` and `logs` read on a worker through the manager's
// identity there, beyond the Jobs it already reads: the worker chart grants
// it with managerIdentity.allowInspection (hack/generate.sh turns these
// markers into charts/jobferry-worker/files/rbac-inspection.yaml).
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// inspectionValue is the worker chart value granting those rights.
const inspectionValue = "managerIdentity.allowInspection=true"

// managerClients talk to the manager cluster as the user.
type managerClients struct {
	config *rest.Config
	client client.Client
	kube   kubernetes.Interface
}

func (o *options) manager() (*managerClients, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("the manager cluster's kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("a client for the manager cluster: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &managerClients{config: cfg, client: c, kube: kube}, nil
}

// namespace is the namespace of -n, or of the kubeconfig context.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("the namespace of the manager's kubeconfig context: %w", err)
	}
	return ns, nil
}

// workerClient reaches a worker with the manager's credential for it: the
// kubeconfig in the Secret its WorkerCluster names.
func (m *managerClients) workerClient(ctx context.Context, systemNamespace, worker string) (kubernetes.Interface, error) {
	wc := &v1alpha1.WorkerCluster{}
	if err := m.client.Get(ctx, types.NamespacedName{Name: worker}, wc); err != nil {
		return nil, fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	ref := wc.Spec.KubeConfig.SecretRef
	key := ref.KeyOrDefault()
	secret, err := m.kube.CoreV1().Secrets(systemNamespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s of worker %s, which reaching the worker needs: %w", systemNamespace, ref.Name, worker, err)
		}
		return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s of worker %s: %w", systemNamespace, ref.Name, worker, err)
	}
	// Refused as the manager refuses it: a kubeconfig in a Secret must not
	// run a program or read a file on this machine.
	cfg, err := workerkubeconfig.RESTConfig(secret.Data[key])
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig in Secret %s/%s (key %s): %w", systemNamespace, ref.Name, key, err)
	}
	cfg.UserAgent = "kubectl-jobferry"
	return kubernetes.NewForConfig(cfg)
}

// inspectionError explains a read the worker refused to the manager's
// identity, naming the chart value that grants it.
func inspectionError(worker, what string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("worker %s does not let the manager's identity %s (install the worker chart with --set %s to grant it): %w", worker, what, inspectionValue, err)
	}
	return fmt.Errorf("%s on worker %s: %w", what, worker, err)
}
