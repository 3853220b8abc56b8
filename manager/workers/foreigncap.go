package workers

import (
	"context"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// MaxForeignJobsPerNamespace is how many foreign Jobs (foreignCap.foreign)
// with this installation's origin label a worker's mirror cache keeps in
// one namespace. Every mirror this manager makes says it did, with an
// origin UID, so none of them is ever counted or left out while it is not
// being deleted. What the manager reads of the others: that another
// installation shares the origin (one is enough), and a Job put in the
// place of one of its mirrors (one not cached is found when the mirror is
// created again: the create is refused as the name is taken, and that Job
// is read). Anyone who may create Jobs in a worker namespace can make such
// Jobs, each costing the manager up to cachebudget.Mirror, and on every
// replica. Those that claim to be this manager's without being its mirrors
// are the orphan collector's to delete; one a finalizer keeps is foreign
// once it is being deleted.
const MaxForeignJobsPerNamespace = 64

// foreignCap keeps a mirror cache within MaxForeignJobsPerNamespace: it
// stands between the informer and the worker's API server, and passes a
// foreign Job (foreign) of a namespace only while fewer than the most of
// that namespace's have passed and are still there. The rest never reach
// the informer's store; each is told to dropped. A Job changed from
// passed to foreign over the cap is passed as deleted, so the cache holds
// no stale copy of it.
type foreignCap struct {
	manager string
	max     int
	dropped func(job types.NamespacedName)

	mu sync.Mutex
	// admitted are the foreign Jobs passed, by namespace and name.
	admitted map[string]map[string]struct{}
}

func newForeignCap(manager string, max int, dropped func(types.NamespacedName)) *foreignCap {
	return &foreignCap{manager: manager, max: max, dropped: dropped, admitted: map[string]map[string]struct{}{}}
}

// foreign: the Job does not say this manager made it (a
// jobferry.dev/manager-id of another installation, or none), names no
// manager Job (no origin UID), or is being deleted. With no manager ID (a
// manager that labels nothing) no Job is foreign.
func (f *foreignCap) foreign(job *batchv1.Job) bool {
	return f.manager != "" && (job.Labels[v1alpha1.ManagerIDLabel] != f.manager || job.Labels[v1alpha1.OriginUIDLabel] == "" || job.DeletionTimestamp != nil)
}

// listWatch is lw with the cap applied to what its lists and watches give.
func (f *foreignCap) listWatch(lw *toolscache.ListWatch) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := lw.ListWithContext(ctx, o)
			if err != nil {
				return obj, err
			}
			list, ok := obj.(*batchv1.JobList)
			if !ok {
				return obj, nil
			}
			f.listed(o.Continue == "", list)
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.WatchWithContext(ctx, o)
			if err != nil {
				return w, err
			}
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				// A list streamed as a watch: what it gives replaces the
				// store.
				f.reset()
			}
			return newFilteredWatch(w, f.event), nil
		},
	}
}

// reset forgets what passed: a list (its first page) replaces the store.
func (f *foreignCap) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.admitted)
}

// listed keeps of a list's page what the cap lets pass; first: the list's
// first page, which starts what replaces the store.
func (f *foreignCap) listed(first bool, list *batchv1.JobList) {
	if first {
		f.reset()
	}
	kept := list.Items[:0]
	for i := range list.Items {
		if f.pass(&list.Items[i]) {
			kept = append(kept, list.Items[i])
		}
	}
	clear(list.Items[len(kept):])
	list.Items = kept
}

// event is the watch event as the cap lets it pass, if it does.
func (f *foreignCap) event(e watch.Event) (watch.Event, bool) {
	job, ok := e.Object.(*batchv1.Job)
	if !ok {
		return e, true
	}
	switch e.Type {
	case watch.Deleted:
		f.forget(job)
		return e, true
	case watch.Added:
		return e, f.pass(job)
	case watch.Modified:
		if f.pass(job) {
			return e, true
		}
		// It may have passed before, as this manager's.
		return watch.Event{Type: watch.Deleted, Object: job}, true
	}
	return e, true
}

// pass says whether the cache may hold job, and counts it if it is foreign.
func (f *foreignCap) pass(job *batchv1.Job) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := f.admitted[job.Namespace]
	_, admitted := names[job.Name]
	switch {
	case !f.foreign(job):
		if admitted {
			f.remove(job.Namespace, job.Name)
		}
		return true
	case admitted:
		return true
	case len(names) < f.max:
		if names == nil {
			names = map[string]struct{}{}
			f.admitted[job.Namespace] = names
		}
		names[job.Name] = struct{}{}
		return true
	}
	if f.dropped != nil {
		f.dropped(types.NamespacedName{Namespace: job.Namespace, Name: job.Name})
	}
	return false
}

// forget frees the place of a deleted Job, if it had one.
func (f *foreignCap) forget(job *batchv1.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remove(job.Namespace, job.Name)
}

func (f *foreignCap) remove(ns, name string) {
	names := f.admitted[ns]
	delete(names, name)
	if len(names) == 0 {
		delete(f.admitted, ns)
	}
}

// filteredWatch is watch.Filter that also ends when it is stopped while an
// event waits for its reader (watch.Filter's goroutine would wait forever,
// holding it: the informer stops reading when its connection stops).
type filteredWatch struct {
	incoming watch.Interface
	result   chan watch.Event
	stop     chan struct{}
	once     sync.Once
}

func newFilteredWatch(w watch.Interface, f func(watch.Event) (watch.Event, bool)) watch.Interface {
	fw := &filteredWatch{incoming: w, result: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(fw.result)
		for e := range w.ResultChan() {
			out, keep := f(e)
			if !keep {
				continue
			}
			select {
			case fw.result <- out:
			case <-fw.stop:
				return
			}
		}
	}()
	return fw
}

func (fw *filteredWatch) ResultChan() <-chan watch.Event { return fw.result }

func (fw *filteredWatch) Stop() {
	fw.once.Do(func() { close(fw.stop) })
	fw.incoming.Stop()
}
