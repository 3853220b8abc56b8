package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A refusal of the manager's inspection API reaches the user in the
// manager's words, for describe as for logs.
func TestInspectionRefusalsKeepTheirMessage(t *testing.T) {
	const message = `pods is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "team"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":` +
			`"pods is forbidden: User \"bob\" cannot get resource \"pods\" in API group \"\" in the namespace \"team\"","reason":"Forbidden","details":{"kind":"pods"},"code":403}`))
	}))
	defer srv.Close()
	m := &managerClients{kube: kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})}
	if _, err := m.inspect(context.Background(), "team", "train"); err == nil || !strings.Contains(err.Error(), message) ||
		!strings.Contains(err.Error(), "the built-in view, edit and admin roles grant these rights") {
		t.Errorf("describe: %v, want %s", err, message)
	}
	if _, err := m.logs(context.Background(), "team", "train", nil); err == nil || !strings.Contains(err.Error(), message) {
		t.Errorf("logs: %v, want %s", err, message)
	}
}
