// Package envinject derives, from a group's topology and a member's
// identity, the environment and files that each framework reads to form its
// cluster: TF_CONFIG, MASTER_ADDR and PET_*, DMLC_*, the MPI hostfile and
// OMPI_MCA_* / PRTE_MCA_*, and muster's own MUSTER_*. Its functions are
// pure; the exact bytes are part of the contract, because real frameworks
// parse them.
package envinject

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-dev/muster/pkg/topology"
)

// Paths where a member finds its group's files.
const (
	// FilesDir holds <role>.hosts and cluster.json, from the group's
	// ConfigMap.
	FilesDir = "/etc/muster"
	// HostfilePath is the MPI hostfile.
	HostfilePath = MPIDir + "/" + HostfileKey
)

// Group is one group as envinject sees it.
type Group struct {
	Name      string
	Namespace string
	// UID is the PodGroup's UID: PyTorch's rendezvous id.
	UID      types.UID
	Topology *topology.Topology
	// WorkerSlots is the MPI slots per worker, resolved by the caller:
	// muster.dev/slots, else the worker's nvidia.com/gpu limit, else 1.
	WorkerSlots int32
	// JobSet, when the members are a JobSet's pods (muster.dev/jobset),
	// is how JobSet names them; nil when muster names them.
	JobSet *topology.JobSetNames
	// WorkersAtStart are, in an elastic group, the indices of the workers
	// there are as the member is created: its MUSTER_WORKER_* name them,
	// as a running container's environment cannot follow later changes
	// (the files do). Nil names every worker up to the max.
	WorkersAtStart []int32
}

// Hostname is a member's hostname: <group>-<role>-<index>, or JobSet's.
func (g Group) Hostname(role string, index int32) string {
	if g.JobSet != nil {
		return g.JobSet.Hostname(role, index)
	}
	return topology.MemberName(g.Name, role, index)
}

// Address is a member's stable DNS name through the group's headless
// Service: <group>-<role>-<index>.<group>.<namespace>.svc, or JobSet's
// hostname and Service.
func (g Group) Address(role string, index int32) string {
	return fmt.Sprintf("%s.%s.%s.svc", g.Hostname(role, index), g.ServiceName(), g.Namespace)
}

// Addresses lists the addresses of every pod of a role, by index.
func (g Group) Addresses(role string) []string {
	n := g.Topology.Replicas[role]
	addresses := make([]string, 0, n)
	for i := range n {
		addresses = append(addresses, g.Address(role, i))
	}
	return addresses
}

// CanonicalAddress is a member's name as its own hosts file gives it first,
// Address in the cluster's DNS domain: kubelet writes it so. torchrun's c10d
// rendezvous hosts its store on the member whose own names include the
// endpoint's host, so an endpoint must be named this way to be hosted.
func (g Group) CanonicalAddress(role string, index int32, clusterDomain string) string {
	return g.Address(role, index) + "." + clusterDomain
}

// DNSSearch is the search domain that lets a member resolve its siblings by
// hostname alone.
func (g Group) DNSSearch(clusterDomain string) string {
	return fmt.Sprintf("%s.%s.svc.%s", g.ServiceName(), g.Namespace, clusterDomain)
}

// DefaultClusterDomain is the cluster DNS domain kubelet and CoreDNS use
// unless configured otherwise.
const DefaultClusterDomain = "cluster.local"

// Env is the environment of the member role/index, in a stable order:
// muster's own variables, then the framework's. clusterDomain is the
// cluster's DNS domain.
func Env(g Group, role string, index int32, clusterDomain string) ([]corev1.EnvVar, error) {
	replicas, ok := g.Topology.Replicas[role]
	if !ok && len(g.Topology.Roles) > 0 {
		return nil, fmt.Errorf("role %q is not one of the group's roles %v", role, g.Topology.Roles)
	}
	if ok && index >= replicas {
		return nil, fmt.Errorf("index %d is out of range for role %s, which has %d replicas", index, role, replicas)
	}
	env := musterEnv(g, role, index)
	switch g.Topology.Framework {
	case topology.TensorFlow:
		tf, err := tfConfig(g, role, index)
		if err != nil {
			return nil, err
		}
		env = append(env, envVar("TF_CONFIG", tf))
	case topology.PyTorch:
		env = append(env, pytorchEnv(g, role, index, clusterDomain)...)
	case topology.MPI:
		env = append(env, mpiEnv(g)...)
	case topology.MXNet:
		env = append(env, mxnetEnv(g, role, index)...)
	}
	return env, nil
}

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func itoa[T ~int32 | ~int64 | int](n T) string { return strconv.FormatInt(int64(n), 10) }

