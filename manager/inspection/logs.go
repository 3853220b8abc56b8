package inspection

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/clock"

	"github.com/jobferry/jobferry/manager/inspection/workerread"
)

func (s *Server) logs(w http.ResponseWriter, r *http.Request, who user.Info) {
	q, err := parseLogQuery(r.URL.Query(), s.Limits.MaxLogBytes)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	job, ok := s.request(w, r, who, logRights)
	if !ok {
		return
	}
	// One stream first (a caller with none left is refused before the
	// worker is read); a followed log of several containers takes more
	// once it knows how many.
	streams, err := s.callers.openStreams(who.GetName())
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer streams.release()
	// A log is streamed for as long as it lasts: the server's read
	// deadline (a GET has no body) must not cut it (net/http cancels the
	// request's context when it passes).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ctx := r.Context()
	targets, resourceVersion, stopped, side, ok := s.logTargets(ctx, w, job, q)
	if !ok {
		return
	}
	out := &logWriter{w: w, limit: q.limitBytes, remaining: q.limitBytes, managerCap: q.limitBytes == s.Limits.MaxLogBytes}
	// However the handler returns, no flush comes after it.
	defer out.end()
	if stopped {
		out.line(fmt.Sprintf("jobferry: only the pods found within what an inspection reads of the worker's lists are read: %v", workerread.ErrReadBudget))
	}
	prefix := len(targets) > 1 || q.allPods
	if !q.follow {
		// One stream at a time.
		for _, t := range targets {
			if out.full() {
				break
			}
			s.stream(ctx, side, t, q, prefix, out, nil)
		}
		out.finish(w)
		return
	}
	if granted := 1 + streams.grow(len(targets)-1); granted < len(targets) {
		out.line(fmt.Sprintf("jobferry: following %d of the %d containers chosen: %s may have %d log streams open at once, and the manager %d",
			granted, len(targets), who.GetName(), s.Limits.StreamsPerCaller, s.Limits.MaxStreams))
		targets = targets[:granted]
	}
	ctx, cancel := context.WithTimeout(ctx, s.Limits.FollowFor)
	defer cancel()
	ends := newPodEnds(s.Clock, targets)
	var watching sync.WaitGroup
	watching.Go(func() { s.watchEnds(ctx, side, resourceVersion, ends, out) })
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			// Its slot back as it ends: the caller's others go on.
			defer streams.releaseOne()
			s.stream(ctx, side, t, q, prefix, out, ends)
		})
	}
	wg.Wait()
	// The watch writes to the answer too: it ends before the answer does.
	cancel()
	watching.Wait()
	out.finish(w)
}

// logTargets reads the mirror and its pods, and picks the containers whose
// logs a request reads (and the pods' list's version, where a watch of them
// starts), or answers why there are none. The reading counts as one of the
// replica's inspections: the pods are held as shown only until the targets
// are picked.
func (s *Server) logTargets(ctx context.Context, w http.ResponseWriter, job *batchv1.Job, q logQuery) (targets []logTarget, resourceVersion string, stopped bool, side mirrorSide, ok bool) {
	end, err := s.callers.beginDescribe()
	if err != nil {
		writeStatus(w, err)
		return nil, "", false, mirrorSide{}, false
	}
	defer end()
	if side, err = s.mirrorSide(ctx, job); err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return nil, "", false, side, false
	}
	if side.mirror == nil {
		writeStatus(w, noLogs(job, side.note))
		return nil, "", false, side, false
	}
	pods, err := side.worker.Pods(ctx, side.mirror, s.Limits.MaxPods)
	if err != nil {
		writeStatus(w, apierrors.NewServiceUnavailable(readRefused(side.placement.worker, "list the mirror's pods", err)))
		return nil, "", false, side, false
	}
	if targets, err = logTargets(pods.Items, q); err != nil {
		writeStatus(w, noLogs(job, err.Error()))
		return nil, "", false, side, false
	}
	return targets, pods.ResourceVersion, pods.Stopped, side, true
}

// noLogs: the Job has no logs to read, and why.
func noLogs(job *batchv1.Job, why string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("Job %s/%s has no logs to read: %s", job.Namespace, job.Name, why)}}
}

