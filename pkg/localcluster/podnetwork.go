package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The real nodes' network. Each node lives in a network namespace of its
// own, joined to the bridge podBridge in this machine's namespace by a veth;
// the API server listens on the bridge's address. Each node's pods get
// addresses from a /24 of its own, and every namespace has a route to every
// other node's pods. No namespace has a default route: nothing leaves the
// machine.
const (
	podBridge        = "muster0"
	nodeNetworkMask  = "/24"
	nodeGateway      = "10.87.0.1"
	podNetworkCIDR   = "10.88.0.0/16"
	clusterDNSIP     = "10.0.0.10"
	realNodeNameBase = "real-node-"
	// maxRealNodes keeps node addresses (10.87.0.2 on) and pod subnets
	// (10.88.N.0/24) inside their ranges.
	maxRealNodes = 250
)

// realNodesRunDir holds what outlives a crashed real-node cluster: the
// kernel settings to put back, and what to remove. Real nodes take fixed
// names and addresses, so one such cluster runs on the machine at a time,
// under realNodesLock.
const (
	realNodesRunDir = "/run/muster-local"
	realNodesRecord = realNodesRunDir + "/real-nodes.json"
	realNodesLock   = realNodesRunDir + "/real-nodes.lock"
)

// kubeletKernelSettings are the machine-wide settings kubelet rewrites when
// it starts (its container manager's kernel tunables). Their values from
// before the first node are put back when the nodes go.
var kubeletKernelSettings = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// sharedNodePaths are the machine's directories that kubelet, containerd
// and the CNI plugins write whatever their configuration says: the device
// plugin socket, the shims' sockets, the CNI result cache. Those absent
// before the first node are removed with the nodes.
var sharedNodePaths = []string{"/var/lib/kubelet", "/run/containerd", "/var/lib/cni"}

// realNode is one real node's place on the pod network.
type realNode struct{ index int }

func (n realNode) name() string  { return realNodeNameBase + strconv.Itoa(n.index) }
func (n realNode) netns() string { return "muster-" + n.name() }

// hostVeth is the veth's end on the bridge; Linux caps names at 15 bytes.
func (n realNode) hostVeth() string { return "muster-rn" + strconv.Itoa(n.index) }
func (n realNode) ip() string       { return "10.87.0." + strconv.Itoa(n.index+2) }
func (n realNode) podCIDR() string  { return "10.88." + strconv.Itoa(n.index) + ".0/24" }
func (n realNode) netnsPath() string {
	return "/run/netns/" + n.netns()
}

// cgroupRoot is the cgroup the node's kubelet puts its pods under.
func (n realNode) cgroupRoot() string { return "/muster-" + n.name() }

func realNodes(count int) []realNode {
	nodes := make([]realNode, count)
	for i := range nodes {
		nodes[i] = realNode{index: i}
	}
	return nodes
}

// realNodesState is what realNodesRecord holds.
type realNodesState struct {
	// Dir is the cluster whose nodes these are; its nodes/ holds their
	// mounts.
	Dir    string            `json:"dir"`
	Nodes  int               `json:"nodes"`
	Kernel map[string]string `json:"kernel"`
	// Created are the sharedNodePaths the nodes made.
	Created []string `json:"created,omitempty"`
}

// run runs a command of iproute2 or the like, its output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// realNodesLockWait bounds how long a cluster waits for another with real
// nodes to stop, as make demo and make test would on one machine.
const realNodesLockWait = 15 * time.Minute

