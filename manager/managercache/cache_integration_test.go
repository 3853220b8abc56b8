//go:build integration

package managercache

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
)

// On a real API server, through controller-runtime's cache with the
// manager's options: a Get hands out a Job (what cachedJob keeps, as a Job
// of the caller's own), a List by the placement index finds the manager
// Jobs only, the informer's handlers read the Jobs through
// JobWithoutTemplate, and a List that skips the copy says it cannot.
func TestIntegrationManagerJobCache(t *testing.T) {
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "api", "v1alpha1", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg := testenv.Start(t, env)
	scheme := v1alpha1.NewScheme()
	api, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := api.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}

	opts := CacheOptions("jobferry-system")
	opts.Scheme = scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := IndexJobs(ctx, c); err != nil {
		t.Fatal(err)
	}
	informer, err := c.GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{} // the worker annotation the handlers saw, by name
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if job, ok := JobWithoutTemplate(obj); ok {
				mu.Lock()
				defer mu.Unlock()
				seen[job.Name] = job.Annotations[v1alpha1.WorkerAnnotation]
			}
		},
		UpdateFunc: func(_, obj any) {
			if job, ok := JobWithoutTemplate(obj); ok {
				mu.Lock()
				defer mu.Unlock()
				seen[job.Name] = job.Annotations[v1alpha1.WorkerAnnotation]
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := c.Start(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("the cache stopped: %v", err)
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache never synced")
	}

	job := func(name string, managedBy *string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Labels: map[string]string{"app": "train"}},
			Spec: batchv1.JobSpec{ManagedBy: managedBy, Suspend: ptr.To(true), Parallelism: ptr.To[int32](2), Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeSelector: map[string]string{"pool": "a"}, Containers: []corev1.Container{{
					Name: "c", Image: "registry.example/train:1", Command: []string{"train"},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
				}}},
			}},
		}
	}
	if err := api.Create(ctx, job("managed", ptr.To(v1alpha1.ManagerManagedBy))); err != nil {
		t.Fatal(err)
	}
	if err := api.Create(ctx, job("other", nil)); err != nil {
		t.Fatal(err)
	}
	got := &batchv1.Job{}
	eventually(t, ctx, "the cache to hold the manager Job", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: "team", Name: "managed"}, got) == nil
	})
	if got.Kind != "Job" || got.UID == "" || got.Labels["app"] != "train" || got.Labels[batchv1.JobNameLabel] != "" {
		t.Errorf("the cached Job's metadata: %+v", got.ObjectMeta)
	}
	containers := got.Spec.Template.Spec.Containers
	if ptr.Deref(got.Spec.Parallelism, 0) != 2 || len(containers) != 1 || !containers[0].Resources.Requests.Cpu().Equal(resource.MustParse("500m")) ||
		got.Spec.Template.Spec.NodeSelector["pool"] != "a" {
		t.Errorf("the cached Job lost what its readers read: %+v", got.Spec)
	}
	if containers[0].Image != "" || containers[0].Command != nil || got.Spec.Selector != nil {
		t.Errorf("the cached Job keeps what only the mirror's creation reads: %+v", got.Spec)
	}
	// The caller's own: changing it leaves the cache be.
	got.Spec.Template.Spec.NodeSelector["pool"] = "changed"
	again := &batchv1.Job{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "team", Name: "managed"}, again); err != nil || again.Spec.Template.Spec.NodeSelector["pool"] != "a" {
		t.Errorf("a change of what Get gave changed the cache: %v, %v", again.Spec.Template.Spec.NodeSelector, err)
	}

	var unplaced batchv1.JobList
	eventually(t, ctx, "the other Job in the cache", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: "team", Name: "other"}, &batchv1.Job{}) == nil
	})
	if err := c.List(ctx, &unplaced, client.MatchingFields{PlacementIndex: UnplacedKey}); err != nil {
		t.Fatal(err)
	}
	if len(unplaced.Items) != 1 || unplaced.Items[0].Name != "managed" {
		t.Errorf("the unplaced manager Jobs listed: %d, want the one", len(unplaced.Items))
	}
	if err := c.List(ctx, &unplaced, client.UnsafeDisableDeepCopy); err == nil {
		t.Error("a List without copies handed out what the cache keeps as Jobs")
	}

	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.WorkerAnnotation + `":"worker-1"}}}`)
	if err := api.Patch(ctx, job("managed", nil), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the handlers to see the placement", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["managed"] == "worker-1"
	})
	var placed batchv1.JobList
	eventually(t, ctx, "the index to list the Job as placed", func() bool {
		return c.List(ctx, &placed, client.MatchingFields{PlacementIndex: "worker-1"}) == nil && len(placed.Items) == 1
	})

	// A manager Job over what the cache keeps of one (no webhook here to
	// refuse it) is handed out as its identity only, saying why.
	big := job("big", ptr.To(v1alpha1.ManagerManagedBy))
	big.Annotations = map[string]string{"team.example/owner": "ana"}
	for i := range 2100 {
		big.Spec.Template.Spec.Tolerations = append(big.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("example.com/t-%04d", i), Operator: corev1.TolerationOpExists})
	}
	if err := api.Create(ctx, big); err != nil {
		t.Fatal(err)
	}
	tomb := &batchv1.Job{}
	eventually(t, ctx, "the cache to hold the large Job", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: "team", Name: "big"}, tomb) == nil
	})
	if why, over := OverBudgetOf(tomb); !over || tomb.UID != big.UID || tomb.Spec.Template.Spec.Tolerations != nil || tomb.Labels != nil {
		t.Errorf("the large Job's cached form: over %v (%s), %+v", over, why, tomb.ObjectMeta)
	}
	// Not acted on: neither placed nor waiting for room.
	if err := c.List(ctx, &unplaced, client.MatchingFields{PlacementIndex: UnplacedKey}); err != nil || len(unplaced.Items) != 0 {
		t.Errorf("the unplaced manager Jobs listed: %d (%v), want none", len(unplaced.Items), err)
	}
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
