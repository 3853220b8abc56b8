// Package workerread is what the inspection API reads on a worker, with the
// manager's identity there: the mirror of a manager Job, the mirror's pods,
// the Events of both and the pods' logs. The rights below are the worker
// chart's managerIdentity.allowInspection (hack/generate.sh writes them into
// charts/jobferry-worker/files/rbac-inspection.yaml); the mirror itself the
// manager reads with the rights it dispatches with.
//
// Every read is bounded: pods and Events are read in pages up to a limit,
// and a log stream carries a byte limit.
package workerread

// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=list

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// pageSize is how many pods or Events one list request asks for.
const pageSize = 500

// Mirror reads the Job named like the manager Job on the worker: whether it
// is the manager Job's mirror is the caller's to decide.
func Mirror(ctx context.Context, worker kubernetes.Interface, namespace, name string) (*batchv1.Job, error) {
	return worker.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
}

// Pods lists the pods of mirror — those it controls (their controller
// owner reference names its UID): the controller-uid label alone is
// anyone's to set who may create pods in the namespace — oldest first,
// at most max of them (more says whether there were more). It reads
// pages of max, and stops after scanning MaxScanned(max) pods with the
// label.
func Pods(ctx context.Context, worker kubernetes.Interface, mirror *batchv1.Job, max int) (pods []corev1.Pod, more bool, err error) {
	opts := metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(mirror.UID), Limit: int64(min(max+1, pageSize))}
	scanned := 0
	for {
		list, err := worker.CoreV1().Pods(mirror.Namespace).List(ctx, opts)
		if err != nil {
			return nil, false, err
		}
		scanned += len(list.Items)
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], mirror) {
				pods = append(pods, list.Items[i])
			}
		}
		if list.Continue == "" {
			break
		}
		if len(pods) > max || scanned >= MaxScanned(max) {
			more = true
			break
		}
		opts.Continue = list.Continue
	}
	if len(pods) > max {
		pods, more = pods[:max], true
	}
	SortPods(pods)
	return pods, more, nil
}

// MaxScanned is about how many pods with a mirror's label Pods reads at
// most to find max of its own (it stops at the page that passes it):
// others may carry the label.
func MaxScanned(max int) int { return 2*max + pageSize }

// SortPods orders pods oldest first, by name among the same second.
func SortPods(pods []corev1.Pod) {
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// Pod reads one pod by name through a list (the right the worker chart
// grants), nil when it is gone.
func Pod(ctx context.Context, worker kubernetes.Interface, namespace, name string) (*corev1.Pod, error) {
	list, err := worker.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// Events lists the namespace's Events about the objects of uids, reading at
// most scan Events of the namespace (all says whether it read every one).
func Events(ctx context.Context, worker kubernetes.Interface, namespace string, uids map[types.UID]bool, scan int) (events []corev1.Event, all bool, err error) {
	opts := metav1.ListOptions{Limit: pageSize}
	read := 0
	for {
		list, err := worker.CoreV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return nil, false, err
		}
		read += len(list.Items)
		for _, e := range list.Items {
			if uids[e.InvolvedObject.UID] {
				events = append(events, e)
			}
		}
		if list.Continue == "" {
			return events, true, nil
		}
		if read >= scan {
			return events, false, nil
		}
		opts.Continue = list.Continue
	}
}

// Log opens the log of one container of a pod, at most limitBytes of it.
func Log(ctx context.Context, worker kubernetes.Interface, namespace, pod, container string, follow bool, limitBytes int64) (io.ReadCloser, error) {
	stream, err := worker.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: follow, LimitBytes: &limitBytes}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the log of pod %s/%s, container %s: %w", namespace, pod, container, err)
	}
	return stream, nil
}
