package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// busyboxApplets are the commands the busybox image links to busybox: what
// the real-node tests' and the demo's Jobs run.
var busyboxApplets = []string{"sh", "echo", "sleep", "cat", "ls", "true", "false", "env", "date", "hostname", "id", "wc", "head", "tail", "grep", "seq", "printf", "test", "expr", "mkdir", "rm"}

// writeNodeImages writes the two images a real node needs without a
// registry: the pod sandbox's pause (from dir/pause, built from the
// kubernetes module's build/pause/linux/pause.c) and busybox (dir/busybox,
// Debian's static one), named as localcluster expects them.
func writeNodeImages(dir, out string, created time.Time) error {
	pause, err := os.ReadFile(filepath.Join(dir, "pause"))
	if err != nil {
		return err
	}
	busybox, err := os.ReadFile(filepath.Join(dir, "busybox"))
	if err != nil {
		return err
	}
	bb := Image{
		Entries: []Entry{
			{Name: "bin/", Dir: true, Mode: 0o755},
			{Name: "bin/busybox", Mode: 0o755, Data: busybox},
			{Name: "tmp/", Dir: true, Mode: 0o1777},
		},
		Cmd:     []string{"sh"},
		Created: created,
		Labels:  map[string]string{"org.opencontainers.image.title": "busybox", "org.opencontainers.image.description": "Debian's busybox-static, for jobferry's real-node tests"},
	}
	for _, applet := range busyboxApplets {
		bb.Entries = append(bb.Entries, Entry{Name: "bin/" + applet, Link: "busybox"})
	}
	images := map[string]Image{
		localcluster.PauseImage: {
			Entries:    []Entry{{Name: "pause", Mode: 0o755, Data: pause}},
			Entrypoint: []string{"/pause"},
			// What the upstream pause image runs as.
			User:    "65535:65535",
			Created: created,
			Labels:  map[string]string{"org.opencontainers.image.title": "pause", "org.opencontainers.image.description": "kubernetes' pause.c, for jobferry's real-node tests"},
		},
		localcluster.BusyboxImage: bb,
	}
	for ref, im := range images {
		path := filepath.Join(out, localcluster.NodeImageArchive(ref))
		if err := writeArchive(path, ref, im); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		fmt.Printf("images: %s -> %s\n", ref, path)
	}
	return nil
}
