package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// tokens plays the API server: who each token is, who may get /metrics.
type tokens struct {
	users   map[string]string
	readers map[string]bool
	asked   int
}

func (f *tokens) Authenticate(_ context.Context, token string) (*authenticationv1.UserInfo, error) {
	f.asked++
	if token == "unanswered" {
		return nil, errors.New("the API server did not answer")
	}
	if name, ok := f.users[token]; ok {
		return &authenticationv1.UserInfo{Username: name}, nil
	}
	return nil, nil
}

func (f *tokens) Authorize(_ context.Context, who *authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	return f.readers[who.Username] && verb == "get" && path == "/metrics", "", nil
}

func TestOnlyAReaderGetsTheMetrics(t *testing.T) {
	reviewer := &tokens{users: map[string]string{"t-prom": "system:serviceaccount:monitoring:prometheus", "t-other": "alice"},
		readers: map[string]bool{"system:serviceaccount:monitoring:prometheus": true}}
	filter, err := Filter(reviewer)(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("jobferry_jobs 1")) }))
	if err != nil {
		t.Fatal(err)
	}
	get := func(header string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		filter.ServeHTTP(rec, req)
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	for _, tc := range []struct {
		header string
		code   int
		says   string
	}{
		{"", http.StatusUnauthorized, "Unauthorized"},
		{"Basic dXNlcjpwYXNz", http.StatusUnauthorized, "Unauthorized"},
		{"Bearer not-a-token", http.StatusUnauthorized, "Unauthorized"},
		{"Bearer t-other", http.StatusForbidden, "Authorization denied for user alice"},
		{"Bearer unanswered", http.StatusInternalServerError, "Authentication failed"},
		{"Bearer t-prom", http.StatusOK, "jobferry_jobs 1"},
	} {
		if code, body := get(tc.header); code != tc.code || body != tc.says {
			t.Errorf("Authorization %q: %d %q, want %d %q", tc.header, code, body, tc.code, tc.says)
		}
	}
	// A scraper's token is reviewed once, then remembered.
	asked := reviewer.asked
	for range 3 {
		if code, _ := get("Bearer t-prom"); code != http.StatusOK {
			t.Fatalf("the reader again: %d", code)
		}
	}
	if reviewer.asked != asked {
		t.Errorf("the reader's token was reviewed %d more times, want none", reviewer.asked-asked)
	}
}
