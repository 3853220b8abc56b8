// Command release assembles a jobferry release in one directory, from what
// the Makefile's release target built before it (the images, by
// hack/images; the plugin binaries, one directory per platform):
//
//	go run ./hack/release --check --version 0.2.0 --image-registry ghcr.io/jobferry
//	go run ./hack/release --version 0.2.0 --dir _output/release/0.2.0 \
//	    --plugin-bin-dir DIR --helm bin/helm --created EPOCH
//
// --check, run first, refuses what would make a wrong release before
// anything is built: a version that is not SemVer or has no CHANGELOG.md
// entry, images named under a registry the charts do not default to, a
// tree with uncommitted changes (unless --allow-dirty). Then it adds to
// --dir:
//   - kubectl-jobferry_<version>_<os>_<arch>.tar.gz (.zip for windows): the
//     plugin, one archive per platform of --plugin-bin-dir;
//   - jobferry.yaml: the krew plugin manifest of those archives, their
//     URIs under --download-url;
//   - jobferry-manager-<version>.tgz, jobferry-worker-<version>.tgz: the
//     charts, packaged by helm with the version as chart version and
//     appVersion (their default image tag);
//   - RELEASE_NOTES.md: the version's entry of CHANGELOG.md (there must be
//     one);
//   - SHA256SUMS: every file of the release (sha256sum -c reads it).
//
// Archives are reproducible: fixed times (--created), owners and order; the
// charts helm packaged are rewritten so (helm stamps the time of packaging).
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// PluginName is the plugin's name in krew (kubectl jobferry).
const PluginName = "jobferry"

// PluginBinary is the plugin's executable, without the .exe of windows.
const PluginBinary = "kubectl-jobferry"

// Charts are the charts a release packages, under --charts.
var Charts = []string{"jobferry-manager", "jobferry-worker"}

// SumsFile lists the sha256 of every other file of the release.
const SumsFile = "SHA256SUMS"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "publish" {
		if err := publishMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		return
	}
	var (
		version     = flag.String("version", "", "the release's version, SemVer without a leading v (0.2.0)")
		dir         = flag.String("dir", "", "the release directory (the images already in it)")
		pluginBins  = flag.String("plugin-bin-dir", "", "directory holding <os>_<arch>/kubectl-jobferry[.exe] per platform")
		helm        = flag.String("helm", "bin/helm", "the helm binary that packages the charts")
		charts      = flag.String("charts", "charts", "directory holding the charts")
		changelog   = flag.String("changelog", "CHANGELOG.md", "the changelog holding the version's entry")
		downloadURL = flag.String("download-url", "https://github.com/jobferry/jobferry/releases/download/v{version}", "where the plugin archives are published ({version} is replaced)")
		created     = flag.Int64("created", 0, "time of every archived file, Unix seconds (the commit's)")
		checkOnly   = flag.Bool("check", false, "only check that a release of --version can be made, building nothing")
		registry    = flag.String("image-registry", "", "with --check: the registry the images are named under, which must be the charts' default")
		allowDirty  = flag.Bool("allow-dirty", false, "with --check: allow uncommitted changes (a release for trying, not for publishing)")
	)
	flag.Parse()
	if *checkOnly {
		if err := check(*version, *charts, *changelog, *registry, *allowDirty); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		return
	}
	if *version == "" || *dir == "" || *pluginBins == "" {
		fmt.Fprintln(os.Stderr, "release: --version, --dir and --plugin-bin-dir are required")
		os.Exit(2)
	}
	if err := run(*version, *dir, *pluginBins, *helm, *charts, *changelog, *downloadURL, time.Unix(*created, 0).UTC()); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// check refuses, before anything is built, what would make a wrong release.
func check(version, charts, changelog, registry string, allowDirty bool) error {
	if err := ValidVersion(version); err != nil {
		return err
	}
	log, err := os.ReadFile(changelog)
	if err != nil {
		return err
	}
	if _, err := NotesOf(log, version); err != nil {
		return fmt.Errorf("%s: %w", changelog, err)
	}
	for _, chart := range Charts {
		data, err := os.ReadFile(filepath.Join(charts, chart, "values.yaml"))
		if err != nil {
			return err
		}
		if err := ImageUnder(data, chart, registry); err != nil {
			return err
		}
	}
	if allowDirty {
		return nil
	}
	out, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil {
		return fmt.Errorf("git status: %w", err)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("the tree has uncommitted changes, which the release's revision would not name:\n%s(RELEASE_ALLOW_DIRTY=true makes one for trying)", out)
	}
	return nil
}

