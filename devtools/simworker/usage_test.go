package simworker

import (
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/worker"
)

// The summary from the usage kept Job by Job is the one the worker binary
// would publish from the same Jobs' pods (worker.Summarize), as Jobs start,
// grow, finish and go; and once none runs, nothing is requested.
func TestUsageSummarizesAsThePodsWould(t *testing.T) {
	var nodes []corev1.Node
	for _, n := range localcluster.NodesFor([]localcluster.Pool{{Name: "cpu", Nodes: 3}, {Name: "gpu", Nodes: 2}}, v1alpha1.DefaultPoolLabel) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		nodes = append(nodes, *n)
	}
	base, poolOfNode := worker.NodePools(nodes, v1alpha1.DefaultPoolLabel)
	u := newUsage(nodes, poolOfNode)
	jobs := map[types.UID]*batchv1.Job{}
	job := func(i int, active int32, cpu string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprint("j", i), UID: types.UID(fmt.Sprint("uid-", i))},
			Status: batchv1.JobStatus{Active: active}}
		j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}
		return j
	}
	// podsOf are the pods the Jobs would have, spread as usage spreads them.
	podsOf := func() []corev1.Pod {
		var pods []corev1.Pod
		for _, j := range jobs {
			if !running(j) {
				continue
			}
			h := fnv.New32a()
			h.Write([]byte(j.UID))
			for i := range j.Status.Active {
				pods = append(pods, corev1.Pod{Spec: corev1.PodSpec{NodeName: nodes[(int(h.Sum32())+int(i))%len(nodes)].Name, Containers: j.Spec.Template.Spec.Containers}})
			}
		}
		return pods
	}
	set := func(j *batchv1.Job) { jobs[j.UID] = j; u.set(j) }
	done := func(j *batchv1.Job) *batchv1.Job {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		return j
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"nothing runs", func() {}},
		{"ten Jobs start", func() {
			for i := range 10 {
				set(job(i, int32(1+i%3), "250m"))
			}
		}},
		{"one grows", func() { set(job(3, 5, "250m")) }},
		{"one finishes", func() { set(done(job(4, 0, "250m"))) }},
		{"one is deleted", func() { delete(jobs, "uid-5"); u.remove("uid-5") }},
		{"all finish", func() {
			for i := range 10 {
				set(done(job(i, 0, "250m")))
			}
		}},
	}
	for _, s := range steps {
		s.do()
		want := worker.Summarize(nodes, podsOf(), v1alpha1.DefaultPoolLabel)
		got := worker.WithRequested(base, u.snapshot())
		if !equality.Semantic.DeepEqual(want, got) {
			t.Fatalf("after %q, the summary differs from the pods' (-want +got):\n%s", s.name, cmp.Diff(want, got))
		}
	}
	if len(u.byJob) != 0 || len(u.requested) != 0 {
		t.Errorf("with nothing running, usage keeps %d Jobs and %v requested", len(u.byJob), u.requested)
	}
}
