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
	"time"
)

// profileSeconds is how much of the jobferry arm the manager's CPU profile
// covers, from its first create: the burst of placements.
const profileSeconds = 30

// profile starts a CPU profile of the manager and returns a function that
// waits for it and saves it into the output directory, with the hottest
// functions as `go tool pprof -top` prints them.
func (b *bencher) profile(ctx context.Context, n int) func() (path, top string, err error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		url := b.pprofURL + "/debug/pprof/profile?seconds=" + strconv.Itoa(profileSeconds)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			done <- result{err: err}
			return
		}
		resp, err := (&http.Client{Timeout: (profileSeconds + 30) * time.Second}).Do(req)
		if err != nil {
			done <- result{err: fmt.Errorf("profiling the manager: %w", err)}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("profiling the manager: %s: %s", resp.Status, data)
		}
		done <- result{data: data, err: err}
	}()
	return func() (string, string, error) {
		r := <-done
		if r.err != nil {
			return "", "", r.err
		}
		if err := os.MkdirAll(b.cfg.Out, 0o755); err != nil {
			return "", "", err
		}
		path := filepath.Join(b.cfg.Out, fmt.Sprintf("manager-cpu-%d.pprof", n))
		if err := os.WriteFile(path, r.data, 0o644); err != nil {
			return "", "", err
		}
		top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", b.managerBinary, path).CombinedOutput()
		if err != nil {
			return "", "", fmt.Errorf("go tool pprof -top %s: %w\n%s", path, err, top)
		}
		return path, string(top), nil
	}
}