// ImageUnder refuses a chart whose default image (values.yaml's
// image.repository) is not registry's image of the chart's name: its
// package would name images the release does not make.
func ImageUnder(values []byte, chart, registry string) error {
	var v struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		return fmt.Errorf("%s/values.yaml: %w", chart, err)
	}
	if want := strings.TrimSuffix(registry, "/") + "/" + chart; v.Image.Repository != want {
		return fmt.Errorf("the images would be named %s, but chart %s defaults to image %s: a release names its images as its charts do (set IMAGE_REGISTRY to match, or change the charts' image.repository)",
			want, chart, v.Image.Repository)
	}
	return nil
}

func run(version, dir, pluginBins, helm, charts, changelog, downloadURL string, created time.Time) error {
	if err := ValidVersion(version); err != nil {
		return err
	}
	log, err := os.ReadFile(changelog)
	if err != nil {
		return err
	}
	notes, err := NotesOf(log, version)
	if err != nil {
		return fmt.Errorf("%s: %w", changelog, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "RELEASE_NOTES.md"), []byte(notes), 0o644); err != nil {
		return err
	}
	archives, err := pluginArchives(pluginBins, dir, version, created)
	if err != nil {
		return err
	}
	manifest, err := KrewManifest(version, strings.ReplaceAll(downloadURL, "{version}", version), archives)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, PluginName+".yaml"), manifest, 0o644); err != nil {
		return err
	}
	for _, chart := range Charts {
		// helm sets the version and appVersion in the package it writes;
		// the chart in the tree is left as it is.
		cmd := exec.Command(helm, "package", filepath.Join(charts, chart), "--version", version, "--app-version", version, "--destination", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("helm package %s: %w\n%s", chart, err, out)
		}
		if err := Restamp(filepath.Join(dir, chart+"-"+version+".tgz"), created); err != nil {
			return fmt.Errorf("chart %s: %w", chart, err)
		}
	}
	sums, err := Sums(dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), sums, 0o644); err != nil {
		return err
	}
	fmt.Printf("release %s in %s:\n%s", version, dir, sums)
	return nil
}

// Restamp rewrites a gzipped tar with every time set to created and no
// owner names, its files and their order as they were: helm stamps a
// chart's files with the time it packaged them.
func Restamp(path string, created time.Time) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	gr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	gw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return err
	}
	gw.ModTime = created
	tr, tw := tar.NewReader(gr), tar.NewWriter(gw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = created, time.Time{}, time.Time{}
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		h.PAXRecords = nil
		h.Format = tar.FormatUnknown
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// semVer is SemVer 2.0's form of a version, without build metadata.
var semVer = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// ValidVersion refuses a version that is not SemVer (helm's chart versions
// must be; krew's are the same with a v).
func ValidVersion(version string) error {
	if !semVer.MatchString(version) {
		return fmt.Errorf("version %q is not SemVer without a leading v (0.2.0, 1.0.0-rc.1)", version)
	}
	return nil
}

// NotesOf returns the changelog's entry of version: the text under its
// heading (`## [0.2.0]`, `## [0.2.0](compare-link)` or `## 0.2.0`, anything
// after it on the line, such as a date), up to the next second-level
// heading outside a fenced code block; link reference definitions
// (`[0.2.0]: https://…`, which Keep a Changelog puts at the end) are left
// out.
func NotesOf(changelog []byte, version string) (string, error) {
	var entry []string
	in, fenced := false, false
	for _, line := range strings.Split(string(changelog), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if strings.HasPrefix(line, "## ") && !fenced {
			if in {
				break
			}
			heading := strings.TrimSpace(strings.TrimPrefix(line, "## "))
			in = heading == version || strings.HasPrefix(heading, version+" ") || strings.HasPrefix(heading, "["+version+"]")
			continue
		}
		if in && !linkDefinition.MatchString(line) {
			entry = append(entry, line)
		}
	}
	notes := strings.TrimSpace(strings.Join(entry, "\n"))
	if notes == "" {
		return "", fmt.Errorf("no entry for version %s (a heading `## [%s]` with the release's notes under it)", version, version)
	}
	return notes + "\n", nil
}

// linkDefinition is a Markdown link reference definition.
var linkDefinition = regexp.MustCompile(`^\[[^\]]+\]: \S`)

// Archive is one platform's plugin archive, as the krew manifest names it.
type Archive struct {
	OS, Arch, Name, SHA256 string
}

// Bin is the plugin's executable on goos.
func Bin(goos string) string {
	if goos == "windows" {
		return PluginBinary + ".exe"
	}
	return PluginBinary
}

// pluginArchives writes an archive of every platform's plugin binary found
// under binDir (<os>_<arch>/) into dir.
func pluginArchives(binDir, dir, version string, created time.Time) ([]Archive, error) {
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return nil, err
	}
	var archives []Archive
	for _, e := range entries {
		goos, arch, ok := strings.Cut(e.Name(), "_")
		if !e.IsDir() || !ok {
			continue
		}
		binary, err := os.ReadFile(filepath.Join(binDir, e.Name(), Bin(goos)))
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := WriteArchive(&buf, goos, binary, created); err != nil {
			return nil, err
		}
		a := Archive{OS: goos, Arch: arch, Name: ArchiveName(version, goos, arch)}
		sum := sha256.Sum256(buf.Bytes())
		a.SHA256 = hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(dir, a.Name), buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		archives = append(archives, a)
	}
	if len(archives) == 0 {
		return nil, fmt.Errorf("no plugin binaries under %s (<os>_<arch>/%s)", binDir, PluginBinary)
	}
	return archives, nil
}