// envName turns a role into the part of a variable name: worker-gpu ->
// WORKER_GPU.
func envName(role string) string {
	return strings.ToUpper(strings.ReplaceAll(role, "-", "_"))
}

func musterEnv(g Group, role string, index int32) []corev1.EnvVar {
	env := []corev1.EnvVar{
		envVar("MUSTER_GROUP", g.Name),
		envVar("MUSTER_ROLE", role),
		envVar("MUSTER_INDEX", itoa(index)),
	}
	for _, r := range g.Topology.Roles {
		addresses := g.Addresses(r)
		if g.Topology.Elastic != nil && r == topology.ElasticRole && g.WorkersAtStart != nil {
			addresses = g.addressesOf(r, g.WorkersAtStart)
		}
		env = append(env,
			envVar("MUSTER_"+envName(r)+"_HOSTS", strings.Join(addresses, ",")),
			envVar("MUSTER_"+envName(r)+"_NUM", itoa(len(addresses))))
	}
	return env
}

// tfRole is the name TensorFlow knows a role by: its master is "chief".
func tfRole(role string) string {
	if role == "master" {
		return "chief"
	}
	return role
}

// tfConfig is Kubeflow TFJob's TF_CONFIG: cluster, task, environment, in
// that order, the cluster's roles sorted. The evaluator is listed only in
// its own TF_CONFIG, unless the group opts in: TensorFlow's parameter
// server strategy hangs when an evaluator is in the cluster spec.
func tfConfig(g Group, role string, index int32) (string, error) {
	type task struct {
		Type  string `json:"type"`
		Index int32  `json:"index"`
	}
	config := struct {
		Cluster     map[string][]string `json:"cluster"`
		Task        task                `json:"task"`
		Environment string              `json:"environment"`
	}{Cluster: map[string][]string{}, Task: task{Type: tfRole(role), Index: index}, Environment: "cloud"}
	for _, r := range g.Topology.Roles {
		if r == "evaluator" && role != "evaluator" && !g.Topology.EvaluatorInCluster {
			continue
		}
		var addresses []string
		for _, address := range g.Addresses(r) {
			addresses = append(addresses, fmt.Sprintf("%s:%d", address, g.Topology.Port))
		}
		config.Cluster[tfRole(r)] = addresses
	}
	data, err := json.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("encoding TF_CONFIG: %w", err)
	}
	return string(data), nil
}

func pytorchEnv(g Group, role string, index int32, clusterDomain string) []corev1.EnvVar {
	t := g.Topology
	port := itoa(t.Port)
	common := []corev1.EnvVar{
		envVar("PET_NPROC_PER_NODE", t.NProcPerNode),
		envVar("PET_RDZV_ID", string(g.UID)),
		envVar("PYTHONUNBUFFERED", "1"),
	}
	if t.Elastic != nil {
		return append([]corev1.EnvVar{
			envVar("PET_RDZV_BACKEND", "c10d"),
			envVar("PET_RDZV_ENDPOINT", g.CanonicalAddress("worker", 0, clusterDomain)+":"+port),
			envVar("PET_NNODES", fmt.Sprintf("%d:%d", t.Elastic.Min, t.Elastic.Max)),
		}, common...)
	}
	masters := t.Replicas["master"]
	masterRole := "master"
	if masters == 0 {
		masterRole = "worker"
	}
	rank := index
	if role == "worker" {
		rank = index + masters
	}
	nodes := masters + t.Replicas["worker"]
	worldSize := nodes
	if nproc, err := strconv.ParseInt(t.NProcPerNode, 10, 32); err == nil {
		worldSize = nodes * int32(nproc)
	}
	master := g.Address(masterRole, 0)
	return append([]corev1.EnvVar{
		envVar("MASTER_ADDR", master),
		envVar("MASTER_PORT", port),
		envVar("PET_MASTER_ADDR", master),
		envVar("PET_MASTER_PORT", port),
		envVar("WORLD_SIZE", itoa(worldSize)),
		envVar("RANK", itoa(rank)),
		envVar("PET_NODE_RANK", itoa(rank)),
		envVar("PET_NNODES", itoa(nodes)),
	}, common...)
}

