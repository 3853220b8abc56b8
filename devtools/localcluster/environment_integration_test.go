//go:build integration

package localcluster

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Two API-server-only clusters, the second keeping its objects in the first
// one's etcd: each serves Jobs and sees only its own objects, the second
// runs no etcd, both serve only the lean API server's groups, and both stop.
func TestIntegrationAPIServerOnlyClustersShareAnEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := StartEnvironment(ctx, EnvironmentSpec{
		Manager: Spec{Name: "first", APIServerOnly: true},
		Workers: []Spec{{Name: "second", APIServerOnly: true, EtcdOf: "first"}},
	}, EnvironmentOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := env.Stop(); err != nil {
				t.Error(err)
			}
		}
	})
	first, second := env.Manager, env.Workers[0]
	if second.EtcdURL != first.EtcdURL {
		t.Fatalf("second uses etcd %s, want the first's %s", second.EtcdURL, first.EtcdURL)
	}
	if _, err := second.Component("etcd"); err == nil {
		t.Fatalf("second runs an etcd of its own")
	}

	clients := map[string]kubernetes.Interface{}
	for _, c := range []*Cluster{first, second} {
		if clients[c.Name], err = kubernetes.NewForConfig(c.RESTConfig()); err != nil {
			t.Fatal(err)
		}
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "only-on-second", Namespace: "default"},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "registry.example/c:1"}},
		}}},
	}
	if _, err := clients["second"].BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Job on second: %v", err)
	}
	if _, err := clients["second"].BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("reading the Job back on second: %v", err)
	}
	if _, err := clients["first"].BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Job created on second, read on first: %v, want NotFound (each keeps its own prefix)", err)
	}

	for name, client := range clients {
		groups, err := client.Discovery().ServerGroups()
		if err != nil {
			t.Fatal(err)
		}
		var served []string
		for _, g := range groups.Groups {
			served = append(served, g.Name)
		}
		if !slices.Contains(served, "batch") || slices.Contains(served, "apps") {
			t.Errorf("%s serves groups %v: want batch and not apps (the lean API server)", name, served)
		}
	}

	stopped = true
	if err := env.Stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	for _, c := range []*Cluster{first, second} {
		for _, p := range c.Processes {
			if !p.Exited() {
				t.Errorf("%s: %s (pid %d) still runs after Stop", c.Name, p.Name, p.PID)
			}
		}
	}
}
