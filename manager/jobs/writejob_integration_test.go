//go:build integration

package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/jobstate/jobstatetest"
	"github.com/jobferry/jobferry/mirror"
)

// startAPIServer starts a kube-apiserver and etcd (envtest) for the test
// and returns a client of it.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WriteJob, on a real kube-apiserver: the placement (annotations and the
// worker's directives in the pod template) lands sealed and leaves the rest
// of the template as it was; releasing the Job removes what placing added;
// and a write from a Job as read before someone else's change is refused
// with a Conflict, not applied over it.
func TestIntegrationWriteJobPatchesWhatChangedOnTheJobAsRead(t *testing.T) {
	c := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := jobstate.Key{Secret: []byte("0123456789abcdef0123456789abcdef")}
	r := &JobReconciler{Client: c, Keys: jobstatetest.Key(key), Clock: clock.RealClock{}}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "placed",
			Annotations: map[string]string{v1alpha1.HeldForPlacementAnnotation: "true", "team": "a"}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "work", Image: "registry.example/work:1", Command: []string{"run"},
				Env: []corev1.EnvVar{{Name: "MODE", Value: "batch"}}}},
		}}},
	}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	read := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), read); err != nil {
		t.Fatal(err)
	}

	placed, err := policy.PlacedJob(read, "worker-1", v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "general"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.writeJob(ctx, read, placed); err != nil {
		t.Fatalf("writing the placement: %v", err)
	}
	got := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[v1alpha1.WorkerAnnotation] != "worker-1" || got.Annotations["team"] != "a" {
		t.Errorf("annotations after placing: %v", got.Annotations)
	}
	if verdict, _ := jobstate.Verify(got, key); verdict != jobstate.Trusted || got.Annotations[v1alpha1.StateSealAnnotation] == "" {
		t.Errorf("the placement is not sealed: %v, annotations %v", verdict, got.Annotations)
	}
	spec := got.Spec.Template.Spec
	if spec.NodeSelector["pool"] != "general" {
		t.Errorf("the worker's node selector was not injected: %v", spec.NodeSelector)
	}
	if c := spec.Containers; len(c) != 1 || c[0].Image != "registry.example/work:1" || len(c[0].Env) != 1 || c[0].Command[0] != "run" {
		t.Errorf("the containers changed: %+v", c)
	}
	if placed.ResourceVersion != got.ResourceVersion {
		t.Errorf("the written Job holds resourceVersion %s, the server %s", placed.ResourceVersion, got.ResourceVersion)
	}

	released := policy.ReleasedJob(got)
	if err := r.writeJob(ctx, got, released); err != nil {
		t.Fatalf("writing the release: %v", err)
	}
	again := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), again); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Annotations[v1alpha1.WorkerAnnotation]; ok {
		t.Errorf("the worker annotation is still there after the release: %v", again.Annotations)
	}

	// got is now stale: a write from it must not land over the release.
	stale := got.DeepCopy()
	metav1.SetMetaDataAnnotation(&stale.ObjectMeta, v1alpha1.MirrorUIDAnnotation, "uid-from-a-stale-read")
	if err := r.writeJob(ctx, got, stale); !apierrors.IsConflict(err) {
		t.Fatalf("a write from a stale read: %v, want a Conflict", err)
	}
	final := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), final); err != nil {
		t.Fatal(err)
	}
	if _, ok := final.Annotations[v1alpha1.MirrorUIDAnnotation]; ok {
		t.Errorf("the stale write landed: %v", final.Annotations)
	}
}

