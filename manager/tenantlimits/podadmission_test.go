package tenantlimits

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// apiServer is the manager cluster as PodAdmission sees it: the Job it
// reads whole, and its admission's answer to every dry-run, counted.
type apiServer struct {
	client.Reader
	client.Writer
	job     *batchv1.Job
	refuse  error
	dryRuns int
}

func (s *apiServer) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.job.DeepCopyInto(obj.(*batchv1.Job))
	return nil
}

func (s *apiServer) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		s.dryRuns++
	}
	return s.refuse
}

func TestCarryTakesAVerdictOnlyToThePlacementsOwnWrite(t *testing.T) {
	judged := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "uid-1", Generation: 1, ResourceVersion: "10"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "trainer:1"}},
		}}},
	}
	// placed is the placement's write as the caller hands it to Carry:
	// the next generation, a new version, the template's scheduling put
	// back as its user wrote it.
	placed := func(change func(*batchv1.Job)) *batchv1.Job {
		j := judged.DeepCopy()
		j.Generation, j.ResourceVersion = 2, "11"
		if change != nil {
			change(j)
		}
		return j
	}
	for _, tc := range []struct {
		name string
		// refuse is the admission's answer to the placement's dry-run.
		refuse error
		// before and after: how long before the carry, and after it
		// the mirror's admission is read.
		before, after time.Duration
		written       *batchv1.Job
		carried       bool
	}{
		{name: "the placement's own write", written: placed(nil), carried: true},
		{name: "for the time the verdict has left", before: 4 * time.Minute, after: 59 * time.Second, written: placed(nil), carried: true},
		{name: "not past the verdict's own expiry", before: 4 * time.Minute, after: time.Minute + time.Second, written: placed(nil)},
		{name: "not once expired", before: admittedTTL + time.Second, written: placed(nil)},
		{name: "not a refusal", refuse: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "train-", nil), written: placed(nil)},
		{name: "not two generations on", written: placed(func(j *batchv1.Job) { j.Generation = 3 })},
		{name: "not to a Job of the same name made again", written: placed(func(j *batchv1.Job) { j.UID = "uid-2" })},
		{name: "not to a write that stored nothing", written: placed(func(j *batchv1.Job) { j.ResourceVersion = "10" })},
		{name: "not when the write's template changed beyond the scheduling (a mutating webhook)", written: placed(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Image = "trainer:evil"
		})},
		{name: "not when a container was added in the same write", written: placed(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "miner"})
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
			server := &apiServer{job: judged, refuse: tc.refuse}
			a := NewPodAdmission(server, server, clk)
			if _, err := a.Admit(context.Background(), judged); err != nil {
				t.Fatalf("the placement's dry-run: %v", err)
			}
			clk.Step(tc.before)
			a.Carry(judged, tc.written)
			clk.Step(tc.after)
			server.job, server.refuse = tc.written, nil
			if _, err := a.Admit(context.Background(), tc.written); err != nil {
				t.Fatalf("the mirror's admission: %v", err)
			}
			if carried := server.dryRuns == 1; carried != tc.carried {
				t.Errorf("carried = %v (%d dry-runs), want %v", carried, server.dryRuns, tc.carried)
			}
		})
	}
}
