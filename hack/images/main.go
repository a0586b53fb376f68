// Command images builds muster's container images with the Go toolchain
// alone, no container engine: each is an OCI image layout, archived as one
// tar (an oci-archive), on an empty (scratch) base that holds only the
// static binary, run as a non-root user. The same binaries give the same
// archive, byte for byte: every timestamp is SOURCE_DATE_EPOCH (0 unless
// set), and file owners and modes are fixed.
//
//	go run ./hack/images -bin-dir DIR -out DIR -version V -kube-version K \
//	    -platforms linux/amd64[,linux/arm64] muster-scheduler muster-controller
//
// DIR/<os>_<arch>/<name> is the binary of each platform. For every name it
// writes OUT/<name>.tar and prints the name and the digest to pin it by.
//
// With -rootfs, it instead wraps a root filesystem archive, such as
// mmdebstrap writes, as the one layer of the image NAME, run as root with
// no entrypoint: the example workloads' images (hack/example-images.sh).
//
//	go run ./hack/images -rootfs ROOTFS.tar -out DIR -version V NAME
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRoot is the user the images run as: distroless's "nonroot", which
// manifests/ also sets in each Pod's securityContext.
const nonRoot = "65532:65532"

// refNameAnnotation tags an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

type options struct {
	binDir, out, rootfs  string
	version, kubeVersion string
	platforms            []v1.Platform
	created              time.Time
}

