// Package conformance proves muster's contracts against their real
// consumers. Each case creates a group through the local control plane's
// admission chain, reads back what muster-controller injected, and starts
// one process per pod on this machine with exactly that environment and
// those files: each "pod" has its own loopback address, its own hostname
// (a UTS namespace) and its own mount namespace, where a hosts file
// resolves the group's DNS names and the pod's volumes sit at their mount
// paths. Then it asserts that the framework formed its cluster.
package conformance

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}

// caseTimeout bounds each case's processes; a framework that never forms
// its cluster fails the case when it runs out.
const caseTimeout = 60 * time.Second

// file is one file of a pod's volumes, at its mount path.
type file struct {
	path string
	data []byte
	mode os.FileMode
}

// member is one pod as the harness runs it.
type member struct {
	hostname string // <group>-<role>-<index>
	fqdn     string // <hostname>.<subdomain>.<namespace>.svc, with a subdomain
	ip       string
	env      []string
	files    []file
}

func (m *member) getenv(name string) string {
	for _, kv := range m.env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// setenv replaces a variable, for the negative cases.
func (m *member) setenv(name, value string) {
	m.unsetenv(name)
	m.env = append(m.env, name+"="+value)
}

func (m *member) unsetenv(name string) {
	m.env = slices.DeleteFunc(m.env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// group creates a PodGroup and one pod per member through the API server,
// and reads back each stored pod as a member, by hostname. Addresses are
// 127.0.<subnet>.<n>, so that cases running side by side never share one.
func group(t *testing.T, subnet int, annotations map[string]string, roles map[string]int) map[string]*member {
	t.Helper()
	ns := framework.NewNamespace(t)
	var minMember int32
	for _, n := range roles {
		minMember += int32(n)
	}
	if topo, errs := topology.Parse(annotations); len(errs) == 0 && topo.Elastic != nil {
		minMember = topo.ElasticMinMember()
	}
	framework.CreatePodGroup(t, ns, "job", minMember, annotations)
	members := map[string]*member{}
	n := 10
	for _, role := range slices.Sorted(maps.Keys(roles)) {
		for i := range roles[role] {
			pod := st.MakePod().Namespace(ns).Name(fmt.Sprintf("job-%s-%d", role, i)).SchedulerName(localcluster.SchedulerName).
				Label(topology.GroupLabel, "job").Label(topology.RoleLabel, role).Label(topology.IndexLabel, fmt.Sprint(i)).
				Container("trainer:1").Obj()
			stored, err := framework.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating pod %s: %v", pod.Name, err)
			}
			if stored.Spec.Hostname == "" || stored.Spec.Subdomain == "" {
				t.Fatalf("pod %s was not given a hostname and subdomain", stored.Name)
			}
			m := readBack(t, stored)
			m.ip = fmt.Sprintf("127.0.%d.%d", subnet, n)
			n++
			members[m.hostname] = m
		}
	}
	return members
}

// readBack turns a stored pod into a member: its host name and DNS name,
// its first container's environment, and the files of each volume it
// mounts, as the kubelet would set and project them.
func readBack(t *testing.T, pod *corev1.Pod) *member {
	t.Helper()
	m := &member{hostname: pod.Spec.Hostname}
	if m.hostname == "" {
		m.hostname = pod.Name
	}
	if pod.Spec.Subdomain != "" {
		m.fqdn = fmt.Sprintf("%s.%s.%s.svc", m.hostname, pod.Spec.Subdomain, pod.Namespace)
	}
	container := pod.Spec.Containers[0]
	for _, e := range container.Env {
		m.env = append(m.env, e.Name+"="+e.Value)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, mount := range container.VolumeMounts {
		v := volumes[mount.Name]
		var data map[string][]byte
		var items []corev1.KeyToPath
		var defaultMode *int32
		switch {
		case v.ConfigMap != nil:
			cm := framework.Eventually(t, "ConfigMap "+v.ConfigMap.Name, func(ctx context.Context) (*corev1.ConfigMap, error) {
				return framework.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			})
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			items, defaultMode = v.ConfigMap.Items, v.ConfigMap.DefaultMode
		case v.Secret != nil:
			secret := framework.Eventually(t, "Secret "+v.Secret.SecretName, func(ctx context.Context) (*corev1.Secret, error) {
				return framework.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			})
			data, items, defaultMode = secret.Data, v.Secret.Items, v.Secret.DefaultMode
		default:
			// The ServiceAccount token: the kubelet's, not muster's.
			continue
		}
		if len(items) == 0 {
			for key := range data {
				items = append(items, corev1.KeyToPath{Key: key, Path: key})
			}
		}
		for _, item := range items {
			mode := ptr.Deref(item.Mode, ptr.Deref(defaultMode, 0o644))
			m.files = append(m.files, file{path: filepath.Join(mount.MountPath, item.Path), data: data[item.Key], mode: os.FileMode(mode)})
		}
	}
	return m
}

// cluster runs members as processes.
type cluster struct {
	t       *testing.T
	dir     string
	members map[string]*member
	mu      sync.Mutex
	procs   []*exec.Cmd
}

func newCluster(t *testing.T, members map[string]*member) *cluster {
	c := &cluster{t: t, dir: t.TempDir(), members: members}
	t.Cleanup(c.stop)
	return c
}

// hosts is the hosts file every member sees: each member's names at its own
// address, first its FQDN in the cluster's domain, as kubelet writes a pod's
// own line (torchrun's c10d rendezvous picks its store's host by that
// name), then the FQDN and hostname the cluster's DNS would resolve.
func (c *cluster) hosts() string {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for _, name := range slices.Sorted(maps.Keys(c.members)) {
		m := c.members[name]
		names := []string{m.ip, m.fqdn, m.hostname}
		if m.fqdn != "" {
			names = []string{m.ip, m.fqdn + "." + envinject.DefaultClusterDomain, m.fqdn, m.hostname}
		}
		fmt.Fprintln(&b, strings.Join(slices.DeleteFunc(names, func(s string) bool { return s == "" }), " "))
	}
	return b.String()
}

// process is a running member's program.
type process struct {
	name   string
	pid    int
	output *lockedWriter
	done   chan struct{}
	err    error
}

// start runs command as member m: in its own mount and UTS namespaces, with
// its hostname, the group's hosts file over /etc/hosts, each of its
// volumes' files on a tmpfs at the mount path, the directories in binds
// bound over theirs, and exactly its environment plus extraEnv. Processes
// end, by their process group, when the test does.
func (c *cluster) start(m *member, extraEnv []string, binds map[string]string, command ...string) *process {
	c.t.Helper()
	stage := filepath.Join(c.dir, m.hostname)
	hostsFile := filepath.Join(c.dir, "hosts")
	mustWrite(c.t, hostsFile, []byte(c.hosts()), 0o644)

	var script strings.Builder
	fmt.Fprintf(&script, "set -e\nhostname %s\nmount --bind %s /etc/hosts\n", m.hostname, hostsFile)
	dirs := map[string]bool{}
	for i, f := range m.files {
		dir := filepath.Dir(f.path)
		if !dirs[dir] {
			dirs[dir] = true
			c.mountPoint(dir)
			fmt.Fprintf(&script, "mount -t tmpfs -o mode=0755 tmpfs %s\n", dir)
		}
		staged := filepath.Join(stage, fmt.Sprintf("file-%d", i))
		mustWrite(c.t, staged, f.data, 0o600)
		fmt.Fprintf(&script, "cp %s %s\nchmod %o %s\n", staged, f.path, f.mode, f.path)
	}
	for target, source := range binds {
		c.mountPoint(target)
		fmt.Fprintf(&script, "mount --bind %s %s\n", source, target)
	}
	script.WriteString(`exec env -i "$@"` + "\n")
	args := []string{"-m", "-u", "--propagation", "private", "sh", "-c", script.String(), m.hostname,
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	args = append(args, m.env...)
	args = append(args, extraEnv...)
	args = append(args, command...)
	cmd := exec.Command("unshare", args...)
	p := &process{name: m.hostname, output: &lockedWriter{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.output, p.output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", m.hostname, err)
	}
	// unshare and sh exec the command in place: this PID is the member's
	// program, in the member's namespaces.
	p.pid = cmd.Process.Pid
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p
}

// mountPoints counts the cases using each mount point the harness created
// on this machine, so that the last one to finish removes it.
var mountPoints = struct {
	sync.Mutex
	users   map[string]int
	created map[string]bool
}{users: map[string]int{}, created: map[string]bool{}}

// mountPoint makes sure a mount point exists while the test runs, and
// removes it at the end if the harness created it and no other case uses
// it.
func (c *cluster) mountPoint(dir string) {
	mountPoints.Lock()
	defer mountPoints.Unlock()
	if _, err := os.Stat(dir); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			c.t.Fatalf("creating mount point %s: %v", dir, err)
		}
		mountPoints.created[dir] = true
	}
	mountPoints.users[dir]++
	c.t.Cleanup(func() {
		mountPoints.Lock()
		defer mountPoints.Unlock()
		mountPoints.users[dir]--
		if mountPoints.users[dir] == 0 && mountPoints.created[dir] {
			_ = os.Remove(dir)
			delete(mountPoints.created, dir)
		}
	})
}

// stop ends every process group the cluster started.
func (c *cluster) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range c.procs {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// wait waits for the process to exit, up to the case's deadline, and
// returns its output and whether it exited 0.
func (p *process) wait(deadline time.Time) (string, bool) {
	select {
	case <-p.done:
		return p.text(), p.err == nil
	case <-time.After(time.Until(deadline)):
		return p.text() + "\n(still running at the case's deadline)", false
	}
}

func (p *process) text() string {
	p.output.mu.Lock()
	defer p.output.mu.Unlock()
	return p.output.buf.String()
}

// lockedWriter collects a process's stdout and stderr together.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func mustWrite(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}
