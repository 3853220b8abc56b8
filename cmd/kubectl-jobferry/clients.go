package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

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

// inspectionAPI names the aggregated API describe and logs read the worker
// side through.
var inspectionAPI = "APIService " + inspectionv1alpha1.GroupVersion.Version + "." + inspectionv1alpha1.GroupVersion.Group

// inspect reads the worker side of a manager Job from the manager's
// inspection API, with the user's own rights on the manager cluster.
func (m *managerClients) inspect(ctx context.Context, ns, name string) (*inspectionv1alpha1.JobInspection, error) {
	// Stream, not DoRaw: the discovery client decodes the Status of a
	// refusal from the manager only from a stream (DoRaw says "unknown").
	stream, err := m.kube.Discovery().RESTClient().Get().AbsPath(inspectionv1alpha1.Path(ns, name, "")).Stream(ctx)
	if err != nil {
		return nil, inspectionError("the worker side of Job "+ns+"/"+name, err)
	}
	defer stream.Close()
	body, err := io.ReadAll(stream)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's inspection of Job %s/%s: %w", ns, name, err)
	}
	out := &inspectionv1alpha1.JobInspection{}
	if err := json.Unmarshal(body, out); err != nil {
		return nil, fmt.Errorf("reading the manager's inspection of Job %s/%s: %w", ns, name, err)
	}
	return out, nil
}

// logs opens the logs of a manager Job's pods on its worker, through the
// manager's inspection API.
func (m *managerClients) logs(ctx context.Context, ns, name string, params map[string]string) (io.ReadCloser, error) {
	req := m.kube.Discovery().RESTClient().Get().AbsPath(inspectionv1alpha1.Path(ns, name, inspectionv1alpha1.LogSubresource))
	for k, v := range params {
		req = req.Param(k, v)
	}
	stream, err := req.Stream(ctx)
	if err != nil {
		return nil, inspectionError("the logs of Job "+ns+"/"+name, err)
	}
	return stream, nil
}

// inspectionError explains what the inspection API refused: the API
// server's own message, and what would change it.
func inspectionError(what string, err error) error {
	switch {
	case apierrors.IsForbidden(err) && refusedCoreRight(err):
		return fmt.Errorf("reading %s: %w (the manager shows the worker's pods, their Events and logs only to whom the manager cluster would show its own: the built-in view, edit and admin roles grant these rights)", what, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading %s: %w (an administrator grants it: ClusterRole jobferry-manager-inspection for describe, jobferry-manager-inspection-logs for logs, in the Job's namespace; the jobferry-manager chart's inspection values say who has them)", what, err)
	case apierrors.IsNotFound(err) && isUnservedPath(err):
		return fmt.Errorf("reading %s: the manager cluster serves no inspection API (%s, which the jobferry-manager chart registers): %w", what, inspectionAPI, err)
	}
	return fmt.Errorf("reading %s: %w", what, err)
}

// refusedCoreRight: the manager refused the inspection for a core right
// the caller lacks (get pods, list events, get pods/log), not the
// inspection API's own.
func refusedCoreRight(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details != nil && details.Group == "" && (details.Kind == "pods" || details.Kind == "events" || details.Kind == "pods/log")
}

// isUnservedPath: a 404 of the API server itself (no such API), not of the
// manager (no such Job), which names the Job.
func isUnservedPath(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details == nil || details.Name == ""
}