// writeStatus, on a real kube-apiserver, from a Job as the cache keeps it
// (without the labels the API server derived from its UID and name): the
// status lands and the labels stay; a write from a Job as read before
// someone else's change is refused with a Conflict. An update of the status
// subresource from the same Job takes those labels away (its metadata is
// written too): checked, this test fails with one.
func TestIntegrationWriteStatusLeavesTheJobsMetadataBe(t *testing.T) {
	c := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &JobReconciler{Client: c, Clock: clock.RealClock{}}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "unlabelled"},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "work", Image: "registry.example/work:1"}}},
		}},
	}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	read := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), read); err != nil {
		t.Fatal(err)
	}
	labels := read.Labels
	if labels[batchv1.ControllerUidLabel] != string(read.UID) || labels[batchv1.JobNameLabel] != job.Name || labels["app"] != "train" {
		t.Fatalf("the API server gave the Job the labels %v; want its template's, with those derived from its UID and name", labels)
	}
	cached := read.DeepCopy()
	cached.Labels = mirror.WithoutGeneratedLabels(cached.Labels)

	waiting := batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue,
		Reason: "WaitingForPlacement", Message: "no worker has room", LastProbeTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	written, err := r.writeStatus(ctx, cached, waiting)
	if err != nil {
		t.Fatalf("writing the status: %v", err)
	}
	got := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "WaitingForPlacement" {
		t.Errorf("status after the write: %+v", got.Status)
	}
	if diff := cmp.Diff(labels, got.Labels); diff != "" {
		t.Errorf("the Job's labels changed with its status (-before +after):\n%s", diff)
	}
	if written.ResourceVersion != got.ResourceVersion || written.Status.Conditions[0].Reason != "WaitingForPlacement" {
		t.Errorf("writeStatus returned resourceVersion %s and %+v; the server holds %s", written.ResourceVersion, written.Status, got.ResourceVersion)
	}

	// cached is now stale: a write from it must not land.
	if _, err := r.writeStatus(ctx, cached, batchv1.JobStatus{}); !apierrors.IsConflict(err) {
		t.Fatalf("a status write from a stale read: %v, want a Conflict", err)
	}
	final := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), final); err != nil {
		t.Fatal(err)
	}
	if len(final.Status.Conditions) != 1 {
		t.Errorf("the stale status write landed: %+v", final.Status)
	}
}

// withStoredTemplate, on a real kube-apiserver: a Job as the cache keeps it
// (its containers without image or command, jobferry's annotations only)
// gets the template and the annotations the API server holds; a Job whose spec changed since it was read gets nothing.
func TestIntegrationWithStoredTemplateReadsTheWholeTemplate(t *testing.T) {
	c := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &JobReconciler{Client: c, APIReader: c}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "whole", Annotations: map[string]string{"team.example/owner": "ana"}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "work", Image: "registry.example/work:1", Command: []string{"run"}}},
		}}},
	}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	cached := job.DeepCopy()
	cached.Spec.Template.Spec.Containers[0].Image, cached.Spec.Template.Spec.Containers[0].Command = "", nil
	cached.Annotations = map[string]string{v1alpha1.WorkerAnnotation: "worker-1"}

	whole, err := r.withStoredTemplate(ctx, cached)
	if err != nil || whole == nil {
		t.Fatalf("reading the stored template: %v, %v", whole, err)
	}
	if c := whole.Spec.Template.Spec.Containers[0]; c.Image != "registry.example/work:1" || len(c.Command) != 1 {
		t.Errorf("the container is not the stored one: %+v", c)
	}
	if whole.Annotations[v1alpha1.WorkerAnnotation] != "worker-1" {
		t.Errorf("the rest is not the Job as read: %v", whole.Annotations)
	}
	// The cache keeps jobferry's annotations only: the others come from
	// the API server, for the mirror.
	if whole.Annotations["team.example/owner"] != "ana" {
		t.Errorf("the Job's own annotations are not the stored ones: %v", whole.Annotations)
	}

	stored := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), stored); err != nil {
		t.Fatal(err)
	}
	changed := stored.DeepCopy()
	changed.Spec.Parallelism = ptr.To[int32](2)
	if err := c.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if whole, err := r.withStoredTemplate(ctx, cached); err != nil || whole != nil {
		t.Errorf("a Job whose spec changed since it was read: %v, %v; want nothing", whole, err)
	}
}
