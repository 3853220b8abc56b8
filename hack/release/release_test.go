package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestNotesOf(t *testing.T) {
	changelog := []byte(`# Changelog

## [Unreleased]

- not yet

## [0.2.0] - 2026-11-29

- the first

### Fixed

- a fix

## [0.1.0]

- older
`)
	notes, err := NotesOf(changelog, "0.2.0")
	if err != nil || notes != "- the first\n\n### Fixed\n\n- a fix\n" {
		t.Errorf("notes of 0.2.0: %q, %v", notes, err)
	}
	if notes, err := NotesOf(changelog, "0.1.0"); err != nil || notes != "- older\n" {
		t.Errorf("notes of 0.1.0: %q, %v", notes, err)
	}
	for _, missing := range []string{"0.3.0", "0.2", "Unreleased-"} {
		if _, err := NotesOf(changelog, missing); err == nil || !strings.Contains(err.Error(), "no entry for version "+missing) {
			t.Errorf("notes of %s: %v, want no entry", missing, err)
		}
	}
	if _, err := NotesOf([]byte("## [0.4.0]\n\n## [0.3.0]\n- x\n"), "0.4.0"); err == nil {
		t.Error("an empty entry was taken for notes")
	}
	// release-please's headings, CRLF line ends, a heading in a code block,
	// link definitions at the end.
	other := []byte("## [0.3.0](https://example.com/compare/v0.2.0...v0.3.0) (2026-12-01)\r\n\r\n- x\r\n\r\n```\r\n## not a heading\r\n```\r\n\r\n## [0.2.0]\r\n- y\r\n\r\n[0.3.0]: https://example.com/v0.3.0\r\n")
	if notes, err := NotesOf(other, "0.3.0"); err != nil || notes != "- x\n\n```\n## not a heading\n```\n" {
		t.Errorf("notes of 0.3.0: %q, %v", notes, err)
	}
	if notes, err := NotesOf(other, "0.2.0"); err != nil || notes != "- y\n" {
		t.Errorf("notes of 0.2.0: %q, %v", notes, err)
	}
}

func TestImageUnder(t *testing.T) {
	values := []byte("image:\n  repository: ghcr.io/jobferry/jobferry-manager\n  tag: \"\"\n")
	if err := ImageUnder(values, "jobferry-manager", "ghcr.io/jobferry/"); err != nil {
		t.Error(err)
	}
	err := ImageUnder(values, "jobferry-manager", "registry.example:5000/jobferry")
	if err == nil || !strings.Contains(err.Error(), "the images would be named registry.example:5000/jobferry/jobferry-manager, but chart jobferry-manager defaults to image ghcr.io/jobferry/jobferry-manager") {
		t.Errorf("another registry: %v", err)
	}
}

