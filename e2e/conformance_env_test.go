//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// conformanceSide is one of the two controllers under comparison, with the
// cluster it runs in.
type conformanceSide struct {
	name    string
	cluster *localcluster.Cluster
	client  kubernetes.Interface
	// managedBy is set on the side's Jobs: nil for kube-controller-manager,
	// jobferry.dev/worker for the worker.
	managedBy *string
	// component is the process running the Job controller, and healthURL
	// its health endpoint.
	component string
	healthURL string
	// metricsURL serves the controller's metrics (the worker only: the
	// controller-manager's endpoint needs authorization).
	metricsURL string
}

// stop and start let a scenario take the controller down and bring it back.
func (s *conformanceSide) stop() error { return s.cluster.StopComponent(s.component) }

func (s *conformanceSide) start(ctx context.Context) error {
	p, err := s.cluster.RestartComponent(s.component)
	if err != nil {
		return fmt.Errorf("%s: restarting %s: %w", s.name, s.component, err)
	}
	return localcluster.WaitHealthy(ctx, p, s.healthURL, time.Minute)
}

func (s *conformanceSide) restart(ctx context.Context) error { return s.start(ctx) }

// startConformanceSides starts, in parallel, a cluster whose
// kube-controller-manager runs the Job controller, and one whose
// kube-controller-manager runs everything but the Job controller, with the
// jobferry worker instead. Both have KWOK nodes for the stress scenario; the
// conformance scenarios keep their pods unschedulable and set pod phases
// themselves, as the upstream integration tests do. minor is the
// clusters' minor when not the pinned one (localcluster.Spec.Kubernetes).
func startConformanceSides(t *testing.T, minor string) (kcm, worker *conformanceSide) {
	t.Helper()
	dir := outputDir(t)
	pools := []localcluster.Pool{{Name: "general", Nodes: 4}}
	// Neither runs the pod garbage collector: it fails and deletes
	// unscheduled terminating pods every 20 s, racing the steps that hold
	// pods terminating (the upstream integration tests run without it too).
	withKCM := slices.DeleteFunc(slices.Clone(localcluster.Controllers), func(c string) bool { return c == "pod-garbage-collector-controller" })
	withoutJobController := slices.DeleteFunc(slices.Clone(withKCM), func(c string) bool { return c == "job-controller" })
	kcm = &conformanceSide{name: "kube-controller-manager", component: "kube-controller-manager"}
	worker = &conformanceSide{name: "jobferry-worker", component: "jobferry-worker", managedBy: ptrTo(v1alpha1.WorkerManagedBy)}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var g errgroup.Group
	start := func(side *conformanceSide, spec localcluster.Spec) {
		g.Go(func() error {
			c, err := localcluster.Start(ctx, spec, localcluster.Options{Dir: filepath.Join(dir, spec.Name)})
			if err != nil {
				return err
			}
			side.cluster = c
			t.Cleanup(func() {
				if err := c.Stop(); err != nil {
					t.Error(err)
				}
			})
			side.client, err = kubernetes.NewForConfig(c.RESTConfig())
			return err
		})
	}
	start(kcm, localcluster.Spec{Name: "conformance-kcm", Pools: pools, Controllers: withKCM, Kubernetes: minor})
	start(worker, localcluster.Spec{Name: "conformance-worker", Pools: pools, Controllers: withoutJobController, Kubernetes: minor})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	kcmPort, err := flagValue(kcm.cluster, "kube-controller-manager", "--secure-port")
	if err != nil {
		t.Fatal(err)
	}
	kcm.healthURL = "https://127.0.0.1:" + kcmPort + "/healthz"

	if err := localcluster.InstallCRDs(ctx, worker.cluster.RESTConfig(), v1alpha1.CRDs, "crds/jobferry.dev_clustercapacities.yaml"); err != nil {
		t.Fatal(err)
	}
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	worker.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	// With leader election, as a production worker would run: every restart
	// of the scenarios then also hands the lease over.
	if _, err := worker.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobferry-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	worker.healthURL = startWorkerBinary(ctx, t, worker.cluster, "jobferry-worker",
		"--leader-elect", "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]))
	return kcm, worker
}

// startWorkerBinary runs bin/worker against the cluster as one of its
// components, its health probe on a free port, and waits until it is
// healthy. It returns the health URL.
func startWorkerBinary(ctx context.Context, t *testing.T, c *localcluster.Cluster, name string, args ...string) string {
	t.Helper()
	binDir, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	healthURL := fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0])
	p, err := c.StartComponent(name, filepath.Join(binDir, "worker"), append([]string{
		"--kubeconfig=" + c.KubeconfigPath, "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
	}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.WaitHealthy(ctx, p, healthURL, time.Minute); err != nil {
		t.Fatal(err)
	}
	return healthURL
}

// flagValue reads --name=value from a component's command line.
func flagValue(c *localcluster.Cluster, component, flag string) (string, error) {
	for _, p := range c.Processes {
		if p.Name != component {
			continue
		}
		for _, a := range p.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("%s of %s has no %s flag", component, c.Name, flag)
}

func ptrTo[T any](v T) *T { return &v }
