// Command images writes OCI image archives of jobferry's binaries without a
// container engine: each image is one layer on an empty base holding the
// static binary (and an empty /tmp), run as the non-root uid 65532, with the
// OCI labels naming its version and source revision. An archive is an OCI
// image layout in a tar file (what `skopeo copy oci-archive:`, `podman load`
// and `ctr images import` read), its image named by the
// org.opencontainers.image.ref.name annotation.
//
//	go run ./hack/images --bin-dir DIR --out _output/images --registry R --version V --revision REV
//
// writes <out>/jobferry-<binary>.oci.tar for every binary (manager, worker)
// found in DIR, named <registry>/jobferry-<binary>:<version>, for
// linux/amd64. With --platforms (linux/amd64,linux/arm64, as a release has
// them), DIR holds a directory per platform (linux_amd64/manager, …) and
// each archive holds one image index of the platforms' images.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUser is the user the images run as (distroless's "nonroot").
const NonRootUser = "65532:65532"

// Source is the OCI source label of every image.
const Source = "https://github.com/jobferry/jobferry"

func main() {
	var (
		binDir       = flag.String("bin-dir", "", "directory holding the static manager and worker binaries")
		out          = flag.String("out", "_output/images", "directory the archives are written to")
		registry     = flag.String("registry", "ghcr.io/jobferry", "registry and path the image names start with")
		version      = flag.String("version", "", "image tag and org.opencontainers.image.version label")
		revision     = flag.String("revision", "", "org.opencontainers.image.revision label (the source commit)")
		created      = flag.Int64("created", 0, "creation time in Unix seconds (the commit's, so an image is reproducible); 0 for the epoch")
		platformList = flag.String("platforms", "", "comma-separated OS/architecture pairs: an image index of them, the binaries under <bin-dir>/<os>_<arch>/; empty: one linux/amd64 image of <bin-dir>'s binaries")
		// The real-node tests' images instead of jobferry's (nodeimages.go).
		nodeImages = flag.String("node-images", "", "directory holding a static pause and busybox: write the pause and busybox images of real nodes instead")
	)
	flag.Parse()
	if *nodeImages == "" && (*binDir == "" || *version == "" || *revision == "") {
		fmt.Fprintln(os.Stderr, "images: --bin-dir, --version and --revision are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	createdAt := time.Unix(*created, 0).UTC()
	if *nodeImages != "" {
		if err := writeNodeImages(*nodeImages, *out, createdAt); err != nil {
			fail(err)
		}
		return
	}
	platforms := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	if *platformList != "" {
		var err error
		if platforms, err = parsePlatforms(*platformList); err != nil {
			fail(err)
		}
	}
	for _, binary := range []string{"manager", "worker"} {
		ref := fmt.Sprintf("%s/jobferry-%s:%s", *registry, binary, *version)
		path := filepath.Join(*out, "jobferry-"+binary+".oci.tar")
		var images []Image
		for _, platform := range platforms {
			dir := *binDir
			if *platformList != "" {
				dir = filepath.Join(dir, platform.OS+"_"+platform.Architecture)
			}
			im, err := jobferryImage(filepath.Join(dir, binary), binary, *version, *revision, createdAt)
			if err != nil {
				fail(fmt.Errorf("%s: %w", binary, err))
			}
			im.Platform = platform
			images = append(images, im)
		}
		var err error
		if *platformList == "" {
			err = writeArchive(path, ref, images[0])
		} else {
			err = writeIndexArchive(path, ref, images)
		}
		if err != nil {
			fail(fmt.Errorf("%s: %w", binary, err))
		}
		fmt.Printf("images: %s -> %s\n", ref, path)
	}
}

// parsePlatforms reads a comma-separated list of OS/architecture pairs.
func parsePlatforms(list string) ([]v1.Platform, error) {
	var platforms []v1.Platform
	for _, s := range strings.Split(list, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(s), "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("--platforms: %q is no OS/architecture pair (linux/amd64)", s)
		}
		platforms = append(platforms, v1.Platform{OS: goos, Architecture: arch})
	}
	return platforms, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "images:", err)
	os.Exit(1)
}

// Image describes one image to build: one layer on nothing.
type Image struct {
	// Entries are the layer's files, in order.
	Entries    []Entry
	Entrypoint []string
	Cmd        []string
	User       string
	Labels     map[string]string
	Created    time.Time
	// Platform is the OS and architecture of its binaries; linux/amd64
	// when unset.
	Platform v1.Platform
}