// Restamp makes a gzipped tar the same bytes whenever its files were
// written, and keeps them.
func TestRestamp(t *testing.T) {
	created := time.Unix(1764000000, 0).UTC()
	write := func(at time.Time) string {
		var buf bytes.Buffer
		gw := gzip.NewWriter(&buf)
		gw.ModTime = at
		tw := tar.NewWriter(gw)
		for _, name := range []string{"chart/Chart.yaml", "chart/values.yaml"} {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 4, ModTime: at, Uname: "me", Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte("data")); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := gw.Close(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "chart.tgz")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Restamp(path, created); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b := write(time.Now()), write(time.Now().Add(time.Hour))
	dataA, _ := os.ReadFile(a)
	dataB, _ := os.ReadFile(b)
	if !bytes.Equal(dataA, dataB) {
		t.Fatal("two packages of the same files at different times differ after Restamp")
	}
	gr, err := gzip.NewReader(bytes.NewReader(dataA))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if !h.ModTime.Equal(created) || h.Uname != "" || string(data) != "data" {
			t.Errorf("%s: time %s, owner %q, content %q", h.Name, h.ModTime, h.Uname, data)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "chart/Chart.yaml,chart/values.yaml" {
		t.Errorf("files %v", names)
	}
}

func TestValidVersion(t *testing.T) {
	for _, v := range []string{"0.2.0", "1.0.0-rc.1", "10.20.30"} {
		if err := ValidVersion(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"v0.2.0", "0.2", "01.2.3", "0.2.0+build", "latest", ""} {
		if err := ValidVersion(v); err == nil {
			t.Errorf("%q taken for a version", v)
		}
	}
}

// An archive holds the binary, executable, under the name krew runs, and
// the same inputs make the same bytes.
func TestArchivesHoldTheBinaryAndAreReproducible(t *testing.T) {
	created := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	binary := []byte("\x7fELF pretend binary")
	for _, goos := range []string{"linux", "darwin", "windows"} {
		var a, b bytes.Buffer
		if err := WriteArchive(&a, goos, binary, created); err != nil {
			t.Fatal(err)
		}
		if err := WriteArchive(&b, goos, binary, created); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: two archives of the same binary differ", goos)
		}
		name, mode, data := onlyFile(t, goos, a.Bytes())
		if name != Bin(goos) || mode&0o111 == 0 || !bytes.Equal(data, binary) {
			t.Errorf("%s: the archive holds %s (mode %o, %d bytes), want the binary as %s, executable", goos, name, mode, len(data), Bin(goos))
		}
	}
	if got := ArchiveName("0.2.0", "windows", "arm64"); got != "kubectl-jobferry_0.2.0_windows_arm64.zip" {
		t.Errorf("ArchiveName = %s", got)
	}
}

// onlyFile reads the one file of a plugin archive.
func onlyFile(t *testing.T, goos string, archive []byte) (string, os.FileMode, []byte) {
	t.Helper()
	if goos == "windows" {
		zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
		if err != nil || len(zr.File) != 1 {
			t.Fatalf("zip: %v, %d files", err, len(zr.File))
		}
		f, err := zr.File[0].Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		return zr.File[0].Name, zr.File[0].Mode(), data
	}
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("more than one file in the archive: %v", err)
	}
	return h.Name, os.FileMode(h.Mode), data
}

func TestKrewManifest(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	archives := []Archive{
		{OS: "windows", Arch: "amd64", Name: ArchiveName("0.2.0", "windows", "amd64"), SHA256: sum},
		{OS: "linux", Arch: "arm64", Name: ArchiveName("0.2.0", "linux", "arm64"), SHA256: sum},
	}
	data, err := KrewManifest("0.2.0", "https://example.com/releases/v0.2.0/", archives)
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "jobferry" || p.Spec.Version != "v0.2.0" || len(p.Spec.Platforms) != 2 {
		t.Fatalf("manifest:\n%s", data)
	}
	linux, windows := p.Spec.Platforms[0], p.Spec.Platforms[1]
	if linux.Selector.MatchLabels["os"] != "linux" || linux.Selector.MatchLabels["arch"] != "arm64" || linux.Bin != "kubectl-jobferry" ||
		linux.URI != "https://example.com/releases/v0.2.0/kubectl-jobferry_0.2.0_linux_arm64.tar.gz" || linux.SHA256 != sum {
		t.Errorf("linux/arm64: %+v", linux)
	}
	if windows.Bin != "kubectl-jobferry.exe" || !strings.HasSuffix(windows.URI, ".zip") {
		t.Errorf("windows/amd64: %+v", windows)
	}
	if _, err := KrewManifest("0.2.0", "https://example.com", []Archive{{OS: "linux", Arch: "amd64", SHA256: strings.ToUpper(sum)}}); err == nil {
		t.Error("an uppercase sha256 was taken: krew refuses it")
	}
}

func TestSums(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"b.tgz": "chart", "images/jobferry-manager.oci.tar": "image", "a.tar.gz": "plugin", SumsFile: "stale"}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Sums(dir)
	if err != nil {
		t.Fatal(err)
	}
	line := func(name string) string {
		sum := sha256.Sum256([]byte(files[name]))
		return hex.EncodeToString(sum[:]) + "  " + name + "\n"
	}
	if want := line("a.tar.gz") + line("b.tgz") + line("images/jobferry-manager.oci.tar"); string(got) != want {
		t.Errorf("Sums:\n%s\nwant:\n%s", got, want)
	}
}