// ArchiveName is the name of a platform's plugin archive.
func ArchiveName(version, goos, arch string) string {
	ext := ".tar.gz"
	if goos == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("%s_%s_%s_%s%s", PluginBinary, version, goos, arch, ext)
}

// WriteArchive writes the plugin's archive for goos holding binary: a zip
// for windows, a gzipped tar otherwise, with every time set to created.
func WriteArchive(w io.Writer, goos string, binary []byte, created time.Time) error {
	name := Bin(goos)
	if goos == "windows" {
		zw := zip.NewWriter(w)
		// A zip's times start in 1980 (MS-DOS's).
		if dos := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC); created.Before(dos) {
			created = dos
		}
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: created}
		h.SetMode(0o755)
		f, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := f.Write(binary); err != nil {
			return err
		}
		return zw.Close()
	}
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	gz.ModTime = created
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(binary)), ModTime: created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(binary); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// krewPlugin is the part of krew's Plugin manifest
// (krew.googlecontainertools.github.com/v1alpha2) a release fills.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
}

// KrewManifest is the krew plugin manifest of the archives, published
// under downloadURL.
func KrewManifest(version, downloadURL string, archives []Archive) ([]byte, error) {
	var p krewPlugin
	p.APIVersion, p.Kind = "krew.googlecontainertools.github.com/v1alpha2", "Plugin"
	p.Metadata.Name = PluginName
	p.Spec.Version = "v" + version
	p.Spec.Homepage = "https://github.com/jobferry/jobferry"
	p.Spec.ShortDescription = "Join clusters, inspect Jobs jobferry dispatches"
	p.Spec.Description = "The kubectl plugin of jobferry, a multi-cluster dispatcher of Kubernetes Jobs: join and\n" +
		"cordon worker clusters, show the manager's status, and get, describe and follow the logs of\n" +
		"Jobs running on workers, with the user's own rights.\n"
	archives = slices.Clone(archives)
	slices.SortFunc(archives, func(a, b Archive) int { return strings.Compare(a.OS+"/"+a.Arch, b.OS+"/"+b.Arch) })
	for _, a := range archives {
		if len(a.SHA256) != 64 || strings.ToLower(a.SHA256) != a.SHA256 {
			return nil, fmt.Errorf("archive %s: sha256 %q is not 64 lowercase hex digits", a.Name, a.SHA256)
		}
		var platform krewPlatform
		platform.Selector.MatchLabels = map[string]string{"os": a.OS, "arch": a.Arch}
		platform.URI = strings.TrimSuffix(downloadURL, "/") + "/" + a.Name
		platform.SHA256 = a.SHA256
		platform.Bin = Bin(a.OS)
		p.Spec.Platforms = append(p.Spec.Platforms, platform)
	}
	return yaml.Marshal(p)
}

// Sums lists the sha256 of every regular file under dir but SumsFile, by
// path, as sha256sum writes them.
func Sums(dir string) ([]byte, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel == SumsFile {
			return nil
		}
		if !d.Type().IsRegular() {
			return errors.New(rel + " is not a regular file")
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+filepath.ToSlash(rel)+"\n")
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return []byte(strings.Join(lines, "")), nil
}
