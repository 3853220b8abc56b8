package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/localcluster"
)

const (
	// systemNamespace holds the worker kubeconfig Secrets on the manager.
	systemNamespace = "jobferry-system"
	// gpuResource is the extended resource the fake gpu nodes offer.
	gpuResource = corev1.ResourceName("example.com/gpu")
)

// gpuTaint keeps ordinary pods off the gpu pool.
var gpuTaint = corev1.Taint{Key: "jobferry.dev/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// devSpec is the development topology: a control-plane-only manager;
// worker-1 with a general pool and a tainted gpu pool; further workers with a
// general pool only.
func devSpec(workers int) localcluster.EnvironmentSpec {
	spec := localcluster.EnvironmentSpec{Manager: localcluster.Spec{Name: "manager"}}
	for i := 1; i <= workers; i++ {
		worker := localcluster.Spec{Name: fmt.Sprintf("worker-%d", i), Pools: []localcluster.Pool{
			{Name: "general", Nodes: 2, Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("16"),
				corev1.ResourceMemory: resource.MustParse("64Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			}},
		}}
		if i == 1 {
			worker.Pools = append(worker.Pools, localcluster.Pool{
				Name: "gpu", Nodes: 2,
				Labels: map[string]string{"accelerator": "example-gpu"},
				Taints: []corev1.Taint{gpuTaint},
				Allocatable: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("32"),
					corev1.ResourceMemory: resource.MustParse("256Gi"),
					corev1.ResourcePods:   resource.MustParse("110"),
					gpuResource:           resource.MustParse("8"),
				},
			})
		}
		spec.Workers = append(spec.Workers, worker)
	}
	return spec
}

// startDev starts the development environment in dir, installs the CRDs and
// registers every worker with the manager (a kubeconfig Secret and a
// WorkerCluster each). It refuses to start over a running environment.
func startDev(ctx context.Context, dir string, workers int, out io.Writer) (*localcluster.Environment, error) {
	if workers < 1 {
		return nil, fmt.Errorf("--workers must be at least 1, got %d", workers)
	}
	running, err := localcluster.LoadEnvironment(dir)
	if err != nil {
		return nil, err
	}
	for _, c := range running {
		if c.Running() {
			return nil, fmt.Errorf("cluster %s of a previous environment is still running in %s: run `jobferry dev down --dir %s` (or `make dev-down`) first", c.Name, dir, dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "starting a manager and %d worker(s) in %s (about 10 s)\n", workers, dir)
	env, err := localcluster.StartEnvironment(ctx, devSpec(workers), localcluster.EnvironmentOptions{Dir: dir, Detached: true, Progress: out})
	if err != nil {
		return nil, err
	}
	if err := registerWorkers(ctx, env); err != nil {
		return env, err
	}
	return env, nil
}

func registerWorkers(ctx context.Context, env *localcluster.Environment) error {
	if err := localcluster.InstallCRDs(ctx, env.Manager.RESTConfig(), jobferryv1alpha1.CRDs, "crds/jobferry.dev_workerclusters.yaml"); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	manager, err := client.New(env.Manager.RESTConfig(), client.Options{Scheme: jobferryv1alpha1.NewScheme()})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}
	if err := manager.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s on the manager: %w", systemNamespace, err)
	}
	for _, w := range env.Workers {
		if err := localcluster.InstallCRDs(ctx, w.RESTConfig(), jobferryv1alpha1.CRDs, "crds/jobferry.dev_clustercapacities.yaml"); err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		kubeconfig, err := os.ReadFile(w.KubeconfigPath)
		if err != nil {
			return err
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: w.Name + "-kubeconfig"},
			Data:       map[string][]byte{"kubeconfig": kubeconfig},
		}
		if err := manager.Create(ctx, secret); err != nil {
			return fmt.Errorf("creating the kubeconfig Secret of %s: %w", w.Name, err)
		}
		wc := &jobferryv1alpha1.WorkerCluster{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name},
			Spec: jobferryv1alpha1.WorkerClusterSpec{
				KubeConfig: jobferryv1alpha1.KubeConfigSource{SecretRef: jobferryv1alpha1.SecretKeyRef{Name: secret.Name}},
			},
		}
		if err := manager.Create(ctx, wc); err != nil {
			return fmt.Errorf("creating WorkerCluster %s: %w", w.Name, err)
		}
	}
	return nil
}

// kubectlHint is a command line a reader can paste to look at a cluster.
func kubectlHint(dir, cluster, args string) string {
	bin, err := localcluster.BinDir()
	if err != nil {
		bin = "bin"
	}
	if root, err := localcluster.RepoRoot(); err == nil {
		if rel, err := filepath.Rel(root, bin); err == nil {
			bin = rel
		}
		if rel, err := filepath.Rel(root, dir); err == nil {
			dir = rel
		}
	}
	return fmt.Sprintf("%s/kubectl --kubeconfig %s/%s/kubeconfig %s", bin, dir, cluster, args)
}
