// Package follow loads a manager's inspection API as tenants do when they
// follow their Jobs' logs: each tenant a user with the rights `kubectl
// jobferry logs` asks for, a Job of many long-running pods, and the real
// plugin following the logs of all of them. The bench measures dispatch
// meanwhile, and the e2e tests check that it goes on.
package follow

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/devtools/simworker"
)

// Rules are what a tenant who follows logs may do in its namespace on the
// manager: create and read its Jobs, and what `kubectl logs` of their pods
// would ask (the inspection API checks the same).
var Rules = []rbacv1.PolicyRule{
	{APIGroups: []string{batchv1.GroupName}, Resources: []string{"jobs"}, Verbs: []string{"get", "create"}},
	{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{inspectionv1alpha1.GroupVersion.Group}, Resources: []string{"jobs/log"}, Verbs: []string{"get"}},
}

// BindTenant gives user Rules in ns (a Role and a RoleBinding named
// "following-USER") and returns once the authorizer allows them.
func BindTenant(ctx context.Context, c kubernetes.Interface, ns, user string) error {
	return devenv.BindRole(ctx, c, ns, user, "following-"+user, Rules...)
}

// Job is a Job of pods pods that run for an hour on KWOK's nodes (its
// pod-complete stage's delay), each requesting little, so they leave room
// for the Jobs measured beside them.
func Job(ns, name string, pods int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simworker.RunForAnnotation: time.Hour.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: "registry.example/sleep:1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
					}},
				},
			},
		},
	}
}

// Follower is one `kubectl jobferry logs job NAME --all-pods -f` running as
// a tenant.
type Follower struct {
	out  Buffer
	stop context.CancelFunc
	done chan struct{}
	// PID is the plugin's process.
	PID int
}

// Start runs the real plugin (bin/kubectl-jobferry) following the logs of
// every pod of Job ns/job as user, through kubeconfig (an administrator's,
// impersonating user), until Stop or ctx ends.
func Start(ctx context.Context, kubeconfig, ns, user, job string) (*Follower, error) {
	bin, err := localcluster.BinDir()
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	f := &Follower{stop: stop, done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl-jobferry"), "logs", "job", job, "--all-pods", "-f",
		"-n", ns, "--as", user, "--kubeconfig", kubeconfig)
	cmd.Stdout, cmd.Stderr = &f.out, &f.out
	if err := cmd.Start(); err != nil {
		stop()
		return nil, fmt.Errorf("following the logs of %s/%s as %s: %w", ns, job, user, err)
	}
	f.PID = cmd.Process.Pid
	go func() {
		defer close(f.done)
		_ = cmd.Wait()
	}()
	return f, nil
}

// Output is what the plugin printed so far.
func (f *Follower) Output() string { return f.out.String() }

// PodsStreamed is how many pods' lines it printed (each line prefixed
// [pod/NAME/CONTAINER]).
func (f *Follower) PodsStreamed() int { return f.PodsPrinting("") }

// Lines is how many lines of pods' logs holding marker it printed.
func (f *Follower) Lines(marker string) int {
	n := 0
	for _, line := range strings.Split(f.Output(), "\n") {
		if strings.HasPrefix(line, "[pod/") && strings.Contains(line, marker) {
			n++
		}
	}
	return n
}

// PodsPrinting is how many pods' lines holding marker it printed.
func (f *Follower) PodsPrinting(marker string) int {
	var lines []string
	for _, line := range strings.Split(f.Output(), "\n") {
		if strings.Contains(line, marker) {
			lines = append(lines, line)
		}
	}
	return PodsStreamed(strings.Join(lines, "\n"))
}

// Running: the plugin has not ended.
func (f *Follower) Running() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// Stop ends the plugin and waits until it has.
func (f *Follower) Stop() {
	f.stop()
	<-f.done
}

// WaitStreaming waits until each follower printed lines of pods pods.
func WaitStreaming(ctx context.Context, followers []*Follower, pods int, timeout time.Duration) error {
	return waitPods(ctx, followers, pods, timeout, "", "stream")
}

// WaitLine waits until each follower printed a line holding marker for
// pods pods: after marker was appended to every container's log, the pods
// whose streams are still open.
func WaitLine(ctx context.Context, followers []*Follower, marker string, pods int, timeout time.Duration) error {
	return waitPods(ctx, followers, pods, timeout, marker, fmt.Sprintf("print %q", marker))
}

func waitPods(ctx context.Context, followers []*Follower, pods int, timeout time.Duration, marker, what string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, f := range followers {
			if f.PodsPrinting(marker) < pods {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var b strings.Builder
		for i, f := range followers {
			fmt.Fprintf(&b, "\nfollower %d (%d pods did):\n%.2000s", i, f.PodsPrinting(marker), f.Output())
		}
		return fmt.Errorf("the followed logs did not all %s for %d pods: %w%s", what, pods, err, b.String())
	}
	return nil
}

// PodsStreamed is how many pods' lines a log of every pod holds (each line
// prefixed [pod/NAME/CONTAINER]).
func PodsStreamed(log string) int {
	pods := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, "[pod/"); ok {
			if name, _, ok := strings.Cut(rest, "/"); ok {
				pods[name] = true
			}
		}
	}
	return len(pods)
}

// Buffer is an output a process writes to while tests read it.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