// takeRealNodesLock takes the machine's one real-node cluster lock, and
// waits until no other cluster's real nodes run, then cleans up after a
// cluster that crashed with them.
func takeRealNodesLock(ctx context.Context, logf func(string, ...any)) (*os.File, error) {
	if err := os.MkdirAll(realNodesRunDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", realNodesRunDir, err)
	}
	f, err := os.OpenFile(realNodesLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", realNodesLock, err)
	}
	// muster-local up returns, and lets go of the lock, while its cluster
	// runs on: the record says whose nodes these are, and they are waited
	// for as well.
	deadline := time.Now().Add(realNodesLockWait)
	for told := false; ; told = true {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			owner, running := realNodesOwner()
			if !running {
				break
			}
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			if time.Now().After(deadline) || ctx.Err() != nil {
				f.Close()
				return nil, fmt.Errorf("a cluster with real nodes runs in %s: stop it first with muster-local down --dir %s", owner, owner)
			}
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, fmt.Errorf("another cluster with real nodes is starting or stopping on this machine (it holds %s)", realNodesLock)
		}
		if !told {
			logf("waiting up to %s for another cluster with real nodes on this machine to stop", realNodesLockWait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if err := cleanupRealNodes(); err != nil {
		f.Close()
		return nil, fmt.Errorf("cleaning up the real nodes of a cluster that did not stop: %w", err)
	}
	return f, nil
}

// realNodesOwner is the cluster realNodesRecord names, and whether any of
// its programs still runs.
func realNodesOwner() (string, bool) {
	data, err := os.ReadFile(realNodesRecord)
	if err != nil {
		return "", false
	}
	var state realNodesState
	if json.Unmarshal(data, &state) != nil {
		return "", false
	}
	owner, err := Load(state.Dir)
	if err != nil {
		return state.Dir, false
	}
	return state.Dir, owner.anyRunning()
}

// setUpPodNetwork records the kernel settings kubelet will change, then
// makes the bridge, each node's namespace and veth, and the routes.
func setUpPodNetwork(dir string, nodes []realNode) error {
	state := realNodesState{Dir: dir, Nodes: len(nodes), Kernel: map[string]string{}}
	for _, key := range kubeletKernelSettings {
		value, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			return fmt.Errorf("reading %s: %w", key, err)
		}
		state.Kernel[key] = strings.TrimSpace(string(value))
	}
	for _, path := range sharedNodePaths {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			state.Created = append(state.Created, path)
		}
	}
	data, err := json.Marshal(state)
	if err != nil {
		return err
	}
	// Written before anything is made, so that a crash at any later point
	// is cleaned up from it.
	if err := os.WriteFile(realNodesRecord, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", realNodesRecord, err)
	}
	steps := [][]string{
		{"ip", "link", "add", podBridge, "type", "bridge"},
		{"ip", "addr", "add", nodeGateway + nodeNetworkMask, "dev", podBridge},
		{"ip", "link", "set", podBridge, "up"},
	}
	for _, n := range nodes {
		ns := n.netns()
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "link", "add", n.hostVeth(), "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "link", "set", n.hostVeth(), "master", podBridge, "up"},
			[]string{"ip", "-n", ns, "addr", "add", n.ip() + nodeNetworkMask, "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			// The node routes between its pods and the other nodes.
			[]string{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
			// Bridged pod traffic passes kube-proxy's rules, as on a
			// kubeadm node.
			[]string{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"},
			[]string{"ip", "route", "add", n.podCIDR(), "via", n.ip(), "dev", podBridge},
		)
		for _, other := range nodes {
			if other != n {
				steps = append(steps, []string{"ip", "-n", ns, "route", "add", other.podCIDR(), "via", other.ip(), "dev", "eth0"})
			}
		}
	}
	for _, step := range steps {
		if err := run(step[0], step[1:]...); err != nil {
			return fmt.Errorf("making the pod network: %w", err)
		}
	}
	return nil
}

// cleanupRealNodes removes whatever realNodesRecord says real nodes made:
// every process left in a node's namespace or its pods' cgroups, their
// mounts, cgroups, namespaces and the bridge; it puts the kernel settings
// back. It does nothing when there is no record.
func cleanupRealNodes() error {
	data, err := os.ReadFile(realNodesRecord)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", realNodesRecord, err)
	}
	var state realNodesState
	if err := json.Unmarshal(data, &state); err != nil {
		return fmt.Errorf("reading %s: %w", realNodesRecord, err)
	}
	var errs []error
	nodes := realNodes(state.Nodes)
	for _, n := range nodes {
		errs = append(errs, killNodeProcesses(n))
	}
	errs = append(errs, unmountUnder(filepath.Join(state.Dir, "nodes")))
	for _, n := range nodes {
		errs = append(errs, removeCgroups(n.cgroupRoot()))
		if _, err := os.Stat(n.netnsPath()); err == nil {
			errs = append(errs, run("ip", "netns", "del", n.netns()))
		}
	}
	if err := exec.Command("ip", "link", "show", podBridge).Run(); err == nil {
		errs = append(errs, run("ip", "link", "del", podBridge))
	}
	for _, path := range state.Created {
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, fmt.Errorf("removing %s, which the nodes made: %w", path, err))
		}
	}
	for key, value := range state.Kernel {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("putting %s back to %s: %w", key, value, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(realNodesRecord); err != nil {
		return fmt.Errorf("removing %s: %w", realNodesRecord, err)
	}
	return nil
}

// killNodeProcesses kills what the node started and still runs: the
// programs in its namespace (kubelet, containerd, its shims, kube-proxy)
// and its containers, in its pods' cgroups.
func killNodeProcesses(n realNode) error {
	pids := cgroupProcs(n.cgroupRoot())
	if _, err := os.Stat(n.netnsPath()); err == nil {
		out, err := exec.Command("ip", "netns", "pids", n.netns()).Output()
		if err != nil {
			return fmt.Errorf("listing the processes of %s: %w", n.netns(), err)
		}
		for _, field := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("killing pid %d of %s: %w", pid, n.name(), err)
		}
	}
	// A cgroup can be removed only once the kernel has reaped its last
	// process.
	deadline := time.Now().Add(stopGrace)
	for len(cgroupProcs(n.cgroupRoot())) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the containers of %s still run %s after SIGKILL", n.name(), stopGrace)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// checkCgroupV1 refuses a machine whose /sys/fs/cgroup is one cgroup v2
// hierarchy: real nodes make their pods' cgroups in v1 hierarchies, as on
// this project's machines, where v1 controllers are mounted beside v2.
func checkCgroupV1() error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return errors.New("real nodes need cgroup v1 controllers mounted under /sys/fs/cgroup (v1, or a v1/v2 hybrid); this machine mounts cgroup v2 alone, which muster-local does not support yet")
	}
	if len(cgroupControllers()) == 0 {
		return errors.New("real nodes need cgroup v1 controllers mounted under /sys/fs/cgroup, and there are none")
	}
	return nil
}

