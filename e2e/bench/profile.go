package bench

import (
	"context"
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

// profile starts a CPU profile of the manager and returns a function that
// waits for it and saves it into the output directory, with the hottest
// functions as `go tool pprof -top` prints them.
func (b *bencher) profile(ctx context.Context, tag string) func() (path, top string, err error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := b.fetchPprof(ctx, "profile?seconds="+strconv.Itoa(profileSeconds), (profileSeconds+30)*time.Second)
		done <- result{data: data, err: err}
	}()
	return func() (string, string, error) {
		r := <-done
		if r.err != nil {
			return "", "", r.err
		}
		return b.savePprof(ctx, "manager-cpu-"+tag+".pprof", r.data)
	}
}

// heapProfile saves the manager's live heap (after a collection) into the
// output directory, with the functions that allocated most of it: taken
// when every Job of the arm is tracked, it shows what the memory per Job is.
func (b *bencher) heapProfile(ctx context.Context, tag string) (path, top string, err error) {
	data, err := b.fetchPprof(ctx, "heap?gc=1", 30*time.Second)
	if err != nil {
		return "", "", err
	}
	return b.savePprof(ctx, "manager-heap-"+tag+".pprof", data, "-sample_index=inuse_space")
}

// liveHeapBytes is the manager's heap in use right after a garbage
// collection (runtime.MemStats HeapAlloc, as /debug/pprof/heap?debug=1
// prints it): what its objects take, without the collector's headroom.
func (b *bencher) liveHeapBytes(ctx context.Context) (int64, error) {
	data, err := b.fetchPprof(ctx, "heap?gc=1&debug=1", 30*time.Second)
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

// fetchPprof gets one of the manager's /debug/pprof/ endpoints.
func (b *bencher) fetchPprof(ctx context.Context, endpoint string, timeout time.Duration) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.pprofURL+"/debug/pprof/"+endpoint, nil)
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

// savePprof writes a profile into the output directory and returns its path
// and what `go tool pprof -top` prints of it.
func (b *bencher) savePprof(ctx context.Context, name string, data []byte, pprofArgs ...string) (string, string, error) {
	if err := os.MkdirAll(b.cfg.Out, 0o755); err != nil {
		return "", "", err
	}
	path := filepath.Join(b.cfg.Out, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", "", err
	}
	args := append(append([]string{"tool", "pprof", "-top", "-nodecount=25"}, pprofArgs...), b.managerBinary, path)
	top, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("go %v: %w\n%s", args, err, top)
	}
	return path, string(top), nil
}