// stream copies one container's log to out, line by line, each cut to
// MaxLineBytes; a followed log ends when its pod has ended (ends says so,
// and the worker closes the stream), or with ctx.
func (s *Server) stream(ctx context.Context, side mirrorSide, t logTarget, q logQuery, prefix bool, out *logWriter, ends *podEnds) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A pod that has ended writes no more: its log is read, not followed
	// (a kubelet would end the stream at once; not every server does).
	follow := q.follow && !t.ended
	if follow && ends != nil {
		ends.follow(ctx, t.pod, cancel)
	}
	log, err := side.worker.Log(ctx, t.namespace, t.pod, t.container, follow, out.budget())
	if err != nil {
		out.fail(fmt.Errorf("%s", readRefused(side.placement.worker, "read pod logs", err)))
		return
	}
	defer log.Close()
	err = eachLine(log, s.Limits.MaxLineBytes, func(line string) bool {
		if prefix {
			line = fmt.Sprintf("[pod/%s/%s] %s", t.pod, t.container, line)
		}
		return out.line(line)
	})
	if err != nil && ctx.Err() == nil {
		out.fail(fmt.Errorf("reading the log of pod %s, container %s, on worker %s: %w", t.pod, t.container, side.placement.worker, err))
	}
}

// eachLine hands each line of r to line, without its newline, until line
// says stop; a line longer than max bytes is cut there and marked, and
// the rest of it skipped: what one line holds is bounded, whatever the
// container wrote.
func eachLine(r io.Reader, max int, line func(string) bool) error {
	// Room for a line of max bytes and its newline.
	lines := bufio.NewReaderSize(r, max+1)
	skipping := false
	for {
		b, err := lines.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !skipping && !line(string(b[:max])+fmt.Sprintf(" [jobferry: line cut at %d bytes]", max)) {
				return nil
			}
			skipping = true
			continue
		case len(b) > 0 && !skipping:
			// As bufio.ScanLines: without its newline and a carriage return.
			if !line(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")) {
				return nil
			}
		}
		skipping = false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// podEnds cancels each followed stream once its pod has ended or is gone,
// after podEndGrace for the worker to close it first, as one watch of the
// mirror's pods tells (watchEnds).
type podEnds struct {
	clock clock.Clock
	// followed are the pods of the request's streams: no other pod the
	// watch sees is remembered.
	followed map[string]bool
	mu       sync.Mutex
	cancels  map[string][]context.CancelFunc
	ended    map[string]bool
}

func newPodEnds(clk clock.Clock, targets []logTarget) *podEnds {
	e := &podEnds{clock: clk, followed: map[string]bool{}, cancels: map[string][]context.CancelFunc{}, ended: map[string]bool{}}
	for _, t := range targets {
		e.followed[t.pod] = true
	}
	return e
}

// watchEnds watches the mirror's pods from the list's resourceVersion
// until ctx ends, telling ends of each that ends: one watch for all the
// request's streams, where each would otherwise poll its pod. A watch that
// ends is made again, from the pods as they are then; one the worker
// refuses is said on the log, whose streams then end with their pods'
// logs or the manager's limit on a followed log.
func (s *Server) watchEnds(ctx context.Context, side mirrorSide, resourceVersion string, ends *podEnds, out *logWriter) {
	for ctx.Err() == nil {
		w, err := side.worker.WatchPods(ctx, side.mirror, resourceVersion)
		if err == nil {
			for ev := range w.ResultChan() {
				switch pod, ok := ev.Object.(*corev1.Pod); {
				case ok && metav1.IsControlledBy(pod, side.mirror) && (ev.Type == watch.Deleted || podEnded(pod)):
					ends.end(ctx, pod.Name)
				case ev.Type == watch.Error:
					err = apierrors.FromObject(ev.Object)
				}
			}
			w.Stop()
		}
		if apierrors.IsForbidden(err) {
			out.line("jobferry: " + readRefused(side.placement.worker, "watch the mirror's pods, to end each followed log as its pod ends", err))
			return
		}
		resourceVersion = ""
		select {
		case <-ctx.Done():
		case <-s.Clock.After(rewatch):
		}
	}
}

// logWriter writes whole lines to the response, flushing each, until the
// byte limit; the first line's write sends the 200. A failure before any
// line is the response's status; after, a last line saying it.
type logWriter struct {
	mu         sync.Mutex
	w          http.ResponseWriter
	limit      int64
	remaining  int64
	managerCap bool
	wrote, cut bool
	// done: the answer is finished; nothing more is written.
	done     bool
	failures []error
	// flushing: a flush of the lines written is due within flushEvery;
	// flushErr is why the last one failed (the caller went away).
	flushing bool
	flushErr error
}

// follow has cancel called once pod has ended.
func (e *podEnds) follow(ctx context.Context, pod string, cancel context.CancelFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended[pod] {
		go e.cancelAfterGrace(ctx, []context.CancelFunc{cancel})
		return
	}
	e.cancels[pod] = append(e.cancels[pod], cancel)
}

// end: pod has ended.
func (e *podEnds) end(ctx context.Context, pod string) {
	if !e.followed[pod] {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended[pod] {
		return
	}
	e.ended[pod] = true
	go e.cancelAfterGrace(ctx, e.cancels[pod])
	delete(e.cancels, pod)
}

func (e *podEnds) cancelAfterGrace(ctx context.Context, cancels []context.CancelFunc) {
	select {
	case <-ctx.Done():
	case <-e.clock.After(podEndGrace):
		for _, cancel := range cancels {
			cancel()
		}
	}
}

// budget is what a stream may still bring (the worker's limitBytes).
func (l *logWriter) budget() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.remaining, 1)
}

