package localcluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// isolatedReservations points the machine-wide reservations directory at a
// directory of this test's own, and creates it.
func isolatedReservations(t *testing.T) string {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	dir := reservationsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func clusterIn(t *testing.T) *Cluster {
	t.Helper()
	return &Cluster{Dir: t.TempDir()}
}

func TestPortsAreChosenBelowTheEphemeralRange(t *testing.T) {
	tests := []struct {
		name          string
		ephemeral     string
		wantLow, want int
	}{
		{name: "Linux's default", ephemeral: "32768\t60999\n", wantLow: 16384, want: 32768},
		{name: "a raised range", ephemeral: "40000 60999", wantLow: 23616, want: 40000},
		{name: "a range starting low keeps out of the privileged ports", ephemeral: "5000 60999", wantLow: 1024, want: 5000},
		{name: "unreadable", ephemeral: "", wantLow: 16384, want: 32768},
		{name: "not numbers", ephemeral: "a b", wantLow: 16384, want: 32768},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			low, high := portChoices(tt.ephemeral)
			if low != tt.wantLow || high != tt.want {
				t.Errorf("portChoices(%q) = [%d, %d), want [%d, %d)", tt.ephemeral, low, high, tt.wantLow, tt.want)
			}
		})
	}
}

func TestTwoClustersNeverShareAPortAndDownReleasesThem(t *testing.T) {
	dir := isolatedReservations(t)
	ephemeral, _ := os.ReadFile(ephemeralRangeFile)
	low, high := portChoices(string(ephemeral))
	first, second := clusterIn(t), clusterIn(t)

	a, err := first.reservePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := second.reservePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	if len(slices.Compact(all)) != 40 {
		t.Fatalf("the two clusters' ports overlap or repeat: %v and %v", a, b)
	}
	for _, port := range all {
		if port < low || port >= high {
			t.Errorf("port %d is outside [%d, %d), below the ephemeral range", port, low, high)
		}
	}
	for c, ports := range map[*Cluster][]int{first: a, second: b} {
		if !slices.Equal(c.Ports, ports) {
			t.Errorf("the cluster's state records %v, want %v", c.Ports, ports)
		}
		for _, port := range ports {
			holder, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(port)))
			if err != nil || string(holder) != c.Dir {
				t.Errorf("port %d's reservation names %q (%v), want %q", port, holder, err, c.Dir)
			}
		}
	}

	if err := first.Down(); err != nil {
		t.Fatal(err)
	}
	for _, port := range a {
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(port))); !os.IsNotExist(err) {
			t.Errorf("port %d is still reserved after Down: %v", port, err)
		}
	}
	for _, port := range b {
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(port))); err != nil {
			t.Errorf("the other cluster's port %d lost its reservation: %v", port, err)
		}
	}
}

func TestAReservationIsKeptWhileItsClusterExistsAndTakenOverOnceItIsGone(t *testing.T) {
	dir := isolatedReservations(t)
	port := unusedPort(t)
	path := filepath.Join(dir, strconv.Itoa(port))
	holder := t.TempDir()
	if err := os.WriteFile(path, []byte(holder), 0o644); err != nil {
		t.Fatal(err)
	}

	taken, err := reserve(dir, port, "/a/new/cluster")
	if err != nil || !taken {
		t.Fatalf("reserve of a port an existing cluster holds = taken %v, %v; want taken", taken, err)
	}
	if err := os.RemoveAll(holder); err != nil {
		t.Fatal(err)
	}
	taken, err = reserve(dir, port, "/a/new/cluster")
	if err != nil || taken {
		t.Fatalf("reserve of a port whose cluster is gone = taken %v, %v; want it reserved", taken, err)
	}
	if got, _ := os.ReadFile(path); string(got) != "/a/new/cluster" {
		t.Errorf("the reservation names %q, want the new cluster", got)
	}
}

func TestAPortSomethingListensOnIsNeverReserved(t *testing.T) {
	dir := isolatedReservations(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	taken, err := reserve(dir, port, "/a/cluster")
	if err != nil || !taken {
		t.Fatalf("reserve of a port in use = taken %v, %v; want taken", taken, err)
	}
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(port))); !os.IsNotExist(err) {
		t.Errorf("a port in use was recorded as reserved: %v", err)
	}
}

func TestReleaseLeavesAnotherClustersReservationAlone(t *testing.T) {
	dir := isolatedReservations(t)
	port := unusedPort(t)
	path := filepath.Join(dir, strconv.Itoa(port))
	if err := os.WriteFile(path, []byte("/another/cluster"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clusterIn(t).releasePorts([]int{port}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "/another/cluster" {
		t.Errorf("the other cluster's reservation is now %q (%v)", got, err)
	}
}

// unusedPort returns a port nothing listens on now.
func unusedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

func TestUpOverAStoppedClusterReleasesItsPorts(t *testing.T) {
	dir := isolatedReservations(t)
	stopped := clusterIn(t)
	ports, err := stopped.reservePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.save(); err != nil {
		t.Fatal(err)
	}

	// Its programs are empty files: the new cluster fails at its first
	// program, after it has taken the directory over.
	if _, err := Up(context.Background(), DefaultOptions(stopped.Dir, fakeBinDir(t))); err == nil {
		t.Fatal("Up with empty programs succeeded")
	}
	for _, port := range ports {
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(port))); !os.IsNotExist(err) {
			t.Errorf("port %d of the stopped cluster is still reserved: %v", port, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 { // the lock
		t.Errorf("reservations left after the failed Up: %v", left)
	}
}

// TestAPortAnotherProgramHoldsIsNotFree: mpi-operator's fixed health port
// is checked before it starts, so that another program's answer there is
// never taken for its own.
func TestAPortAnotherProgramHoldsIsNotFree(t *testing.T) {
	held, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := held.Addr().(*net.TCPAddr).Port
	if err := portFree(port); err == nil {
		t.Errorf("port %d is held, and portFree says it is free", port)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if err := portFree(port); err != nil {
		t.Errorf("port %d was let go, and portFree says %v", port, err)
	}
}
