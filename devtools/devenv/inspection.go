package devenv

import (
	"context"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
)

// InspectionService is the Service in front of the local manager's
// inspection API, as the chart's webhook Service is in a cluster.
const InspectionService = "jobferry-manager"

// InspectionServiceDNSName is the name the aggregator checks the manager's
// certificate for: the Service's, as in a cluster.
const InspectionServiceDNSName = InspectionService + "." + SystemNamespace + ".svc"

// RegisterInspectionAPI registers the local manager's inspection API with
// the manager cluster's aggregator: an APIService whose Service is an
// ExternalName for localhost, so the API server reaches the manager process
// on port (a Service of a cluster selects the manager's pods instead).
func RegisterInspectionAPI(ctx context.Context, c client.Client, port int, caPEM []byte) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: InspectionService},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", SystemNamespace, InspectionService, err)
	}
	gv := inspectionv1alpha1.GroupVersion
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": gv.Version + "." + gv.Group},
		"spec": map[string]any{
			"group": gv.Group, "version": gv.Version,
			"service":              map[string]any{"namespace": SystemNamespace, "name": InspectionService, "port": int64(port)},
			"caBundle":             base64.StdEncoding.EncodeToString(caPEM),
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(15),
		},
	}}
	if err := c.Create(ctx, apiService); err != nil {
		return fmt.Errorf("registering APIService %s: %w", apiService.GetName(), err)
	}
	return nil
}
