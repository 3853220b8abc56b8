//go:build integration

package v1alpha1_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
)

// startAPIServer runs etcd and kube-apiserver from bin/ (KUBEBUILDER_ASSETS)
// with the generated CRDs installed.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg := testenv.Start(t, env)
	version, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if version.GitVersion != "v1.36.3" {
		t.Errorf("envtest runs kube-apiserver %s, want the pinned v1.36.3", version.GitVersion)
	}
	c, err := client.New(cfg, client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIntegrationCRDs(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()

	t.Run("WorkerCluster defaults", func(t *testing.T) {
		wc := &v1alpha1.WorkerCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
			Spec:       v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w1"}}},
		}
		if err := c.Create(ctx, wc); err != nil {
			t.Fatal(err)
		}
		want := v1alpha1.WorkerClusterSpec{
			KubeConfig:    v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w1", Key: "kubeconfig"}},
			JobController: v1alpha1.JobControllerBuiltin,
		}
		if diff := cmp.Diff(want, wc.Spec); diff != "" {
			t.Errorf("defaulted spec (-want +got):\n%s", diff)
		}
	})

	t.Run("status is a subresource", func(t *testing.T) {
		wc := &v1alpha1.WorkerCluster{}
		if err := c.Get(ctx, client.ObjectKey{Name: "defaults"}, wc); err != nil {
			t.Fatal(err)
		}
		wc.Status.DispatchedJobs = 7
		if err := c.Update(ctx, wc); err != nil {
			t.Fatal(err)
		}
		if wc.Status.DispatchedJobs != 0 {
			t.Errorf("an update of the main resource wrote status: dispatchedJobs=%d", wc.Status.DispatchedJobs)
		}
		wc.Status.DispatchedJobs = 7
		if err := c.Status().Update(ctx, wc); err != nil {
			t.Fatal(err)
		}
		if wc.Status.DispatchedJobs != 7 {
			t.Errorf("status update lost: dispatchedJobs=%d", wc.Status.DispatchedJobs)
		}
	})

	invalid := map[string]struct {
		obj  client.Object
		want string
	}{
		"unknown jobController": {
			obj: &v1alpha1.WorkerCluster{
				ObjectMeta: metav1.ObjectMeta{Name: "bad-controller"},
				Spec: v1alpha1.WorkerClusterSpec{
					KubeConfig:    v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w1"}},
					JobController: "Kueue",
				},
			},
			want: `spec.jobController: Unsupported value: "Kueue"`,
		},
		"Secret without a name": {
			obj: &v1alpha1.WorkerCluster{
				ObjectMeta: metav1.ObjectMeta{Name: "no-secret"},
				Spec:       v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{}}},
			},
			want: "spec.kubeConfig.secretRef.name",
		},
		"ClusterCapacity not named cluster": {
			obj:  &v1alpha1.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: "pools"}},
			want: "ClusterCapacity is a singleton: its name must be 'cluster'",
		},
	}
	for name, tc := range invalid {
		t.Run(name, func(t *testing.T) {
			err := c.Create(ctx, tc.obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: got %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	t.Run("ClusterCapacity singleton defaults its pool label", func(t *testing.T) {
		cc := &v1alpha1.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClusterCapacityName}}
		if err := c.Create(ctx, cc); err != nil {
			t.Fatal(err)
		}
		if cc.Spec.PoolLabel != v1alpha1.DefaultPoolLabel {
			t.Errorf("poolLabel defaulted to %q, want %q", cc.Spec.PoolLabel, v1alpha1.DefaultPoolLabel)
		}
	})
}
