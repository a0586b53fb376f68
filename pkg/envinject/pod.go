package envinject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/topology"
)

// Where a member finds its MPI files, and the keys that hold them.
const (
	// MPIDir holds the hostfile and discover_hosts.sh.
	MPIDir = "/etc/mpi"
	// SSHDir is where the group's key pair and authorized_keys are
	// mounted: root's ~/.ssh, where ssh and sshd look for them.
	SSHDir = "/root/.ssh"

	HostfileKey      = "hostfile"
	DiscoverHostsKey = "discover_hosts.sh"
	SSHPrivateKeyKey = corev1.SSHAuthPrivateKey
	SSHPublicKeyKey  = "ssh-publickey"
)

// Names of what Apply adds to a pod.
const (
	FilesVolume = "muster-files"
	MPIVolume   = "muster-mpi"
	SSHVolume   = "muster-ssh"
	PortName    = "muster"
)

// GPUResource is the resource whose limit gives an MPI worker its default
// slots.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// ServiceName is the group's headless Service, which gives each member its
// DNS name: muster's, named after the group, or the JobSet's.
func (g Group) ServiceName() string {
	if g.JobSet != nil {
		return g.JobSet.Subdomain
	}
	return g.Name
}

// ConfigMapName is the ConfigMap with the group's files.
func (g Group) ConfigMapName() string { return g.Name + "-muster" }

// SSHSecretName is the Secret with an MPI group's SSH key pair.
func (g Group) SSHSecretName() string { return g.Name + "-muster-ssh" }

// Slots is the MPI slots of each worker: the slots annotation, else the
// nvidia.com/gpu limit of a worker pod when one is known, else 1.
func Slots(t *topology.Topology, worker *corev1.Pod) int32 {
	if t.Slots > 0 {
		return t.Slots
	}
	if worker != nil {
		var gpus int64
		for _, c := range worker.Spec.Containers {
			if limit, ok := c.Resources.Limits[GPUResource]; ok {
				gpus += limit.Value()
			}
		}
		if gpus > 0 {
			return int32(gpus)
		}
	}
	return 1
}

// Apply gives a member's pod what its place in the group needs: hostname and
// subdomain, the environment on every container, the group's files, for MPI
// the hostfile and SSH keys and the workers' DNS search path, and the
// framework's port. It adds only what is missing, so applying it twice is
// applying it once, and a variable or mount a container sets itself is left
// alone. It refuses a hostname or subdomain the pod sets to anything else,
// because the other members reach the pod by those names.
func Apply(pod *corev1.Pod, g Group, m topology.Member, clusterDomain string) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	hostname := g.Hostname(m.Role, m.Index)
	if msgs := validation.IsDNS1123Label(hostname); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "labels").Key(topology.GroupLabel), g.Name,
			fmt.Sprintf("the member's hostname %q must be a DNS label of at most 63 characters (%s); shorten the PodGroup's or the role's name", hostname, strings.Join(msgs, "; "))))
	}
	if pod.Spec.Hostname != "" && pod.Spec.Hostname != hostname {
		errs = append(errs, field.Invalid(spec.Child("hostname"), pod.Spec.Hostname,
			fmt.Sprintf("muster names this member %s, the name its group's other members use; remove spec.hostname or set it to that", hostname)))
	}
	if pod.Spec.Subdomain != "" && pod.Spec.Subdomain != g.ServiceName() {
		errs = append(errs, field.Invalid(spec.Child("subdomain"), pod.Spec.Subdomain,
			fmt.Sprintf("members resolve each other through the group's headless Service %s; remove spec.subdomain or set it to that", g.ServiceName())))
	}
	errs = append(errs, portNameTaken(pod, g.Topology)...)
	env, err := Env(g, m.Role, m.Index, clusterDomain)
	if err != nil {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "labels"), pod.Labels, err.Error()))
	}
	if len(errs) > 0 {
		return errs
	}

	pod.Spec.Hostname = hostname
	pod.Spec.Subdomain = g.ServiceName()
	volumes, mounts := g.volumes()
	for _, v := range volumes {
		if !slices.ContainsFunc(pod.Spec.Volumes, func(have corev1.Volume) bool { return have.Name == v.Name }) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			addEnv(&containers[i], env)
			addMounts(&containers[i], mounts)
		}
	}
	t := g.Topology
	if t.Framework == topology.MPI && m.Role == "worker" {
		addSearch(pod, g.DNSSearch(clusterDomain))
	}
	if t.Port > 0 && !(t.Framework == topology.MPI && m.Role != "worker") {
		addPort(pod, t.Port)
	}
	return nil
}

