// Package buildinfo serves jobferry_build_info, which says which build of a
// jobferry binary runs, from what the Go toolchain recorded in it.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the main module's version ("(devel)" for a build from a
	// checkout).
	Version string
	// Revision is the VCS commit it was built from, with "-dirty" when the
	// tree had changes; "unknown" when none was recorded.
	Revision  string
	GoVersion string
}

// releaseVersion is the version a release build names (make release sets
// it with -ldflags -X): the toolchain knows a checkout's build only as
// "(devel)" or a pseudo-version.
var releaseVersion string

// Read returns the running binary's Info.
func Read() Info {
	info := Info{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if releaseVersion != "" {
			info.Version = releaseVersion
		}
		return info
	}
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.Revision != "unknown" {
		info.Revision += "-dirty"
	}
	if releaseVersion != "" {
		info.Version = releaseVersion
	}
	return info
}

// Collector is jobferry_build_info{component,version,revision,goversion} = 1
// for the binary named component (manager, worker).
func Collector(component string) prometheus.Collector {
	info := Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "jobferry_build_info",
		Help:        "1, labelled with the component (manager, worker), version, VCS revision and Go version of the running binary.",
		ConstLabels: prometheus.Labels{"component": component, "version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}