func main() {
	var opts options
	var platforms string
	flag.StringVar(&opts.binDir, "bin-dir", "_output/images/bin", "directory of the binaries, one subdirectory <os>_<arch> per platform")
	flag.StringVar(&opts.out, "out", "_output/images", "directory the archives are written to")
	flag.StringVar(&opts.rootfs, "rootfs", "", "a root filesystem archive to make the one image named into, instead of binaries")
	flag.StringVar(&opts.version, "version", "", "muster's version: the images' tag and version label (required)")
	flag.StringVar(&opts.kubeVersion, "kube-version", "", "the Kubernetes release the binaries are built on (required)")
	flag.StringVar(&platforms, "platforms", "linux/amd64", "comma-separated os/arch of the images; more than one makes an image index")
	flag.Parse()
	if err := run(&opts, platforms, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(opts *options, platforms string, names []string) error {
	if opts.rootfs != "" {
		if opts.version == "" || len(names) != 1 {
			return errors.New("-rootfs needs -version and one name, the image's")
		}
		created, err := sourceDateEpoch()
		if err != nil {
			return err
		}
		opts.created = created
		return runRootfs(opts, names[0])
	}
	if opts.version == "" || opts.kubeVersion == "" {
		return errors.New("-version and -kube-version are required")
	}
	if len(names) == 0 {
		return errors.New("name at least one program, such as muster-scheduler")
	}
	for _, p := range strings.Split(platforms, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName == "" || arch == "" {
			return fmt.Errorf("-platforms: %q is not os/arch, such as linux/amd64", p)
		}
		opts.platforms = append(opts.platforms, v1.Platform{OS: osName, Architecture: arch})
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	opts.created = created
	if err := os.MkdirAll(opts.out, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		digest, err := buildArchive(opts, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("%s %s %s\n", name, filepath.Join(opts.out, name+".tar"), digest)
	}
	return nil
}

// sourceDateEpoch is the time every timestamp of the images is set to.
func sourceDateEpoch() (time.Time, error) {
	value := os.Getenv("SOURCE_DATE_EPOCH")
	if value == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	seconds, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a count of seconds: %w", value, err)
	}
	return time.Unix(seconds, 0).UTC(), nil
}

// buildArchive writes OUT/<name>.tar and returns the digest of what it
// holds: the image of the one platform, or the index of several.
func buildArchive(opts *options, name string) (v1.Hash, error) {
	var images []mutate.IndexAddendum
	for _, platform := range opts.platforms {
		binary := filepath.Join(opts.binDir, platform.OS+"_"+platform.Architecture, name)
		img, err := programImage(opts, name, binary, platform)
		if err != nil {
			return v1.Hash{}, err
		}
		images = append(images, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	var (
		top    mutate.Appendable
		digest v1.Hash
		err    error
	)
	if len(images) == 1 {
		top = images[0].Add
	} else {
		top = mutate.IndexMediaType(mutate.AppendManifests(empty.Index, images...), types.OCIImageIndex)
	}
	if digest, err = top.Digest(); err != nil {
		return v1.Hash{}, err
	}
	return digest, writeArchive(opts, name, top)
}

// writeArchive writes the image or index as OUT/<name>.tar, tagged with
// the version.
func writeArchive(opts *options, name string, top mutate.Appendable) error {
	tag := map[string]string{refNameAnnotation: opts.version}
	dir, err := os.MkdirTemp("", "muster-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	switch top := top.(type) {
	case v1.Image:
		err = path.AppendImage(top, layout.WithAnnotations(tag))
	case v1.ImageIndex:
		err = path.AppendIndex(top, layout.WithAnnotations(tag))
	}
	if err != nil {
		return err
	}
	return archive(dir, filepath.Join(opts.out, name+".tar"), opts.created)
}

// runRootfs writes OUT/<name>.tar, the image of the root filesystem
// archive, and prints its name and digest.
func runRootfs(opts *options, name string) error {
	layer, err := tarball.LayerFromFile(opts.rootfs, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return fmt.Errorf("reading %s: %w", opts.rootfs, err)
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: layer, History: v1.History{Created: v1.Time{Time: opts.created}, CreatedBy: "hack/example-images.sh: " + filepath.Base(opts.rootfs)},
	})
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	config, err := img.ConfigFile()
	if err != nil {
		return err
	}
	config = config.DeepCopy()
	config.OS, config.Architecture = "linux", "amd64"
	config.Created = v1.Time{Time: opts.created}
	config.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	config.Config.WorkingDir = "/"
	config.Config.Labels = map[string]string{"org.opencontainers.image.title": name, "org.opencontainers.image.version": opts.version}
	if img, err = mutate.ConfigFile(img, config); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.out, 0o755); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if err := writeArchive(opts, name, img); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Printf("%s %s %s\n", name, filepath.Join(opts.out, name+".tar"), digest)
	return nil
}

// programImage is a scratch image holding only the binary, its entrypoint,
// run as nonRoot.
func programImage(opts *options, name, binary string, platform v1.Platform) (v1.Image, error) {
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary (make images builds it): %w", platform.OS+"/"+platform.Architecture, err)
	}
	layerTar, err := singleFileTar(name, content, opts.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: layer, History: v1.History{Created: v1.Time{Time: opts.created}, CreatedBy: "hack/images: the " + name + " binary"},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	config, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	config = config.DeepCopy()
	config.OS, config.Architecture = platform.OS, platform.Architecture
	config.Created = v1.Time{Time: opts.created}
	config.Config.Entrypoint = []string{"/" + name}
	config.Config.User = nonRoot
	config.Config.WorkingDir = "/"
	config.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   name,
		"org.opencontainers.image.version": opts.version,
		"dev.muster.kubernetes-version":    opts.kubeVersion,
	}
	return mutate.ConfigFile(img, config)
}

// singleFileTar is a layer holding the binary at /name, owned by root,
// readable and runnable by every user.
func singleFileTar(name string, content []byte, modified time.Time) ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	header := &tar.Header{
		Typeflag: tar.TypeReg, Name: name, Mode: 0o555, Size: int64(len(content)),
		ModTime: modified, Format: tar.FormatPAX,
	}
	if err := w.WriteHeader(header); err != nil {
		return nil, err
	}
	if _, err := w.Write(content); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// archive tars the OCI layout in dir into file, entries sorted, with fixed
// owners, modes and times.
func archive(dir, file string, modified time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			paths = append(paths, path)
		}
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(paths)
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	w := tar.NewWriter(out)
	for _, path := range paths {
		if err := addToArchive(w, dir, path, modified); err != nil {
			out.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func addToArchive(w *tar.Writer, dir, path string, modified time.Time) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	header := &tar.Header{Name: filepath.ToSlash(rel), ModTime: modified, Format: tar.FormatPAX}
	if info.IsDir() {
		header.Typeflag, header.Name, header.Mode = tar.TypeDir, header.Name+"/", 0o755
		return w.WriteHeader(header)
	}
	header.Typeflag, header.Mode, header.Size = tar.TypeReg, 0o644, info.Size()
	if err := w.WriteHeader(header); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
