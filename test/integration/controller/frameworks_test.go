package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestTensorFlow: 2 ps and 3 workers. Every TF_CONFIG parses, lists both
// roles with the pods' addresses and port, and names the pod's own task.
func TestTensorFlow(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.CreatePodGroup(t, ns, "tf", 5, map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=2,worker=3"})
	pods := createRoles(t, ns, "tf", []string{"ps", "worker"}, map[string]int{"ps": 2, "worker": 3})

	wantCluster := map[string][]string{
		"ps":     {"tf-ps-0.tf." + ns + ".svc:2222", "tf-ps-1.tf." + ns + ".svc:2222"},
		"worker": {"tf-worker-0.tf." + ns + ".svc:2222", "tf-worker-1.tf." + ns + ".svc:2222", "tf-worker-2.tf." + ns + ".svc:2222"},
	}
	for name, pod := range pods {
		raw, ok := env(pod, "TF_CONFIG")
		if !ok {
			t.Fatalf("%s has no TF_CONFIG", name)
		}
		var config struct {
			Cluster map[string][]string
			Task    struct {
				Type  string
				Index int
			}
			Environment string
		}
		if err := json.Unmarshal([]byte(raw), &config); err != nil {
			t.Fatalf("%s: TF_CONFIG does not parse: %v\n%s", name, err, raw)
		}
		if fmt.Sprint(config.Cluster) != fmt.Sprint(wantCluster) {
			t.Errorf("%s: cluster = %v, want %v", name, config.Cluster, wantCluster)
		}
		role, index := pod.Labels[topology.RoleLabel], pod.Labels[topology.IndexLabel]
		if config.Task.Type != role || strconv.Itoa(config.Task.Index) != index {
			t.Errorf("%s: task = %+v, want %s %s", name, config.Task, role, index)
		}
		if !strings.HasPrefix(raw, `{"cluster":`) || config.Environment != "cloud" {
			t.Errorf("%s: TF_CONFIG is not in TFJob's shape: %s", name, raw)
		}
		if pod.Spec.Hostname != name || pod.Spec.Subdomain != "tf" {
			t.Errorf("%s: hostname %q subdomain %q, want %q and tf", name, pod.Spec.Hostname, pod.Spec.Subdomain, name)
		}
	}
	svc := service(t, ns, "tf")
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector[topology.GroupLabel] != "tf" {
		t.Errorf("Service tf is not the group's headless Service: %+v", svc.Spec)
	}
	ps := configMap(t, ns, "tf-muster").Data["ps.hosts"]
	if ps != "tf-ps-0.tf."+ns+".svc\ntf-ps-1.tf."+ns+".svc\n" {
		t.Errorf("ps.hosts = %q", ps)
	}
}

// TestPyTorch: 1 master and 3 workers, static; and 3 workers, elastic 2:3.
func TestPyTorch(t *testing.T) {
	t.Run("static", func(t *testing.T) {
		ns := framework.NewNamespace(t)
		pg := framework.CreatePodGroup(t, ns, "pt", 4, map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=3"})
		pods := createRoles(t, ns, "pt", []string{"master", "worker"}, map[string]int{"master": 1, "worker": 3})
		master := "pt-master-0.pt." + ns + ".svc"
		for name, rank := range map[string]string{"pt-master-0": "0", "pt-worker-0": "1", "pt-worker-1": "2", "pt-worker-2": "3"} {
			wantEnv(t, pods[name], map[string]string{
				"MASTER_ADDR": master, "MASTER_PORT": "23456", "PET_MASTER_ADDR": master, "PET_MASTER_PORT": "23456",
				"WORLD_SIZE": "4", "RANK": rank, "PET_NODE_RANK": rank, "PET_NNODES": "4", "PET_NPROC_PER_NODE": "auto",
				"PET_RDZV_ID": string(pg.UID), "PYTHONUNBUFFERED": "1", "PET_RDZV_BACKEND": "",
			})
		}
	})
	t.Run("elastic", func(t *testing.T) {
		ns := framework.NewNamespace(t)
		pg := framework.CreatePodGroup(t, ns, "pt", 2, map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "worker=3", topology.ElasticAnnotation: "2:3"})
		pods := createRoles(t, ns, "pt", []string{"worker"}, map[string]int{"worker": 3})
		for _, pod := range pods {
			wantEnv(t, pod, map[string]string{
				"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "pt-worker-0.pt." + ns + ".svc.cluster.local:23456", "PET_RDZV_ID": string(pg.UID),
				"PET_NNODES": "2:3", "MASTER_ADDR": "", "RANK": "", "WORLD_SIZE": "",
			})
		}
	})
}

// TestMPI: 1 launcher and 2 workers with 4 slots. The launcher runs after
// its workers, and gets the hostfile, the OMPI_MCA_* variables and the key
// pair; the workers resolve each other through the group's domain.
func TestMPI(t *testing.T) {
	t.Run("openmpi", func(t *testing.T) {
		ns := framework.NewNamespace(t)
		framework.NodePool(t, ns, 3, "4")
		framework.CreatePodGroup(t, ns, "mpi", 3, map[string]string{
			topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2", topology.SlotsAnnotation: "4"})
		var launcher *corev1.Pod
		for _, pod := range []*corev1.Pod{member(ns, "mpi", "launcher", 0).Obj(), member(ns, "mpi", "worker", 0).Obj(), member(ns, "mpi", "worker", 1).Obj()} {
			pod.Spec.SchedulerName = localcluster.SchedulerName
			created := create(t, framework.InPool(pod, ns))
			if created.Name == "mpi-launcher-0" {
				launcher = created
			}
		}
		wantEnv(t, launcher, map[string]string{
			"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
			"OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10", "OMPI_MCA_orte_set_default_slots": "4",
			"PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile",
		})
		checkSSHMount(t, launcher, "mpi")
		wantHostfile := fmt.Sprintf("mpi-worker-0.mpi.%[1]s.svc slots=4\nmpi-worker-1.mpi.%[1]s.svc slots=4\n", ns)
		if got := configMap(t, ns, "mpi-muster").Data["hostfile"]; got != wantHostfile {
			t.Errorf("hostfile = %q, want %q", got, wantHostfile)
		}
		checkKeyPair(t, secret(t, ns, "mpi-muster-ssh"))

		for _, name := range []string{"mpi-worker-0", "mpi-worker-1"} {
			worker := framework.WaitForPod(t, ns, name, "running", framework.IsRunning)
			if worker.Spec.DNSConfig == nil || !slices.Contains(worker.Spec.DNSConfig.Searches, "mpi."+ns+".svc.cluster.local") {
				t.Errorf("%s: DNS search path %v lacks the group's domain", name, worker.Spec.DNSConfig)
			}
		}
		wantDiscovered := fmt.Sprintf("#!/bin/sh\necho mpi-worker-0.mpi.%[1]s.svc:4\necho mpi-worker-1.mpi.%[1]s.svc:4\n", ns)
		framework.Eventually(t, "discover_hosts.sh to list both running workers", func(ctx context.Context) (string, error) {
			got := configMap(t, ns, "mpi-muster").Data["discover_hosts.sh"]
			if got != wantDiscovered {
				return got, fmt.Errorf("discover_hosts.sh is %q", got)
			}
			return got, nil
		})
		framework.WaitForPod(t, ns, "mpi-launcher-0", "running after its workers", framework.IsRunning)
	})
	t.Run("intel-slots-from-gpus", func(t *testing.T) {
		ns := framework.NewNamespace(t)
		framework.CreatePodGroup(t, ns, "impi", 3, map[string]string{
			topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2", topology.MPIImplementationAnnotation: "intel"})
		for i := range 2 {
			worker := member(ns, "impi", "worker", i).Obj()
			worker.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
			create(t, worker)
		}
		launcher := create(t, member(ns, "impi", "launcher", 0).Obj())
		wantEnv(t, launcher, map[string]string{"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile", "OMPI_MCA_orte_default_hostfile": ""})
		wantHostfile := fmt.Sprintf("impi-worker-0.impi.%[1]s.svc:4\nimpi-worker-1.impi.%[1]s.svc:4\n", ns)
		framework.Eventually(t, "the hostfile to give each worker its 4 GPUs as slots", func(ctx context.Context) (string, error) {
			got := configMap(t, ns, "impi-muster").Data["hostfile"]
			if got != wantHostfile {
				return got, fmt.Errorf("hostfile is %q, want %q", got, wantHostfile)
			}
			return got, nil
		})
	})
}

// checkSSHMount checks that the group's Secret is mounted at ~/.ssh with
// the file names and modes ssh and sshd accept.
func checkSSHMount(t *testing.T, pod *corev1.Pod, group string) {
	t.Helper()
	var source *corev1.SecretVolumeSource
	var volumeName string
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == group+"-muster-ssh" {
			source, volumeName = v.Secret, v.Name
		}
	}
	if source == nil {
		t.Fatalf("%s does not mount Secret %s-muster-ssh: %+v", pod.Name, group, pod.Spec.Volumes)
	}
	modes := map[string]int32{}
	for _, item := range source.Items {
		modes[item.Path] = ptr.Deref(item.Mode, -1)
	}
	want := map[string]int32{"id_rsa": 0o600, "id_rsa.pub": 0o644, "authorized_keys": 0o644}
	if fmt.Sprint(modes) != fmt.Sprint(want) {
		t.Errorf("%s: SSH files and modes %v, want %v", pod.Name, modes, want)
	}
	if !slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == volumeName && m.MountPath == "/root/.ssh"
	}) {
		t.Errorf("%s: the keys are not mounted at /root/.ssh: %+v", pod.Name, pod.Spec.Containers[0].VolumeMounts)
	}
}

// checkKeyPair checks that the Secret holds a private key and the public
// key that belongs to it.
func checkKeyPair(t *testing.T, s *corev1.Secret) {
	t.Helper()
	private, err := ssh.ParsePrivateKey(s.Data["ssh-privatekey"])
	if err != nil {
		t.Fatalf("Secret %s: ssh-privatekey does not parse: %v", s.Name, err)
	}
	public, _, _, _, err := ssh.ParseAuthorizedKey(s.Data["ssh-publickey"])
	if err != nil {
		t.Fatalf("Secret %s: ssh-publickey does not parse: %v", s.Name, err)
	}
	if string(private.PublicKey().Marshal()) != string(public.Marshal()) {
		t.Errorf("Secret %s: the public key is not the private key's", s.Name)
	}
}

// TestMXNet: 1 scheduler, 2 servers and 2 workers; DMLC_* per role.
func TestMXNet(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.CreatePodGroup(t, ns, "mx", 5, map[string]string{topology.FrameworkAnnotation: "mxnet", topology.RolesAnnotation: "scheduler=1,server=2,worker=2"})
	pods := createRoles(t, ns, "mx", []string{"scheduler", "server", "worker"}, map[string]int{"scheduler": 1, "server": 2, "worker": 2})
	for name, pod := range pods {
		role := pod.Labels[topology.RoleLabel]
		workerID := ""
		if role == "worker" {
			workerID = pod.Labels[topology.IndexLabel]
		}
		t.Run(name, func(t *testing.T) {
			wantEnv(t, pod, map[string]string{
				"DMLC_PS_ROOT_URI": "mx-scheduler-0.mx." + ns + ".svc", "DMLC_PS_ROOT_PORT": "9091",
				"DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "2", "DMLC_ROLE": role, "DMLC_USE_KUBERNETES": "1",
				"DMLC_WORKER_ID": workerID,
			})
		})
	}
}
