package conformance

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-dev/muster/pkg/topology"
)

// openMPIHarnessEnv is what the harness adds to the launcher's environment:
// the permission to run as root, which images set for themselves, and the
// restriction to loopback, which stands for the pod network here.
var openMPIHarnessEnv = []string{
	"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
	"OMPI_MCA_oob_tcp_if_include=lo", "OMPI_MCA_btl_tcp_if_include=lo",
}

func mpiGroup(t *testing.T, subnet int, implementation string) map[string]*member {
	return group(t, subnet, map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
		topology.SlotsAnnotation: "2", topology.MPIImplementationAnnotation: implementation,
	}, map[string]int{"launcher": 1, "worker": 2})
}

// runMPI starts sshd as each worker, on the worker's own address, with the
// group's authorized key at /root/.ssh as muster mounted it; then runs
// launch as the launcher, with the workers' host keys known. It returns the
// launcher's output and whether it exited 0.
func runMPI(t *testing.T, c *cluster, extraEnv []string, launch ...string) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(caseTimeout)
	privsep := filepath.Join(c.dir, "run-sshd")
	if err := os.MkdirAll(privsep, 0o755); err != nil {
		t.Fatal(err)
	}
	var knownHosts strings.Builder
	var workers []*process
	for _, name := range []string{"job-worker-0", "job-worker-1"} {
		w := c.members[name]
		hostKey := filepath.Join(c.dir, name+"-hostkey")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey).CombinedOutput(); err != nil {
			t.Fatalf("generating a host key: %v\n%s", err, out)
		}
		public, err := os.ReadFile(hostKey + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&knownHosts, "%s,%s %s", w.fqdn, w.hostname, public)
		config := filepath.Join(c.dir, name+"-sshd_config")
		mustWrite(t, config, []byte(fmt.Sprintf(`ListenAddress %s
Port 22
HostKey %s
PidFile none
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile .ssh/authorized_keys
StrictModes yes
`, w.ip, hostKey)), 0o600)
		workers = append(workers, c.start(w, nil, map[string]string{"/run/sshd": privsep}, "/usr/sbin/sshd", "-D", "-e", "-f", config))
	}
	// The image's ssh configuration: the system defaults plus the workers'
	// host keys, which a cluster would publish for its nodes.
	sshDir := filepath.Join(c.dir, "etc-ssh")
	if defaults, err := os.ReadFile("/etc/ssh/ssh_config"); err == nil {
		mustWrite(t, filepath.Join(sshDir, "ssh_config"), defaults, 0o644)
	}
	mustWrite(t, filepath.Join(sshDir, "ssh_known_hosts"), []byte(knownHosts.String()), 0o644)

	// The launcher starts once the workers are Ready, as LaunchOrder
	// makes it in a cluster: here, once each sshd accepts connections.
	for i, name := range []string{"job-worker-0", "job-worker-1"} {
		address := net.JoinHostPort(c.members[name].ip, "22")
		for {
			conn, err := net.DialTimeout("tcp", address, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sshd of %s never listened on %s: %v\n%s", name, address, err, workers[i].text())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	launcher := c.start(c.members["job-launcher-0"], extraEnv, map[string]string{"/etc/ssh": sshDir}, launch...)
	out, ok := launcher.wait(deadline)
	for _, w := range workers {
		select {
		case <-w.done:
			out += fmt.Sprintf("\n--- sshd of %s exited:\n%s", w.name, w.text())
		default:
		}
	}
	return out, ok
}

// ranksOnWorkers reports whether the output is exactly two ranks' host
// names on each worker.
func ranksOnWorkers(out string) bool {
	var hosts []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "job-") && !strings.Contains(line, " ") {
			hosts = append(hosts, line)
		}
	}
	slices.Sort(hosts)
	return slices.Equal(hosts, []string{"job-worker-0", "job-worker-0", "job-worker-1", "job-worker-1"})
}

// TestOpenMPI: mpirun -np 4 on the launcher, with the injected OMPI_MCA_*,
// the mounted hostfile and the mounted key and no flags, starts two ranks
// on each worker.
func TestOpenMPI(t *testing.T) {
	t.Parallel()
	c := newCluster(t, mpiGroup(t, 11, "openmpi"))
	out, ok := runMPI(t, c, openMPIHarnessEnv, "mpirun.openmpi", "-np", "4", "hostname")
	if !ok || !ranksOnWorkers(out) {
		t.Errorf("mpirun did not start 2 ranks on each worker:\n%s", out)
	}
}

// TestOpenMPIFailsWithoutTheHostfileVariable: without
// OMPI_MCA_orte_default_hostfile, as with an OpenMPI that does not read it,
// the ranks do not land on the workers.
func TestOpenMPIFailsWithoutTheHostfileVariable(t *testing.T) {
	t.Parallel()
	members := mpiGroup(t, 12, "openmpi")
	members["job-launcher-0"].unsetenv("OMPI_MCA_orte_default_hostfile")
	out, ok := runMPI(t, newCluster(t, members), openMPIHarnessEnv, "mpirun.openmpi", "-np", "4", "hostname")
	if ok && ranksOnWorkers(out) {
		t.Errorf("the ranks reached the workers without the hostfile variable:\n%s", out)
	}
}

// TestMPICH: Hydra's mpiexec -n 4 on the launcher, through HYDRA_HOST_FILE
// and its host:N hostfile, starts two ranks on each worker.
func TestMPICH(t *testing.T) {
	t.Parallel()
	c := newCluster(t, mpiGroup(t, 13, "mpich"))
	out, ok := runMPI(t, c, nil, "mpiexec.hydra", "-n", "4", "hostname")
	if !ok || !ranksOnWorkers(out) {
		t.Errorf("mpiexec did not start 2 ranks on each worker:\n%s", out)
	}
}

// TestMPICHFailsWithoutItsHostfile: without HYDRA_HOST_FILE, mpiexec runs
// the ranks on the launcher.
func TestMPICHFailsWithoutItsHostfile(t *testing.T) {
	t.Parallel()
	members := mpiGroup(t, 14, "mpich")
	members["job-launcher-0"].unsetenv("HYDRA_HOST_FILE")
	out, ok := runMPI(t, newCluster(t, members), nil, "mpiexec.hydra", "-n", "4", "hostname")
	if ok && ranksOnWorkers(out) {
		t.Errorf("the ranks reached the workers without HYDRA_HOST_FILE:\n%s", out)
	}
}