// full: the byte limit is reached.
func (l *logWriter) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining <= 0
}

// line writes one line; false once the limit is reached.
func (l *logWriter) line(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	if l.remaining <= 0 {
		l.cut = true
		return false
	}
	b := []byte(s + "\n")
	if int64(len(b)) > l.remaining {
		b, l.cut = b[:l.remaining], true
	}
	if l.flushErr != nil {
		return false
	}
	l.start()
	if !l.flushing {
		// The first line of a flush window. A caller that stops reading
		// loses its log, rather than holding its streams: the window's
		// writes and its flush have writeTimeout, and flush lifts the
		// deadline, as between windows a followed log may be quiet for
		// long (an HTTP/2 stream is reset when a deadline passes, write or
		// not). Once a window, not once a line: each deadline set is a
		// message to the connection's serving goroutine.
		_ = http.NewResponseController(l.w).SetWriteDeadline(time.Now().Add(writeTimeout))
		l.flushing = true
		time.AfterFunc(flushEvery, l.flush)
	}
	n, err := l.w.Write(b)
	l.remaining -= int64(n)
	return err == nil && !l.cut
}

// end marks the answer finished, as finish does, for a handler that
// returns without it.
func (l *logWriter) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
}

// flush sends the lines written since the last flush, unless the answer
// is finished (net/http sends the rest then).
func (l *logWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushing = false
	if l.done {
		return
	}
	// Within the deadline the window's first line set.
	rc := http.NewResponseController(l.w)
	if err := rc.Flush(); err != nil {
		l.flushErr = err
	}
	_ = rc.SetWriteDeadline(time.Time{})
}

func (l *logWriter) start() {
	if !l.wrote {
		l.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		l.w.WriteHeader(http.StatusOK)
		l.wrote = true
	}
}

func (l *logWriter) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, err)
}

// finish ends the response: the failures as its status when nothing was
// written, else as last lines, and the manager's cut when it cut.
func (l *logWriter) finish(w http.ResponseWriter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	if !l.wrote && len(l.failures) > 0 {
		writeStatus(w, apierrors.NewServiceUnavailable(errors.Join(l.failures...).Error()))
		return
	}
	l.start()
	for _, err := range l.failures {
		fmt.Fprintf(w, "jobferry: %v\n", err)
	}
	if l.cut && l.managerCap {
		fmt.Fprintf(w, "\njobferry: the log was cut at the manager's limit of %d bytes a request\n", l.limit)
	}
}
