package inspection

import (
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	"github.com/jobferry/jobferry/manager/metrics"
)

// Handler routes the API's paths.
func (s *Server) Handler() http.Handler {
	base := "/apis/" + inspectionv1alpha1.GroupVersion.Group + "/" + inspectionv1alpha1.GroupVersion.Version
	mux := http.NewServeMux()
	jobs, logs := inspectionv1alpha1.JobsResource, inspectionv1alpha1.JobsResource+"/"+inspectionv1alpha1.LogSubresource
	placement, placements := inspectionv1alpha1.JobsResource+"/"+inspectionv1alpha1.PlacementSubresource, inspectionv1alpha1.PlacementsResource
	mux.HandleFunc("GET "+base, s.authenticated(s.discovery))
	mux.HandleFunc("GET "+base+"/namespaces/{namespace}/jobs/{name}", counted(jobs, s.authenticated(s.inspect)))
	mux.HandleFunc("GET "+base+"/namespaces/{namespace}/jobs/{name}/log", counted(logs, s.authenticated(s.logs)))
	mux.HandleFunc("GET "+base+"/namespaces/{namespace}/jobs/{name}/placement", counted(placement, s.authenticated(s.explainJob)))
	mux.HandleFunc("POST "+base+"/namespaces/{namespace}/placements", counted(placements, s.authenticated(s.explainSent)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
	})
	return mux
}

// counted counts the answers of h (jobferry_inspection_requests_total).
func counted(resource string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answer := &answerCode{ResponseWriter: w, code: http.StatusOK}
		h(answer, r)
		metrics.InspectionRequests.WithLabelValues(resource, strconv.Itoa(answer.code)).Inc()
	}
}

// answerCode remembers the status code a handler answered with.
type answerCode struct {
	http.ResponseWriter
	code int
}

// authenticated runs h for a caller the front proxy vouches for.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request, user.Info)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if why := s.unauthenticating.Load(); why != nil {
			writeStatus(w, apierrors.NewServiceUnavailable((*why).Error()))
			return
		}
		resp, ok, err := s.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			writeStatus(w, apierrors.NewUnauthorized("the inspection API serves requests the API server's aggregator proxies, with its front-proxy client certificate"))
			return
		}
		h(w, r, resp.User)
	}
}

func (s *Server) discovery(w http.ResponseWriter, _ *http.Request, _ user.Info) {
	writeJSON(w, http.StatusOK, &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: inspectionv1alpha1.GroupVersion.String(),
		APIResources: []metav1.APIResource{
			{Name: inspectionv1alpha1.JobsResource, Namespaced: true, Kind: inspectionv1alpha1.Kind, Verbs: metav1.Verbs{"get"}},
			{Name: inspectionv1alpha1.JobsResource + "/" + inspectionv1alpha1.LogSubresource, Namespaced: true, Kind: inspectionv1alpha1.Kind, Verbs: metav1.Verbs{"get"}},
			{Name: inspectionv1alpha1.JobsResource + "/" + inspectionv1alpha1.PlacementSubresource, Namespaced: true, Kind: inspectionv1alpha1.PlacementKind, Verbs: metav1.Verbs{"get"}},
			{Name: inspectionv1alpha1.PlacementsResource, Namespaced: true, Kind: inspectionv1alpha1.PlacementKind, Verbs: metav1.Verbs{"create"}},
		},
	})
}

func (a *answerCode) WriteHeader(code int) {
	a.code = code
	a.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *answerCode) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// FlushError lets http.ResponseController's Flush say when the caller has
// gone (it prefers it to Flush).
func (a *answerCode) FlushError() error { return http.NewResponseController(a.ResponseWriter).Flush() }

// Flush lets a log stream through as it comes.
func (a *answerCode) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