// volumes are the group's files at FilesDir, and for MPI the hostfile and
// discovery script at MPIDir and the SSH key pair at SSHDir, with the
// modes sshd demands of them.
func (g Group) volumes() ([]corev1.Volume, []corev1.VolumeMount) {
	files := corev1.LocalObjectReference{Name: g.ConfigMapName()}
	volumes := []corev1.Volume{{Name: FilesVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: files},
	}}}
	mounts := []corev1.VolumeMount{{Name: FilesVolume, MountPath: FilesDir, ReadOnly: true}}
	if g.Topology.Framework != topology.MPI {
		return volumes, mounts
	}
	volumes = append(volumes,
		corev1.Volume{Name: MPIVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: files,
			Items: []corev1.KeyToPath{
				{Key: HostfileKey, Path: HostfileKey, Mode: ptr.To[int32](0o444)},
				{Key: DiscoverHostsKey, Path: DiscoverHostsKey, Mode: ptr.To[int32](0o555)},
			},
		}}},
		corev1.Volume{Name: SSHVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: g.SSHSecretName(),
			Items: []corev1.KeyToPath{
				{Key: SSHPrivateKeyKey, Path: "id_rsa", Mode: ptr.To[int32](0o600)},
				{Key: SSHPublicKeyKey, Path: "id_rsa.pub", Mode: ptr.To[int32](0o644)},
				{Key: SSHPublicKeyKey, Path: "authorized_keys", Mode: ptr.To[int32](0o644)},
			},
		}}})
	mounts = append(mounts,
		corev1.VolumeMount{Name: MPIVolume, MountPath: MPIDir, ReadOnly: true},
		corev1.VolumeMount{Name: SSHVolume, MountPath: SSHDir, ReadOnly: true})
	return volumes, mounts
}

func addEnv(c *corev1.Container, env []corev1.EnvVar) {
	for _, e := range env {
		if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
			c.Env = append(c.Env, e)
		}
	}
}

func addMounts(c *corev1.Container, mounts []corev1.VolumeMount) {
	for _, m := range mounts {
		if !slices.ContainsFunc(c.VolumeMounts, func(have corev1.VolumeMount) bool { return have.MountPath == m.MountPath }) {
			c.VolumeMounts = append(c.VolumeMounts, m)
		}
	}
}

func addSearch(pod *corev1.Pod, search string) {
	if pod.Spec.DNSConfig == nil {
		pod.Spec.DNSConfig = &corev1.PodDNSConfig{}
	}
	if !slices.Contains(pod.Spec.DNSConfig.Searches, search) {
		pod.Spec.DNSConfig.Searches = append(pod.Spec.DNSConfig.Searches, search)
	}
}

// portNameTaken refuses a pod whose containers already name another port
// as muster names the framework's: the two would clash.
func portNameTaken(pod *corev1.Pod, t *topology.Topology) field.ErrorList {
	if t.Port == 0 {
		return nil
	}
	for i, c := range pod.Spec.Containers {
		for j, p := range c.Ports {
			if p.Name == PortName && p.ContainerPort != t.Port {
				return field.ErrorList{field.Invalid(field.NewPath("spec", "containers").Index(i).Child("ports").Index(j).Child("name"), p.Name,
					fmt.Sprintf("muster names the group's port %d %q; rename this port, or make it %d", t.Port, PortName, t.Port))}
			}
		}
	}
	return nil
}

// addPort declares the framework's port on the first container, unless a
// container already declares it.
func addPort(pod *corev1.Pod, port int32) {
	for _, c := range pod.Spec.Containers {
		if slices.ContainsFunc(c.Ports, func(have corev1.ContainerPort) bool { return have.ContainerPort == port }) {
			return
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return
	}
	first := &pod.Spec.Containers[0]
	first.Ports = append(first.Ports, corev1.ContainerPort{Name: PortName, ContainerPort: port, Protocol: corev1.ProtocolTCP})
}

// DiscoverHosts is the script elastic Horovod runs to find its hosts: one
// "address:slots" line per worker that is running now, by index.
func DiscoverHosts(g Group, runningWorkers []int32) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, address := range g.addressesOf("worker", runningWorkers) {
		fmt.Fprintf(&b, "echo %s:%d\n", address, g.WorkerSlots)
	}
	return b.String()
}