// platform is the image's platform, linux/amd64 when unset.
func (im Image) platform() v1.Platform {
	if im.Platform.OS == "" {
		return v1.Platform{OS: "linux", Architecture: "amd64"}
	}
	return im.Platform
}

// Entry is a directory, a regular file or a symbolic link of a layer.
type Entry struct {
	Name string
	Mode int64
	// Dir: a directory; Link: a symbolic link to it; otherwise a file
	// holding Data.
	Dir  bool
	Link string
	Data []byte
}

// jobferryImage is the image of one of jobferry's static binaries: /<name>
// and an empty /tmp, run as NonRootUser.
func jobferryImage(binaryPath, name, version, revision string, created time.Time) (Image, error) {
	binary, err := os.ReadFile(binaryPath)
	if err != nil {
		return Image{}, err
	}
	return Image{
		Entries: []Entry{
			{Name: "tmp/", Dir: true, Mode: 0o1777},
			{Name: name, Mode: 0o755, Data: binary},
		},
		Entrypoint: []string{"/" + name},
		User:       NonRootUser,
		Created:    created,
		Labels: map[string]string{
			"org.opencontainers.image.title":    "jobferry-" + name,
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
			"org.opencontainers.image.source":   Source,
			"org.opencontainers.image.created":  created.Format(time.RFC3339),
		},
	}, nil
}

// build returns the image.
func build(im Image) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range im.Entries {
		h := &tar.Header{Name: e.Name, Typeflag: tar.TypeReg, Mode: e.Mode, Size: int64(len(e.Data)), ModTime: im.Created}
		switch {
		case e.Dir:
			h = &tar.Header{Name: e.Name, Typeflag: tar.TypeDir, Mode: e.Mode, ModTime: im.Created}
		case e.Link != "":
			h = &tar.Header{Name: e.Name, Typeflag: tar.TypeSymlink, Linkname: e.Link, Mode: 0o777, ModTime: im.Created}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = im.platform().OS, im.platform().Architecture
	cfg.Created = v1.Time{Time: im.Created}
	cfg.Config = v1.Config{
		Entrypoint: im.Entrypoint,
		Cmd:        im.Cmd,
		User:       im.User,
		WorkingDir: "/",
		Labels:     im.Labels,
	}
	return mutate.ConfigFile(img, cfg)
}

// writeArchive writes the image as an OCI layout named ref, tarred.
func writeArchive(path, ref string, im Image) error {
	img, err := build(im)
	if err != nil {
		return err
	}
	return writeLayout(path, im.Created, func(p layout.Path) error {
		return p.AppendImage(img, refName(ref), layout.WithPlatform(im.platform()))
	})
}

// writeIndexArchive writes the images, one per platform, as one OCI image
// index named ref in an OCI layout, tarred: what a registry serves as a
// multi-architecture image.
func writeIndexArchive(path, ref string, images []Image) error {
	var addenda []mutate.IndexAddendum
	for _, im := range images {
		img, err := build(im)
		if err != nil {
			return err
		}
		platform := im.platform()
		addenda = append(addenda, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	index := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, addenda...), types.OCIImageIndex)
	return writeLayout(path, images[0].Created, func(p layout.Path) error {
		return p.AppendIndex(index, refName(ref))
	})
}

// refName names what an OCI layout's index.json lists (what
// `ctr images import` and `skopeo copy oci-archive:` read as its name).
func refName(ref string) layout.Option {
	return layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})
}

// writeLayout writes an OCI layout, filled by add, into a tar file at path.
func writeLayout(path string, created time.Time, add func(layout.Path) error) error {
	dir, err := os.MkdirTemp("", "jobferry-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := add(p); err != nil {
		return err
	}
	return tarDir(dir, path, created)
}

// tarDir writes dir into a tar file, in name order with fixed times and
// owners, so the same inputs make the same archive.
func tarDir(dir, path string, modTime time.Time) error {
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range names {
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: modTime, Mode: 0o644, Typeflag: tar.TypeReg, Size: info.Size()}
		if info.IsDir() {
			h = &tar.Header{Name: filepath.ToSlash(rel) + "/", ModTime: modTime, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