// mpiEnv points each MPI implementation at the hostfile. OpenMPI 4 reads
// the ORTE names, OpenMPI 5 the PRRTE ones; both are set so that either
// finds them, because OpenMPI 5 ignores OMPI_MCA_orte_* and would run on
// one node while reporting success.
func mpiEnv(g Group) []corev1.EnvVar {
	slots := itoa(g.WorkerSlots)
	switch g.Topology.MPIImplementation {
	case "intel":
		return []corev1.EnvVar{envVar("I_MPI_HYDRA_HOST_FILE", HostfilePath)}
	case "mpich":
		return []corev1.EnvVar{envVar("HYDRA_HOST_FILE", HostfilePath)}
	}
	sshArgs := "-o ConnectionAttempts=10"
	return []corev1.EnvVar{
		envVar("OMPI_MCA_orte_default_hostfile", HostfilePath),
		envVar("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
		envVar("OMPI_MCA_plm_rsh_args", sshArgs),
		envVar("OMPI_MCA_orte_set_default_slots", slots),
		envVar("PRTE_MCA_prte_default_hostfile", HostfilePath),
		envVar("PRTE_MCA_prte_keep_fqdn_hostnames", "true"),
		envVar("PRTE_MCA_plm_ssh_args", sshArgs),
		envVar("PRTE_MCA_prte_set_default_slots", slots),
	}
}

func mxnetEnv(g Group, role string, index int32) []corev1.EnvVar {
	t := g.Topology
	env := []corev1.EnvVar{
		envVar("DMLC_PS_ROOT_URI", g.Address("scheduler", 0)),
		envVar("DMLC_PS_ROOT_PORT", itoa(t.Port)),
		envVar("DMLC_NUM_SERVER", itoa(t.Replicas["server"])),
		envVar("DMLC_NUM_WORKER", itoa(t.Replicas["worker"])),
		envVar("DMLC_ROLE", role),
		envVar("DMLC_USE_KUBERNETES", "1"),
	}
	if role == "worker" {
		env = append(env, envVar("DMLC_WORKER_ID", itoa(index)))
	}
	return env
}

// Files are the contents of the group's ConfigMap, by key: <role>.hosts,
// one address per line; cluster.json, the addresses by role; and for MPI
// the hostfile and discover_hosts.sh. runningWorkers are the indices of
// the workers running now: discover_hosts.sh lists them, and so do an
// elastic group's files for its elastic role, which follow the members as
// they come and go. Every other role is listed whole.
func Files(g Group, runningWorkers []int32) (map[string]string, error) {
	files := map[string]string{}
	cluster := map[string][]string{}
	for _, role := range g.Topology.Roles {
		addresses := g.Addresses(role)
		if g.Topology.Elastic != nil && role == topology.ElasticRole {
			addresses = g.addressesOf(role, runningWorkers)
		}
		files[role+".hosts"] = strings.Join(addresses, "\n") + "\n"
		cluster[role] = addresses
	}
	data, err := json.Marshal(cluster)
	if err != nil {
		return nil, fmt.Errorf("encoding cluster.json: %w", err)
	}
	files["cluster.json"] = string(data) + "\n"
	if g.Topology.Framework == topology.MPI {
		files["hostfile"] = Hostfile(g, cluster["worker"])
		files[DiscoverHostsKey] = DiscoverHosts(g, runningWorkers)
	}
	return files, nil
}

// addressesOf lists the addresses of the role's members of these indices,
// in order.
func (g Group) addressesOf(role string, indices []int32) []string {
	addresses := make([]string, 0, len(indices))
	for _, i := range slices.Sorted(slices.Values(indices)) {
		addresses = append(addresses, g.Address(role, i))
	}
	return addresses
}

// Hostfile lists the MPI workers of these addresses with their slots, in
// the syntax of the group's implementation: "host slots=N" for OpenMPI,
// "host:N" for Intel MPI and MPICH.
func Hostfile(g Group, workers []string) string {
	var b strings.Builder
	for _, address := range workers {
		if slices.Contains([]string{"intel", "mpich"}, g.Topology.MPIImplementation) {
			fmt.Fprintf(&b, "%s:%d\n", address, g.WorkerSlots)
		} else {
			fmt.Fprintf(&b, "%s slots=%d\n", address, g.WorkerSlots)
		}
	}
	return b.String()
}
