// Package testenv starts the real API server and etcd of controller-runtime's
// envtest (from bin/, KUBEBUILDER_ASSETS) for the integration tests, one
// way for all of them: stopped when the test ends, a failure to start or to
// stop said as such. Tests only: no product binary links e2e/.
package testenv

import (
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Start starts env (its CRDs installed), stops it when t ends and returns
// an administrator's configuration for it.
func Start(t testing.TB, env *envtest.Environment) *rest.Config {
	t.Helper()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (KUBEBUILDER_ASSETS must point at bin/; run `make tools`): %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return cfg
}
