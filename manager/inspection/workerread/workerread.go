// Package workerread is what the inspection API reads on a worker, with the
// manager's identity there: the mirror of a manager Job, the mirror's pods,
// the Events of both and the pods' logs. The rights below are the worker
// chart's managerIdentity.allowInspection (hack/generate.sh writes them into
// charts/jobferry-worker/files/rbac-inspection.yaml); the mirror itself the
// manager reads with the rights it dispatches with.
//
// Every read is bounded by construction, whatever the worker's users put in
// their objects: lists are read as a stream, one item decoded at a time,
// and only a slim form of each item (Shown*) is kept; a list asks for no
// more than is shown; a log stream carries a byte limit.
package workerread

// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=list

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/jobferry/jobferry/internal/eventtime"
)

// eventsPage is how many Events one list request asks for.
const eventsPage = 500

// ReadBudget is the most one Reader reads of a worker's lists, in bytes:
// what a worker's users put into pods and Events (a condition of a
// megabyte on each of hundreds of labelled pods) costs a replica's
// inspection slot its time, and the worker its reads, up to this.
const ReadBudget = 64 << 20

// ErrReadBudget ends a list read past ReadBudget.
var ErrReadBudget = fmt.Errorf("the worker's lists took more than %d MiB, the most one inspection reads", ReadBudget>>20)

// Lister opens a list of a namespace's pods or events on the worker as
// JSON, to be read as a stream.
type Lister func(ctx context.Context, namespace, resource string, opts metav1.ListOptions) (io.ReadCloser, error)

// Reader reads one worker.
type Reader struct {
	kube kubernetes.Interface
	list Lister
	// left is what the Reader may still read of lists (ReadBudget).
	left int64
}

// New reads the worker kube, listing through its REST client.
func New(kube kubernetes.Interface) *Reader {
	rc := kube.CoreV1().RESTClient()
	return NewWithLister(kube, func(ctx context.Context, namespace, resource string, opts metav1.ListOptions) (io.ReadCloser, error) {
		// JSON, whatever the client's content type: it is what is read
		// an item at a time.
		return rc.Get().Namespace(namespace).Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).
			SetHeader("Accept", "application/json").Stream(ctx)
	})
}

// NewWithLister reads the worker kube, listing with list (a client that
// serves no REST, such as client-go's fake, lists so).
func NewWithLister(kube kubernetes.Interface, list Lister) *Reader {
	return &Reader{kube: kube, list: list, left: ReadBudget}
}

// Mirror reads the Job named like the manager Job on the worker, as an
// inspection shows it (ShownJob): whether it is the manager Job's mirror is
// the caller's to decide, from what ShownJob keeps.
func (r *Reader) Mirror(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	job, err := r.kube.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return ShownJob(job), nil
}

// PodList is what Pods found.
type PodList struct {
	// Items are the mirror's pods as shown (ShownPod), oldest first.
	Items []corev1.Pod
	// More says there were more than the most asked for, or more than
	// were read within ReadBudget (Stopped).
	More, Stopped bool
	// ResourceVersion is the list's: where a watch of the pods starts.
	ResourceVersion string
}

// Pods lists the pods of mirror — those it controls (their controller
// owner reference names its UID): the controller-uid label alone is
// anyone's to set who may create pods in the namespace — oldest first,
// at most max of them. It asks for pages of max+1 (the most shown, and
// one to tell there are more), and stops after scanning MaxScanned(max)
// pods with the label.
func (r *Reader) Pods(ctx context.Context, mirror *batchv1.Job, max int) (PodList, error) {
	opts := metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(mirror.UID), Limit: int64(max + 1)}
	var out PodList
	scanned := 0
	for {
		page, err := r.each(ctx, mirror.Namespace, "pods", opts, func(dec *json.Decoder) error {
			var pod corev1.Pod
			if err := dec.Decode(&pod); err != nil {
				return err
			}
			scanned++
			if metav1.IsControlledBy(&pod, mirror) && len(out.Items) <= max {
				out.Items = append(out.Items, ShownPod(&pod))
			}
			return nil
		})
		if errors.Is(err, ErrReadBudget) {
			out.More, out.Stopped = true, true
			break
		}
		if err != nil {
			return PodList{}, err
		}
		if out.ResourceVersion == "" {
			out.ResourceVersion = page.ResourceVersion
		}
		if page.Continue == "" {
			break
		}
		if len(out.Items) > max || scanned >= MaxScanned(max) {
			out.More = true
			break
		}
		opts.Continue = page.Continue
	}
	if len(out.Items) > max {
		out.Items, out.More = out.Items[:max], true
	}
	SortPods(out.Items)
	return out, nil
}

// MaxScanned is about how many pods with a mirror's label Pods reads at
// most to find max of its own (it stops at the page that passes it):
// others may carry the label.
func MaxScanned(max int) int { return 3*max + 1 }

