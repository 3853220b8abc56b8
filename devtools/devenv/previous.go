package devenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// PreviousRelease is the release hack/previous-release names: a commit of
// the repository's history and the version it is built as.
type PreviousRelease struct {
	Commit, Version string
}

// ReadPreviousRelease reads hack/previous-release.
func ReadPreviousRelease() (PreviousRelease, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return PreviousRelease{}, err
	}
	path := filepath.Join(root, "hack", "previous-release")
	f, err := os.Open(path)
	if err != nil {
		return PreviousRelease{}, err
	}
	defer f.Close()
	var p PreviousRelease
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		key, value, _ := strings.Cut(strings.TrimSpace(lines.Text()), " ")
		switch key {
		case "commit":
			p.Commit = value
		case "version":
			p.Version = value
		}
	}
	if err := lines.Err(); err != nil {
		return PreviousRelease{}, err
	}
	if p.Commit == "" || p.Version == "" {
		return PreviousRelease{}, fmt.Errorf("%s names no commit or no version", path)
	}
	return p, nil
}

// BuildPreviousRelease builds the previous release from git history, for
// this machine's platform, into _output/previous-release/<version> (kept:
// a second call finds it built): the commit checked out in a worktree of
// its own, its CHANGELOG given an entry for the version (a release needs
// one), and `make release` run there as `make release-e2e` runs it, with
// a bin/ of its own.
func BuildPreviousRelease(ctx context.Context, p PreviousRelease, out io.Writer) (Release, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return Release{}, err
	}
	base := filepath.Join(root, "_output", "previous-release")
	dir := filepath.Join(base, p.Version)
	src := filepath.Join(base, "src")
	run := func(dir string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		output, err := cmd.CombinedOutput()
		fmt.Fprintf(out, "$ %s %s\n%s", name, strings.Join(args, " "), output)
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, output)
		}
		return nil
	}
	// A worktree an interrupted run left behind goes first.
	_ = run(root, "git", "worktree", "remove", "--force", src)
	if err := os.RemoveAll(src); err != nil {
		return Release{}, err
	}
	if err := run(root, "git", "worktree", "prune"); err != nil {
		return Release{}, err
	}
	stamp := filepath.Join(dir, ".commit")
	if built, err := os.ReadFile(stamp); err == nil && string(built) == p.Commit {
		return FindRelease(dir)
	}
	if err := run(root, "git", "merge-base", "--is-ancestor", p.Commit, "HEAD"); err != nil {
		return Release{}, fmt.Errorf("the previous release's commit %s (hack/previous-release) is not in this checkout's history (a shallow clone?): %w", p.Commit, err)
	}
	if err := run(root, "git", "worktree", "add", "--detach", src, p.Commit); err != nil {
		return Release{}, fmt.Errorf("checking out the previous release (hack/previous-release): %w", err)
	}
	defer func() { _ = run(root, "git", "worktree", "remove", "--force", src) }()
	changelog := filepath.Join(src, "CHANGELOG.md")
	log, err := os.ReadFile(changelog)
	if err != nil {
		return Release{}, err
	}
	entry := fmt.Sprintf("## [%s]\n\nThe previous release of the upgrade test (hack/previous-release), commit %s.\n\n", p.Version, p.Commit)
	at := bytes.Index(log, []byte("\n## ["))
	if at < 0 {
		return Release{}, fmt.Errorf("%s at %s has no release entry to put the previous release's before", changelog, p.Commit)
	}
	log = append(append(append([]byte{}, log[:at+1]...), entry...), log[at+1:]...)
	if err := os.WriteFile(changelog, log, 0o644); err != nil {
		return Release{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return Release{}, err
	}
	// Its own bin/: the commit's helm pin, built by the commit's
	// hack/tools, never the tree's binaries (which other tests run).
	if err := run(src, "make", "--no-print-directory", "release", "VERSION="+p.Version, "RELEASE_DIR="+dir, "RELEASE_ALLOW_DIRTY=true",
		"BIN="+filepath.Join(base, "bin"), "IMAGE_PLATFORMS=linux/"+runtime.GOARCH, "PLUGIN_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH); err != nil {
		return Release{}, err
	}
	if err := os.WriteFile(stamp, []byte(p.Commit), 0o644); err != nil {
		return Release{}, err
	}
	return FindRelease(dir)
}
