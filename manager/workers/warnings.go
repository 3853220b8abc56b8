package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/jobferry/jobferry/internal/eventnote"
	"github.com/jobferry/jobferry/manager/cachebudget"
)

// Warning is one Warning Event seen on a worker.
type Warning struct {
	Worker string
	Event  *corev1.Event
}

// warningsWatch is a connection's watch of its worker's Warning Events.
type warningsWatch struct {
	mu     sync.Mutex
	cancel context.CancelFunc
}

// watchWarnings starts watching the worker's Warning Events (in its allowed
// namespaces, or all) and hands each added or updated one, slimmed, to seen,
// unless the watch runs already. It ends with the connection or
// stopWarnings.
func (c *Connection) watchWarnings(seen func(ctx context.Context, w Warning)) error {
	c.warnings.mu.Lock()
	defer c.warnings.mu.Unlock()
	if c.warnings.cancel != nil {
		return nil
	}
	cs, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return fmt.Errorf("building the Events client of worker %s: %w", c.name, err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	for _, ns := range rightScopes(c.namespaces) {
		go watchWarningEvents(ctx, cs, c.name, ns, seen)
	}
	c.warnings.cancel = cancel
	return nil
}

// watchWarningEvents forwards the Warning Events of a worker namespace (all
// when ""), from now on, until ctx ends. Anyone who may create Events in a
// worker namespace decides what they hold (an Event without eventTime has
// no size limit but the request's), so nothing of them is kept: no list of
// what exists, only a watch from the current resourceVersion (a one-item
// list gives it), each Event slimmed as it arrives. Events before the watch
// started are not forwarded; a reason a worker keeps reporting (the
// scheduler's, each retry) is forwarded when it next changes.
func watchWarningEvents(ctx context.Context, cs kubernetes.Interface, worker, ns string, seen func(ctx context.Context, w Warning)) {
	log := logf.FromContext(ctx).WithValues("worker", worker, "namespace", ns)
	selector := fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String()
	lw := &toolscache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = selector
		return cs.CoreV1().Events(ns).Watch(ctx, o)
	}}
	retry := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 8, Cap: time.Minute}
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector, Limit: 1})
		if err == nil {
			var w *watchtools.RetryWatcher
			if w, err = watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw); err == nil {
				err = forwardWarningEvents(ctx, w, worker, seen)
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Error(err, "watching the worker's Warning Events; starting again")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry.Step()):
		}
	}
}

// forwardWarningEvents hands the watch's Events to seen until it ends; the
// watch ends with an error when the API server no longer has the
// resourceVersion it resumes from.
func forwardWarningEvents(ctx context.Context, w *watchtools.RetryWatcher, worker string, seen func(ctx context.Context, w Warning)) error {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the watch ended")
			}
			switch e.Type {
			case watch.Added, watch.Modified:
				if ev, ok := e.Object.(*corev1.Event); ok {
					seen(ctx, Warning{Worker: worker, Event: slimEvent(ev)})
				}
			case watch.Error:
				return apierrors.FromObject(e.Object)
			}
		}
	}
}

// stopWarnings ends the watch, if it runs: the credential may no longer.
func (c *Connection) stopWarnings() {
	c.warnings.mu.Lock()
	defer c.warnings.mu.Unlock()
	if c.warnings.cancel != nil {
		c.warnings.cancel()
		c.warnings.cancel = nil
	}
}

// slimEvent keeps of an Event what forwarding reads, each part bounded: the
// Event is anyone's who may create Events in its namespace.
// Names are cut to a name's most: the API server bounds the Event's own,
// not those of the object it is about.
func slimEvent(ev *corev1.Event) *corev1.Event {
	about := &ev.InvolvedObject
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: cachebudget.Cut(ev.Namespace, maxWarningName), Name: cachebudget.Cut(ev.Name, maxWarningName),
			ResourceVersion: cachebudget.Cut(ev.ResourceVersion, maxWarningWord)},
		InvolvedObject: corev1.ObjectReference{Kind: cachebudget.Cut(about.Kind, maxWarningWord), Namespace: cachebudget.Cut(about.Namespace, maxWarningName),
			Name: cachebudget.Cut(about.Name, maxWarningName), UID: types.UID(cachebudget.Cut(string(about.UID), maxWarningWord))},
		Reason: cachebudget.Cut(ev.Reason, maxWarningWord), Message: cachebudget.Cut(ev.Message, maxWarningMessage), Action: cachebudget.Cut(ev.Action, maxWarningWord),
	}
}

// KeepWarningsWatch runs the watch of a worker's Warning Events while its
// credential may list and watch Events and its caches are in sync (so the
// mirrors the Events are about are known), and stops it when the credential
// may no longer.
func (p *Pool) KeepWarningsWatch(ctx context.Context, conn *Connection) {
	state := conn.rights.Load()
	switch {
	case state == nil:
	case !state.mayWatchWarnings:
		conn.stopWarnings()
	case conn.Connected():
		if err := conn.watchWarnings(p.warningSeen); err != nil {
			logf.FromContext(ctx).Error(err, "watching the worker's Warning Events", "worker", conn.name)
		}
	}
}

// warningSeen tells the subscribers of a worker's Warning Event; each may
// wait rather than drop one (the informer queues behind it) until the watch
// ends.
func (p *Pool) warningSeen(ctx context.Context, w Warning) {
	for _, h := range p.handlers() {
		if h.Warning != nil {
			h.Warning(ctx, w)
		}
	}
}

// Bounds of what is kept of a worker's Event: a note holds 1 KiB, and an
// Event's reason and action are at most 128 characters in events.k8s.io;
// a name, 253.
const (
	maxWarningMessage = eventnote.MaxBytes
	maxWarningWord    = 128
	maxWarningName    = 253
)
