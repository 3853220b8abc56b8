//go:build integration

package tenantlimits

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
)

// On a real kube-apiserver: a pod of the Job is dry-run in its namespace,
// so the LimitRange gives a container without resources its defaults (which
// the verdict carries, and the charge counts) and refuses one over its
// maximum with its own message; nothing is stored; a verdict serves the
// Job's placement and its mirror.
func TestIntegrationPodAdmission(t *testing.T) {
	logf.SetLogger(logr.Discard())
	cfg := testenv.Start(t, &envtest.Environment{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api, err := client.New(cfg, client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "team-a"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		// No serviceaccount controller here: the pod's ServiceAccount is made.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "containers"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			Max:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		}}}},
	} {
		if err := api.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	job := func(name string, cpu string) *batchv1.Job {
		c := corev1.Container{Name: "main", Image: "busybox"}
		if cpu != "" {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		}
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: batchv1.JobSpec{
			Suspend: ptr.To(true), Parallelism: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](4),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}}},
		}}
		if err := api.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	admission := NewPodAdmission(api, api, nil)

	v, err := admission.Admit(ctx, job("defaults", ""))
	if err != nil || v.Refused != "" {
		t.Fatalf("a Job within the LimitRange: %+v, %v", v, err)
	}
	main, ok := v.Admitted.Containers["main"]
	if !ok || main.Requests.Cpu().String() != "500m" || main.Limits.Cpu().String() != "1" {
		t.Errorf("admitted containers %v, want main with the LimitRange's defaults (500m, 1)", v.Admitted.Containers)
	}
	if got := v.Admitted.Charge.PerPod[corev1.ResourceRequestsCPU]; got.String() != "500m" {
		t.Errorf("requests.cpu charged per pod %s, want the default 500m", got.String())
	}

	v, err = admission.Admit(ctx, job("too-big", "4"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Refused, `pods "too-big-0-xxxxx" is forbidden: maximum cpu usage per Container is 2, but limit is 4`) {
		t.Errorf("refusal %q, want the LimitRange's own message", v.Refused)
	}
	t.Logf("refused: %s", v.Refused)

	var pods corev1.PodList
	if err := api.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods stored by the dry-runs, want none", len(pods.Items))
	}
	t.Run("carried across the placement", func(t *testing.T) { testVerdictCarriedAcrossThePlacement(ctx, t, api, ns) })
}

// countingWriter counts the pods created through it (the dry-runs).
type countingWriter struct {
	client.Writer
	pods int
}

func (w *countingWriter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		w.pods++
	}
	return w.Writer.Create(ctx, obj, opts...)
}

// A verdict is dry-run once per generation; carried across jobferry's own
// write of the Job (its placement: a worker's directives, the suspension
// lifted), it serves the next generation without a second dry-run, while a
// generation that comes of anyone else's write is dry-run again.
func testVerdictCarriedAcrossThePlacement(ctx context.Context, t *testing.T, api client.Client, ns string) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}, Spec: batchv1.JobSpec{
		Suspend:  ptr.To(true),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}},
	}}
	if err := api.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	writer := &countingWriter{Writer: api}
	admission := NewPodAdmission(api, writer, nil)
	admit := func(what string, j *batchv1.Job, dryRuns int) {
		t.Helper()
		if v, err := admission.Admit(ctx, j); err != nil || v.Refused != "" {
			t.Fatalf("%s: %+v, %v", what, v, err)
		}
		if writer.pods != dryRuns {
			t.Errorf("%s: %d dry-runs in all, want %d", what, writer.pods, dryRuns)
		}
	}
	admit("first placement", job, 1)
	admit("the same generation again", job, 1)

	placed := job.DeepCopy()
	placed.Spec.Suspend = ptr.To(false)
	placed.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	if err := api.Update(ctx, placed); err != nil {
		t.Fatal(err)
	}
	if placed.Generation == job.Generation {
		t.Fatalf("the placement's write left generation %d", placed.Generation)
	}
	// The reconciler hands Carry the write's answer with the template's
	// scheduling as its user wrote it: the template then digests as the
	// one the API server gave the dry-run, defaults and all.
	asJudged := placed.DeepCopy()
	asJudged.Spec.Template.Spec.NodeSelector = job.Spec.Template.Spec.NodeSelector
	admission.Carry(job, asJudged)
	admit("the Job as the placement wrote it", placed, 1)

	// Its user suspends it (any spec change by anyone else would do).
	changed := placed.DeepCopy()
	changed.Spec.Suspend = ptr.To(true)
	if err := api.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	admit("a generation its user wrote", changed, 2)
}