// SortPods orders pods oldest first, by name among the same second.
func SortPods(pods []corev1.Pod) {
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// WatchPods watches the mirror's pods from resourceVersion (a list's) on,
// resuming after the worker ends a watch; the watch ends with ctx, or when
// the worker no longer has that version (410 Gone). Without a version, it
// starts with the pods as they are (one watch, not resumed).
func (r *Reader) WatchPods(ctx context.Context, mirror *batchv1.Job, resourceVersion string) (watch.Interface, error) {
	pods := r.kube.CoreV1().Pods(mirror.Namespace)
	selector := batchv1.ControllerUidLabel + "=" + string(mirror.UID)
	if resourceVersion == "" || resourceVersion == "0" {
		return pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	}
	return watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, &toolscache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return pods.Watch(ctx, opts)
		},
	})
}

// Events lists the namespace's Events about the objects of uids, as shown
// (ShownEvent), the newest keep of them, oldest first; it reads at most
// scan Events of the namespace (all says whether it read every one) and
// cut says whether more than keep were about the objects.
func (r *Reader) Events(ctx context.Context, namespace string, uids map[types.UID]bool, scan, keep int) (events []corev1.Event, all, cut bool, err error) {
	opts := metav1.ListOptions{Limit: eventsPage}
	read := 0
	newest := func() {
		if len(events) > keep {
			eventtime.Sort(events)
			events, cut = slices.Clone(events[len(events)-keep:]), true
		}
	}
	for {
		page, err := r.each(ctx, namespace, "events", opts, func(dec *json.Decoder) error {
			var ev corev1.Event
			if err := dec.Decode(&ev); err != nil {
				return err
			}
			read++
			if uids[ev.InvolvedObject.UID] {
				events = append(events, ShownEvent(&ev))
				// At most twice keep are held between trims.
				if len(events) >= 2*keep {
					newest()
				}
			}
			return nil
		})
		if errors.Is(err, ErrReadBudget) {
			newest()
			eventtime.Sort(events)
			return events, false, cut, nil
		}
		if err != nil {
			return nil, false, false, err
		}
		if page.Continue == "" || read >= scan {
			newest()
			eventtime.Sort(events)
			return events, page.Continue == "", cut, nil
		}
		opts.Continue = page.Continue
	}
}

// Log opens the log of one container of a pod, at most limitBytes of it.
func (r *Reader) Log(ctx context.Context, namespace, pod, container string, follow bool, limitBytes int64) (io.ReadCloser, error) {
	stream, err := r.kube.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: follow, LimitBytes: &limitBytes}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the log of pod %s/%s, container %s: %w", namespace, pod, container, err)
	}
	return stream, nil
}

// each reads one page of a list, handing each item to item as it is
// decoded: a page of large objects is never held whole.
func (r *Reader) each(ctx context.Context, namespace, resource string, opts metav1.ListOptions, item func(*json.Decoder) error) (metav1.ListMeta, error) {
	body, err := r.list(ctx, namespace, resource, opts)
	if err != nil {
		return metav1.ListMeta{}, err
	}
	defer body.Close()
	meta, err := EachItem(&budgeted{r: body, left: &r.left}, item)
	if errors.Is(err, ErrReadBudget) {
		return meta, err
	}
	if err != nil {
		return meta, fmt.Errorf("reading the list of %s in namespace %s: %w", resource, namespace, err)
	}
	return meta, nil
}

// budgeted reads r until left is spent.
type budgeted struct {
	r    io.Reader
	left *int64
}

func (b *budgeted) Read(p []byte) (int, error) {
	if *b.left <= 0 {
		return 0, ErrReadBudget
	}
	if int64(len(p)) > *b.left {
		p = p[:*b.left]
	}
	n, err := b.r.Read(p)
	*b.left -= int64(n)
	return n, err
}

// EachItem reads a list's JSON from body, handing the decoder to item at
// each element of its items, and returns the list's metadata.
func EachItem(body io.Reader, item func(*json.Decoder) error) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	dec := json.NewDecoder(body)
	if err := expect(dec, json.Delim('{')); err != nil {
		return meta, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return meta, err
		}
		switch tok {
		case "metadata":
			err = dec.Decode(&meta)
		case "items":
			err = eachElement(dec, item)
		default:
			var skipped json.RawMessage
			err = dec.Decode(&skipped)
		}
		if err != nil {
			return meta, err
		}
	}
	return meta, expect(dec, json.Delim('}'))
}

func eachElement(dec *json.Decoder, item func(*json.Decoder) error) error {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return err
	case tok == nil:
		return nil // "items": null
	case tok != json.Delim('['):
		return fmt.Errorf("a list's items are %v, not an array", tok)
	}
	for dec.More() {
		if err := item(dec); err != nil {
			return err
		}
	}
	return expect(dec, json.Delim(']'))
}

func expect(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("a list: %v where %v was expected", tok, want)
	}
	return nil
}
