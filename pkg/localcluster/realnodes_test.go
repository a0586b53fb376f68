package localcluster

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRealNodesGetDistinctNamesAndAddressesInTheirRanges(t *testing.T) {
	tests := []struct {
		name                                    string
		node                                    realNode
		wantName, wantVeth, wantIP, wantPodCIDR string
	}{
		{name: "the first node", node: realNode{index: 0}, wantName: "real-node-0", wantVeth: "muster-rn0", wantIP: "10.87.0.2", wantPodCIDR: "10.88.0.0/24"},
		{name: "the last node", node: realNode{index: maxRealNodes - 1}, wantName: "real-node-249", wantVeth: "muster-rn249", wantIP: "10.87.0.251", wantPodCIDR: "10.88.249.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node
			got := []string{n.name(), n.hostVeth(), n.ip(), n.podCIDR()}
			want := []string{tt.wantName, tt.wantVeth, tt.wantIP, tt.wantPodCIDR}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("got %q, want %q", got[i], want[i])
				}
			}
			// Linux refuses interface names longer than 15 bytes.
			if len(n.hostVeth()) > 15 {
				t.Errorf("veth %q is longer than 15 bytes", n.hostVeth())
			}
		})
	}
}

// writeArchive writes a tar holding index.json with the given content.
func writeArchive(t *testing.T, path, index string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := tar.NewWriter(f)
	if index != "" {
		if err := w.WriteHeader(&tar.Header{Name: "index.json", Mode: 0o644, Size: int64(len(index))}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(index)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLocalImageIsNamedByTheArchiveAndItsTag(t *testing.T) {
	tests := []struct {
		name, index, want, wantErr string
	}{
		{name: "a tagged archive", index: `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"v1.2.3"}}]}`, want: "muster.local/prog:v1.2.3"},
		{name: "an untagged archive", index: `{"manifests":[{}]}`, wantErr: "names no tag in its index"},
		{name: "not an OCI archive", wantErr: "has no index.json: it is not an OCI archive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeArchive(t, filepath.Join(dir, "prog.tar"), tt.index)
			got, err := LocalImage(dir, "prog")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LocalImage() = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("LocalImage() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestAnExampleImageIsFoundUnderExamples(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, exampleImagesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	writeArchive(t, filepath.Join(dir, exampleImagesDir, "muster-example-mpi.tar"), `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"debian12"}}]}`)
	got, err := LocalImage(dir, "muster-example-mpi")
	if err != nil || got != "muster.local/muster-example-mpi:debian12" {
		t.Fatalf("LocalImage() = %q, %v; want muster.local/muster-example-mpi:debian12", got, err)
	}
}
