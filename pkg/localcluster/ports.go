package localcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A cluster's programs listen on ports below the kernel's ephemeral range,
// each reserved machine-wide for as long as the cluster exists. A cluster
// that stops (Stop, Restart) starts again on the same ports, so none may be
// taken meanwhile: inside the ephemeral range any client's outgoing
// connection, or any listener on port 0, may take it; the reservation
// keeps every other cluster from choosing it.

// ephemeralRangeFile holds the kernel's ephemeral port range.
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// defaultEphemeralLow is the low end of Linux's default ephemeral range.
const defaultEphemeralLow = 32768

// reservedPortsSpan is how many ports below the ephemeral range clusters
// choose from.
const reservedPortsSpan = 16384

// reservationsDir holds one file per reserved port, naming the cluster
// directory that holds it, and the lock its readers and writers take.
func reservationsDir() string { return filepath.Join(os.TempDir(), "muster-local-ports") }

// portChoices returns [low, high): the ports below the ephemeral range
// that clusters choose from.
func portChoices(ephemeralRange string) (low, high int) {
	high = defaultEphemeralLow
	if fields := strings.Fields(ephemeralRange); len(fields) == 2 {
		if first, err := strconv.Atoi(fields[0]); err == nil {
			high = first
		}
	}
	return max(1024, high-reservedPortsSpan), high
}

// reservePorts reserves n ports free now for this cluster, records them in
// its state and returns them; Down releases them.
func (c *Cluster) reservePorts(n int) ([]int, error) {
	ephemeral, _ := os.ReadFile(ephemeralRangeFile)
	low, high := portChoices(string(ephemeral))
	var ports []int
	err := withReservations(func(dir string) error {
		start := rand.IntN(high - low)
		for i := 0; i < high-low && len(ports) < n; i++ {
			port := low + (start+i)%(high-low)
			taken, err := reserve(dir, port, c.Dir)
			if err != nil {
				return err
			}
			if !taken {
				ports = append(ports, port)
			}
		}
		if len(ports) < n {
			return fmt.Errorf("only %d of %d ports in %d-%d are free", len(ports), n, low, high-1)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reserving ports: %w", err), c.releasePorts(ports))
	}
	c.Ports = append(c.Ports, ports...)
	return ports, nil
}

// reserve records port as owner's, unless another existing cluster holds it
// or something listens on it; it reports whether the port was taken. A
// reservation whose cluster directory is gone is stale and replaced.
func reserve(dir string, port int, owner string) (taken bool, err error) {
	path := filepath.Join(dir, strconv.Itoa(port))
	if holder, err := os.ReadFile(path); err == nil {
		if _, err := os.Stat(string(holder)); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true, nil
	}
	if err := l.Close(); err != nil {
		return false, fmt.Errorf("closing the probe of port %d: %w", port, err)
	}
	if err := os.WriteFile(path, []byte(owner), 0o644); err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	return false, nil
}

// releasePorts removes the reservations of ports that this cluster holds.
func (c *Cluster) releasePorts(ports []int) error {
	if len(ports) == 0 {
		return nil
	}
	return withReservations(func(dir string) error {
		var errs []error
		for _, port := range ports {
			path := filepath.Join(dir, strconv.Itoa(port))
			if holder, err := os.ReadFile(path); err != nil || string(holder) != c.Dir {
				continue
			}
			if err := os.Remove(path); err != nil {
				errs = append(errs, fmt.Errorf("releasing port %d: %w", port, err))
			}
		}
		return errors.Join(errs...)
	})
}

// withReservations runs do on the reservations directory while holding its
// machine-wide lock.
func withReservations(do func(dir string) error) error {
	dir := reservationsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	lockPath := filepath.Join(dir, ".lock")
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", lockPath, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lockPath, err)
	}
	return do(dir)
}
