package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var programs = []string{"muster-scheduler", "muster-controller"}

// imagesDir is where `make images` wrote the archives: $MUSTER_IMAGES_DIR,
// which the Makefile sets, else the repository's _output/images.
func imagesDir() string {
	if dir := os.Getenv("MUSTER_IMAGES_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "_output", "images")
}

// TestTheImagesRunTheirBinaryAsNonRoot checks the archives `make images`
// wrote: an OCI layout tagged with muster's version, one layer holding only
// the binary, the binary as entrypoint, a non-root user, and a binary that
// runs and names muster's version (and the scheduler, the Kubernetes
// release it is built on).
func TestTheImagesRunTheirBinaryAsNonRoot(t *testing.T) {
	kubernetes := pinnedKubernetes(t)
	for _, name := range programs {
		t.Run(name, func(t *testing.T) {
			archive := filepath.Join(imagesDir(), name+".tar")
			img, tag := readArchive(t, archive)
			config, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, tag, config.Config.Labels["org.opencontainers.image.version"], "the tag is muster's version")

			manifest, err := img.Manifest()
			require.NoError(t, err)
			assert.Equal(t, types.OCIManifestSchema1, manifest.MediaType)
			require.Len(t, manifest.Layers, 1, "one layer: no base image below the binary")
			assert.Equal(t, []string{"/" + name}, config.Config.Entrypoint)
			assert.Equal(t, nonRoot, config.Config.User)
			assert.False(t, strings.HasPrefix(config.Config.User, "0:") || config.Config.User == "root", "runs as non-root")

			layers, err := img.Layers()
			require.NoError(t, err)
			files := layerFiles(t, layers[0])
			require.Len(t, files, 1, "the layer holds the binary alone")
			binary, ok := files[name]
			require.True(t, ok, "the layer holds /%s", name)
			assert.Equal(t, int64(0o555), binary.mode)

			if config.OS != runtime.GOOS || config.Architecture != runtime.GOARCH {
				t.Fatalf("the image is for %s/%s; this test runs its binary, on %s/%s", config.OS, config.Architecture, runtime.GOOS, runtime.GOARCH)
			}
			path := filepath.Join(t.TempDir(), name)
			require.NoError(t, os.WriteFile(path, binary.content, 0o755))
			out, err := exec.Command(path, "--version").CombinedOutput()
			require.NoError(t, err, "%s --version: %s", name, out)
			assert.Contains(t, string(out), "muster "+tag)
			assert.Equal(t, kubernetes, config.Config.Labels["dev.muster.kubernetes-version"])
			if name == "muster-scheduler" {
				assert.Contains(t, string(out), "kubernetes "+kubernetes, "the scheduler names the kube-scheduler release it is")
			}
		})
	}
}

// pinnedKubernetes is the Kubernetes release go.mod pins.
func pinnedKubernetes(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "k8s.io/kubernetes").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestTheSameBinariesMakeTheSameArchives rebuilds the archives from the
// binaries `make images` built: byte for byte the same, so the digest a
// user pins names exactly what this repository builds.
func TestTheSameBinariesMakeTheSameArchives(t *testing.T) {
	img, tag := readArchive(t, filepath.Join(imagesDir(), programs[0]+".tar"))
	config, err := img.ConfigFile()
	require.NoError(t, err)
	opts := &options{
		binDir: filepath.Join(imagesDir(), "bin"), out: t.TempDir(),
		version: tag, kubeVersion: config.Config.Labels["dev.muster.kubernetes-version"],
		platforms: []v1.Platform{{OS: config.OS, Architecture: config.Architecture}},
		created:   config.Created.Time,
	}
	for _, name := range programs {
		_, err := buildArchive(opts, name)
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join(imagesDir(), name+".tar"))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(opts.out, name+".tar"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "%s: rebuilt, the archive differs", name)
	}
}

// readArchive opens an oci-archive of one image and returns it and its tag.
func readArchive(t *testing.T, archive string) (v1.Image, string) {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err, "make images writes the archives")
	defer f.Close()
	dir := t.TempDir()
	r := tar.NewReader(f)
	for {
		header, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		target := filepath.Join(dir, filepath.FromSlash(header.Name))
		if header.Typeflag == tar.TypeDir {
			require.NoError(t, os.MkdirAll(target, 0o755))
			continue
		}
		content, err := io.ReadAll(r)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(target, content, 0o644))
	}
	index, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err, "%s is an OCI image layout", archive)
	indexManifest, err := index.IndexManifest()
	require.NoError(t, err)
	require.Len(t, indexManifest.Manifests, 1)
	descriptor := indexManifest.Manifests[0]
	require.Equal(t, types.OCIManifestSchema1, descriptor.MediaType, "one platform: an image, not an index")
	img, err := index.Image(descriptor.Digest)
	require.NoError(t, err)
	return img, descriptor.Annotations[refNameAnnotation]
}

type file struct {
	mode    int64
	content []byte
}

// layerFiles returns the regular files of a layer by path.
func layerFiles(t *testing.T, layer v1.Layer) map[string]file {
	t.Helper()
	rc, err := layer.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	files := map[string]file{}
	r := tar.NewReader(rc)
	for {
		header, err := r.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		content, err := io.ReadAll(r)
		require.NoError(t, err)
		files[strings.TrimPrefix(header.Name, "/")] = file{mode: header.Mode, content: content}
	}
}
