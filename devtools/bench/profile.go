package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profileSeconds is how much of an arm the manager's CPU profile
// covers, from its first create: the burst of placements.
const profileSeconds = 30

// profile starts CPU profiles of the manager and of its cluster's API
// server (they share a CPU: the dispatch ceiling is what both spend per
// Job) and returns a function that waits for them and saves them into the
// output directory, with the hottest functions as `go tool pprof -top`
// prints them.
func (b *bencher) profile(ctx context.Context, tag string) func() (manager, apiServer savedProfile, err error) {
	type result struct {
		data []byte
		err  error
	}
	manager := b.profileManager(ctx, tag)
	apiServerDone := make(chan result, 1)
	go func() {
		data, err := b.manager.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(profileSeconds)).Timeout((profileSeconds + 30) * time.Second).DoRaw(ctx)
		if err != nil {
			err = fmt.Errorf("profiling the manager cluster's API server: %w", err)
		}
		apiServerDone <- result{data: data, err: err}
	}()
	return func() (savedProfile, savedProfile, error) {
		m, mErr := manager()
		a := <-apiServerDone
		if err := errors.Join(mErr, a.err); err != nil {
			return savedProfile{}, savedProfile{}, err
		}
		apiServer, err := b.savePprof(ctx, b.apiServerBinary, "manager-apiserver-cpu-"+tag+".pprof", a.data)
		return m, apiServer, err
	}
}

// profileManager starts a CPU profile of the manager alone, of
// profileSeconds from now, and returns a function that waits for it and
// saves it as manager-cpu-<tag>.pprof.
func (b *bencher) profileManager(ctx context.Context, tag string) func() (savedProfile, error) {
	done := make(chan savedProfile, 1)
	failed := make(chan error, 1)
	go func() {
		data, err := fetchPprof(ctx, b.pprofURL, "profile?seconds="+strconv.Itoa(profileSeconds), (profileSeconds+30)*time.Second)
		if err != nil {
			failed <- err
			return
		}
		saved, err := b.savePprof(ctx, b.managerBinary, "manager-cpu-"+tag+".pprof", data)
		if err != nil {
			failed <- err
			return
		}
		done <- saved
	}()
	return func() (savedProfile, error) {
		select {
		case saved := <-done:
			return saved, nil
		case err := <-failed:
			return savedProfile{}, err
		}
	}
}

// savedProfile is a profile in the output directory and what `go tool
// pprof -top` prints of it.
type savedProfile struct{ path, top string }

// heapProfile saves the manager's live heap (after a collection) into the
// output directory, with the functions that allocated most of it: taken
// when every Job of the arm is tracked, it shows what the memory per Job is.
func (b *bencher) heapProfile(ctx context.Context, tag string) (path, top string, err error) {
	data, err := fetchPprof(ctx, b.pprofURL, "heap?gc=1", 30*time.Second)
	if err != nil {
		return "", "", err
	}
	saved, err := b.savePprof(ctx, b.managerBinary, "manager-heap-"+tag+".pprof", data, "-sample_index=inuse_space")
	return saved.path, saved.top, err
}

// liveHeapBytes is the manager's heap in use right after a garbage
// collection (runtime.MemStats HeapAlloc, as /debug/pprof/heap?debug=1
// prints it): what its objects take, without the collector's headroom.
func (b *bencher) liveHeapBytes(ctx context.Context) (int64, error) {
	return b.liveHeapBytesAt(ctx, b.pprofURL)
}

// liveHeapBytesAt is liveHeapBytes of the replica whose profiler is at
// pprofURL.
func (b *bencher) liveHeapBytesAt(ctx context.Context, pprofURL string) (int64, error) {
	data, err := fetchPprof(ctx, pprofURL, "heap?gc=1&debug=1", 30*time.Second)
	if err != nil {
		return 0, err
	}
	return heapAlloc(data)
}

// heapAlloc reads "# HeapAlloc = N" from a debug=1 heap profile.
func heapAlloc(profile []byte) (int64, error) {
	for _, line := range strings.Split(string(profile), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the manager's heap profile")
}

// fetchPprof gets one of a manager replica's /debug/pprof/ endpoints.
func fetchPprof(ctx context.Context, pprofURL, endpoint string, timeout time.Duration) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pprofURL+"/debug/pprof/"+endpoint, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("profiling the manager (%s): %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("profiling the manager (%s): %s: %s", endpoint, resp.Status, data)
	}
	return data, err
}

// savePprof writes a profile of binary into the output directory.
func (b *bencher) savePprof(ctx context.Context, binary, name string, data []byte, pprofArgs ...string) (savedProfile, error) {
	if err := os.MkdirAll(b.cfg.Out, 0o755); err != nil {
		return savedProfile{}, err
	}
	path := filepath.Join(b.cfg.Out, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return savedProfile{}, err
	}
	args := append(append([]string{"tool", "pprof", "-top", "-nodecount=25"}, pprofArgs...), binary, path)
	top, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return savedProfile{}, fmt.Errorf("go %v: %w\n%s", args, err, top)
	}
	return savedProfile{path: path, top: string(top)}, nil
}
