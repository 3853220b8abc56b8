// Package metricsauth authenticates and authorizes the callers of the
// manager's metrics endpoint. It stands apart from package metrics, which
// every controller imports: the API server's authentication code it links
// (controller-runtime's filters pull k8s.io/apiserver, and with it CEL and
// gRPC) is the manager binary's alone.
package metricsauth

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

import (
	"net/http"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Authorized provides the metrics server's filter (controller-runtime's) that
// serves a caller only when the API server of cfg authenticates its bearer
// token (a TokenReview) and authorizes it to get the non-resource URL
// /metrics (a SubjectAccessReview): 401 without a token it accepts, 403
// "Authorization denied for user NAME" without the right. Answers are
// cached a minute (tokens), five minutes (allowed) and 30 s (denied).
func Authorized(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	return filters.WithAuthenticationAndAuthorization(cfg, httpClient)
}