// cgroupControllers are the cgroup v1 hierarchies kubelet makes its pods'
// cgroups in, where this machine mounts them.
func cgroupControllers() []string {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "unified" {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return dirs
}

// cgroupProcs lists every process in a cgroup tree, in every hierarchy.
func cgroupProcs(root string) []int {
	var pids []int
	for _, controller := range cgroupControllers() {
		_ = filepath.WalkDir(filepath.Join(controller, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, field := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(field); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// makeCgroupRoot makes the node's pods' cgroup in every hierarchy, as
// kubelet requires its cgroupRoot to exist; cpusets start with their
// parent's CPUs and memory nodes, or could hold no task.
func makeCgroupRoot(root string) error {
	for _, controller := range cgroupControllers() {
		dir := filepath.Join(controller, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(controller, file))
			if err != nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, file), parent, 0o644); err != nil {
				return fmt.Errorf("setting %s of %s: %w", file, dir, err)
			}
		}
	}
	return nil
}

// removeCgroups removes a cgroup tree, deepest first, once it holds no
// process.
func removeCgroups(root string) error {
	var errs []error
	for _, controller := range cgroupControllers() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(controller, root), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, dir := range dirs {
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount at or under dir, deepest first: the
// containers' root filesystems, volumes and pod namespaces of the nodes.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mounts: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// Spaces and the like are octal escapes in mountinfo.
		point := fields[4]
		if point == dir || strings.HasPrefix(point, dir+"/") {
			points = append(points, point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, point := range points {
		if err := syscall.Unmount(point, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("unmounting %s: %w", point, err)
		}
	}
	return nil
}
