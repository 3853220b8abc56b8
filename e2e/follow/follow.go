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

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	"github.com/jobferry/jobferry/e2e/localcluster"
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
	name := "following-" + user
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: Rules}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Role %s/%s: %w", ns, name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating RoleBinding %s/%s: %w", ns, name, err)
	}
	// The authorizer sees the binding a moment later.
	last := Rules[len(Rules)-1]
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		review, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: last.Verbs[0], Group: last.APIGroups[0], Resource: "jobs", Subresource: "log"},
		}}, metav1.CreateOptions{})
		return err == nil && review.Status.Allowed, err
	})
	if err != nil {
		return fmt.Errorf("%s's rights in %s never took effect: %w", user, ns, err)
	}
	return nil
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
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"pod-complete.stage.kwok.x-k8s.io/delay": time.Hour.String()}},
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
	out  buffer
	stop context.CancelFunc
	done chan struct{}
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
func (f *Follower) PodsStreamed() int { return PodsStreamed(f.Output()) }

// Lines is how many lines of pods' logs it printed.
func (f *Follower) Lines() int {
	n := 0
	for _, line := range strings.Split(f.Output(), "\n") {
		if strings.HasPrefix(line, "[pod/") {
			n++
		}
	}
	return n
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
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, f := range followers {
			if f.PodsStreamed() < pods {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var b strings.Builder
		for i, f := range followers {
			fmt.Fprintf(&b, "\nfollower %d (%d pods streamed):\n%.2000s", i, f.PodsStreamed(), f.Output())
		}
		return fmt.Errorf("the followed logs did not all stream %d pods: %w%s", pods, err, b.String())
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

// buffer is an output both of the plugin's streams write to while tests
// read it.
type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
