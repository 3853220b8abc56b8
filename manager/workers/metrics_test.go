package workers

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jobferry/jobferry/manager/metrics"
)

func TestCountingTransportCountsByVerbAndCode(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
		}
	}))
	tr := &countingTransport{worker: "count-test", next: http.DefaultTransport}
	do := func(method, path string) {
		req, err := http.NewRequest(method, server.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	do(http.MethodGet, "/apis/batch/v1/jobs?watch=true")
	do(http.MethodGet, "/missing")
	do(http.MethodPost, "/apis/batch/v1/namespaces/a/jobs")
	server.Close()
	do(http.MethodPut, "/apis/batch/v1/namespaces/a/jobs/j")
	for _, c := range []struct{ verb, code string }{{"WATCH", "200"}, {"GET", "404"}, {"POST", "200"}, {"PUT", "error"}} {
		if got := testutil.ToFloat64(metrics.RemoteRequests.WithLabelValues("count-test", c.verb, c.code)); got != 1 {
			t.Errorf("%s %s counted %v times, want 1", c.verb, c.code, got)
		}
	}
}
