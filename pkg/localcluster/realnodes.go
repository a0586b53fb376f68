package localcluster

import (
	"archive/tar"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Real nodes run these, from bin/ (make tools) and Debian's packages
// (runc, the CNI plugins, iptables, conntrack, iproute2's ip and
// util-linux's nsenter).
var realNodePrograms = []string{"containerd", "containerd-shim-runc-v2", "ctr", "kubelet", "kube-proxy", "kube-scheduler"}

const (
	// localImageRegistry names the images the nodes import from
	// ImagesDir; nothing is ever pulled from it.
	localImageRegistry = "muster.local"
	// pauseImage is every pod's sandbox: hack/pause, built by make images.
	pauseImage = "muster-pause"
	// cniPluginsDir is where Debian's containernetworking-plugins puts
	// bridge, host-local, loopback and portmap.
	cniPluginsDir = "/usr/lib/cni"
	// exampleImagesDir is where, under ImagesDir, make example-images
	// writes the example workloads' images.
	exampleImagesDir = "examples"
	// nodeImportTimeout bounds importing every image into one node.
	nodeImportTimeout = 10 * time.Minute
)

// LocalImage is the name a real node knows an image of ImagesDir by,
// from the archive's name and the tag it carries.
func LocalImage(imagesDir, name string) (string, error) {
	path := filepath.Join(imagesDir, name+".tar")
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(imagesDir, exampleImagesDir, name+".tar")
	}
	tag, err := archiveTag(path)
	if err != nil {
		return "", err
	}
	return localImageRegistry + "/" + name + ":" + tag, nil
}

// archiveTag reads the tag an OCI archive of hack/images gives its image.
func archiveTag(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("opening image %s (make images builds it): %w", path, err)
	}
	defer f.Close()
	r := tar.NewReader(f)
	for {
		header, err := r.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("image %s has no index.json: it is not an OCI archive", path)
		}
		if err != nil {
			return "", fmt.Errorf("reading image %s: %w", path, err)
		}
		if header.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(r).Decode(&index); err != nil {
			return "", fmt.Errorf("reading the index of image %s: %w", path, err)
		}
		for _, m := range index.Manifests {
			if tag := m.Annotations["org.opencontainers.image.ref.name"]; tag != "" {
				return tag, nil
			}
		}
		return "", fmt.Errorf("image %s names no tag in its index", path)
	}
}

// nodeDir holds one real node's state, mounts and configuration.
func (s *starter) nodeDir(n realNode, parts ...string) string {
	return s.path(append([]string{"nodes", n.name()}, parts...)...)
}

// inNode runs a program in the node's network namespace, and nothing else
// of it: the node's mounts are the machine's, so that kubelet's volumes
// are what containerd mounts into containers.
func inNode(n realNode) []string {
	return []string{"nsenter", "--net=" + n.netnsPath(), "--"}
}

// nodeEnv finds the runc shim in bin/ and runc, iptables and the like
// where Debian puts them.
func (s *starter) nodeEnv() []string {
	return []string{"PATH=" + s.binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

func (s *starter) startPodNetwork(ctx context.Context) error {
	if err := checkCgroupV1(); err != nil {
		return err
	}
	lock, err := takeRealNodesLock(ctx, s.logf)
	if err != nil {
		return err
	}
	s.cluster.locks = append(s.cluster.locks, lock)
	s.cluster.RealNodes = s.opts.RealNodes
	if err := s.cluster.save(); err != nil {
		return err
	}
	return setUpPodNetwork(s.cluster.Dir, realNodes(s.opts.RealNodes))
}

// startRealNodes starts each node's containerd, loads it with the images,
// and starts its kubelet, then waits until every node is Ready, and starts
// kube-proxy on each.
func (s *starter) startRealNodes(ctx context.Context) error {
	images, err := filepath.Glob(filepath.Join(s.opts.ImagesDir, "*.tar"))
	if err != nil || len(images) == 0 {
		return fmt.Errorf("no images in %s: run make images first", s.opts.ImagesDir)
	}
	for _, name := range s.opts.ExampleImages {
		image := filepath.Join(s.opts.ImagesDir, exampleImagesDir, name+".tar")
		if _, err := os.Stat(image); err != nil {
			return fmt.Errorf("example image %s is not in %s: run make example-images first", name, filepath.Dir(image))
		}
		images = append(images, image)
	}
	for _, n := range realNodes(s.opts.RealNodes) {
		if err := s.startContainerd(ctx, n, images); err != nil {
			return fmt.Errorf("%s: %w", n.name(), err)
		}
		if err := s.startKubelet(n); err != nil {
			return fmt.Errorf("%s: %w", n.name(), err)
		}
	}
	for _, n := range realNodes(s.opts.RealNodes) {
		if err := s.waitNodeReady(ctx, n); err != nil {
			return err
		}
		if err := s.startKubeProxy(ctx, n); err != nil {
			return fmt.Errorf("%s: %w", n.name(), err)
		}
	}
	return nil
}

//go:embed realnode/containerd.toml
var containerdConfig string

//go:embed realnode/kubelet.yaml
var kubeletConfig string

//go:embed realnode/kube-proxy.yaml
var kubeProxyConfig string

//go:embed realnode/cni.conflist
var cniConfig string

// nodeConfig is what the node's configuration templates fill in.
type nodeConfig struct {
	Dir, Name, IP, PodCIDR, CgroupRoot, Runc, CNIPlugins, PauseImage string
	Kubeconfig, ClientCA, ClusterDNS, ClusterCIDR                    string
}

func (s *starter) nodeConfig(n realNode) (nodeConfig, error) {
	pause, err := LocalImage(s.opts.ImagesDir, pauseImage)
	if err != nil {
		return nodeConfig{}, err
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return nodeConfig{}, errors.New("runc is not installed: make tools installs it from Debian's packages")
	}
	return nodeConfig{
		Dir: s.nodeDir(n), Name: n.name(), IP: n.ip(), PodCIDR: n.podCIDR(), CgroupRoot: n.cgroupRoot(),
		Runc: runc, CNIPlugins: cniPluginsDir, PauseImage: pause,
		Kubeconfig: s.path("kubelet.kubeconfig"), ClientCA: s.pki.caCertFile,
		ClusterDNS: clusterDNSIP, ClusterCIDR: podNetworkCIDR,
	}, nil
}

func writeTemplate(path, text string, data any) error {
	t, err := template.New(filepath.Base(path)).Option("missingkey=error").Parse(text)
	if err != nil {
		return fmt.Errorf("parsing the template of %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := t.Execute(f, data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func (s *starter) startContainerd(ctx context.Context, n realNode, images []string) error {
	config, err := s.nodeConfig(n)
	if err != nil {
		return err
	}
	for file, text := range map[string]string{"containerd/config.toml": containerdConfig, "cni/10-pods.conflist": cniConfig} {
		if err := writeTemplate(s.nodeDir(n, file), text, config); err != nil {
			return err
		}
	}
	socket := s.nodeDir(n, "containerd", "containerd.sock")
	p, err := s.startNode(n, "containerd", []string{"--config=" + s.nodeDir(n, "containerd", "config.toml")}, "")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, p, "containerd's socket", func(context.Context) bool {
		return exec.CommandContext(ctx, filepath.Join(s.binDir, "ctr"), "--address", socket, "version").Run() == nil
	}); err != nil {
		return err
	}
	importCtx, cancel := context.WithTimeout(ctx, nodeImportTimeout)
	defer cancel()
	for _, image := range images {
		name := strings.TrimSuffix(filepath.Base(image), ".tar")
		out, err := exec.CommandContext(importCtx, filepath.Join(s.binDir, "ctr"), "--address", socket, "--namespace", "k8s.io",
			"images", "import", "--base-name", localImageRegistry+"/"+name, image).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing image %s: %w: %s", image, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func (s *starter) startKubelet(n realNode) error {
	config, err := s.nodeConfig(n)
	if err != nil {
		return err
	}
	if err := writeTemplate(s.nodeDir(n, "kubelet", "config.yaml"), kubeletConfig, config); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.cgroupRoot()); err != nil {
		return err
	}
	_, err = s.startNode(n, "kubelet", []string{
		"--config=" + s.nodeDir(n, "kubelet", "config.yaml"),
		"--kubeconfig=" + config.Kubeconfig,
		"--root-dir=" + s.nodeDir(n, "kubelet", "root"),
		"--cert-dir=" + s.nodeDir(n, "kubelet", "pki"),
		"--hostname-override=" + n.name(),
		"--node-ip=" + n.ip(),
		"--v=1",
	}, "http://"+n.ip()+":10248/healthz")
	return err
}

func (s *starter) startKubeProxy(ctx context.Context, n realNode) error {
	config, err := s.nodeConfig(n)
	if err != nil {
		return err
	}
	if err := writeTemplate(s.nodeDir(n, "kube-proxy.yaml"), kubeProxyConfig, config); err != nil {
		return err
	}
	p, err := s.startNode(n, "kube-proxy", []string{"--config=" + s.nodeDir(n, "kube-proxy.yaml"), "--v=1"}, "http://"+n.ip()+":10256/healthz")
	if err != nil {
		return err
	}
	return s.waitHealthy(ctx, p)
}

// startNode starts one program of a real node in its namespace; its
// process is named after both.
func (s *starter) startNode(n realNode, program string, args []string, health string) (*Process, error) {
	p, err := startProcess(program+"-"+n.name(), filepath.Join(s.binDir, program), args, s.nodeEnv(), inNode(n), s.path("logs"), s.opts.Detach)
	if err != nil {
		return nil, err
	}
	p.Health = health
	s.cluster.Processes = append(s.cluster.Processes, p)
	return p, s.cluster.save()
}

func (s *starter) waitNodeReady(ctx context.Context, n realNode) error {
	var kubelet *Process
	for _, p := range s.cluster.Processes {
		if p.Name == "kubelet-"+n.name() {
			kubelet = p
		}
	}
	return waitFor(ctx, kubelet, n.name()+" Ready", func(ctx context.Context) bool {
		node, err := s.client.CoreV1().Nodes().Get(ctx, n.name(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	})
}

// startDefaultScheduler runs kube-scheduler as the cluster's default
// scheduler, as a control plane does: it places muster's own pods and
// CoreDNS, which name no scheduler.
func (s *starter) startDefaultScheduler(ctx context.Context) error {
	port := s.ports.defaultScheduler
	p, err := s.start("kube-scheduler", []string{
		"--kubeconfig=" + s.path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig=" + s.path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig=" + s.path("controller-manager.kubeconfig"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=1",
	}, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz")
	if err != nil {
		return err
	}
	return s.waitHealthy(ctx, p)
}
