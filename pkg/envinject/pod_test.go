package envinject

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-dev/muster/pkg/topology"
)

func mpiGroup(t *testing.T, name string) Group {
	t.Helper()
	topo, errs := topology.Parse(map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	require.Empty(t, errs)
	return Group{Name: name, Namespace: "team-a", Topology: topo, WorkerSlots: 4}
}

func TestApplyIsIdempotent(t *testing.T) {
	g := mpiGroup(t, "job")
	pod := st.MakePod().Namespace("team-a").Name("p").Container("trainer:1").Container("sidecar:1").Obj()
	require.Empty(t, Apply(pod, g, topology.Member{Role: "worker", Index: 0}, "cluster.local"))
	once := pod.DeepCopy()
	require.Empty(t, Apply(pod, g, topology.Member{Role: "worker", Index: 0}, "cluster.local"))
	assert.Equal(t, once, pod)
	for _, c := range pod.Spec.Containers {
		assert.Len(t, c.VolumeMounts, 3, "every container gets the files, the hostfile and the keys")
	}
	assert.Len(t, pod.Spec.Containers[0].Ports, 1, "the port is declared once, on the first container")
	assert.Empty(t, pod.Spec.Containers[1].Ports)
}

func TestApplyLeavesWhatTheContainerSets(t *testing.T) {
	g := mpiGroup(t, "job")
	pod := st.MakePod().Namespace("team-a").Name("p").Container("trainer:1").Obj()
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1"}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OMPI_MCA_plm_rsh_args", Value: "-p 2222"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "own-keys", MountPath: SSHDir}}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "sshd", ContainerPort: 22}}

	require.Empty(t, Apply(pod, g, topology.Member{Role: "worker", Index: 1}, "cluster.local"))
	main := pod.Spec.Containers[0]
	var rshArgs []string
	for _, e := range main.Env {
		if e.Name == "OMPI_MCA_plm_rsh_args" {
			rshArgs = append(rshArgs, e.Value)
		}
	}
	assert.Equal(t, []string{"-p 2222"}, rshArgs, "the container's own value stays, and is not repeated")
	assert.Contains(t, main.Env, corev1.EnvVar{Name: "MUSTER_INDEX", Value: "1"})
	assert.Equal(t, "own-keys", main.VolumeMounts[0].Name, "the container's own mount at ~/.ssh stays")
	assert.Len(t, main.VolumeMounts, 3)
	assert.Equal(t, []corev1.ContainerPort{{Name: "sshd", ContainerPort: 22}}, main.Ports)
	assert.Contains(t, pod.Spec.InitContainers[0].Env, corev1.EnvVar{Name: "MUSTER_ROLE", Value: "worker"}, "init containers get the environment too")
}

func TestApplyRefuses(t *testing.T) {
	tests := []struct {
		name      string
		group     string
		pod       *corev1.Pod
		member    topology.Member
		wantField string
		wantFix   string
	}{
		{
			name: "another hostname", group: "job",
			pod:    st.MakePod().Name("p").Container("c").Obj(),
			member: topology.Member{Role: "worker", Index: 0}, wantField: "spec.hostname", wantFix: "muster names this member job-worker-0",
		},
		{
			name: "another subdomain", group: "job",
			pod:    st.MakePod().Name("p").Container("c").Obj(),
			member: topology.Member{Role: "worker", Index: 0}, wantField: "spec.subdomain", wantFix: "headless Service job",
		},
		{
			name: "a hostname longer than a DNS label", group: "a-group-name-that-is-much-too-long-for-a-hostname-of-its-members",
			pod:    st.MakePod().Name("p").Container("c").Obj(),
			member: topology.Member{Role: "worker", Index: 0}, wantField: "metadata.labels[scheduling.x-k8s.io/pod-group]", wantFix: "shorten",
		},
		{
			name: "an index out of range", group: "job",
			pod:    st.MakePod().Name("p").Container("c").Obj(),
			member: topology.Member{Role: "worker", Index: 2}, wantField: "metadata.labels", wantFix: "out of range",
		},
	}
	tests[0].pod.Spec.Hostname = "trainer"
	tests[1].pod.Spec.Subdomain = "trainers"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			errs := Apply(tt.pod, mpiGroup(t, tt.group), tt.member, "cluster.local")
			require.Len(t, errs, 1)
			assert.Equal(t, tt.wantField, errs[0].Field)
			assert.Contains(t, errs[0].Error(), tt.wantFix)
			assert.Equal(t, before, tt.pod, "a refused pod is not changed")
		})
	}
}

func TestSlots(t *testing.T) {
	parse := func(annotations map[string]string) *topology.Topology {
		topo, errs := topology.Parse(annotations)
		require.Empty(t, errs)
		return topo
	}
	mpi := map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}
	withSlots := map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2", topology.SlotsAnnotation: "3"}
	gpuWorker := st.MakePod().Name("w").Container("c").Obj()
	gpuWorker.Spec.Containers[0].Resources.Limits = corev1.ResourceList{GPUResource: resource.MustParse("8")}
	tests := []struct {
		name   string
		topo   *topology.Topology
		worker *corev1.Pod
		want   int32
	}{
		{"annotation wins", parse(withSlots), gpuWorker, 3},
		{"the worker's GPUs", parse(mpi), gpuWorker, 8},
		{"a worker without GPUs", parse(mpi), st.MakePod().Name("w").Container("c").Obj(), 1},
		{"no worker known", parse(mpi), nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Slots(tt.topo, tt.worker))
		})
	}
}

func TestApplyRefusesAPortNamedLikeMusters(t *testing.T) {
	g := sizedGroup(t, "pytorch", "master=1,worker=1")
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080}, {Name: PortName, ContainerPort: 9000},
	}}}}}
	errs := Apply(pod, g, topology.Member{Role: "worker", Index: 0}, "cluster.local")
	require.Len(t, errs, 1)
	assert.Equal(t, `spec.containers[0].ports[1].name: Invalid value: "muster": muster names the group's port 23456 "muster"; rename this port, or make it 23456`, errs[0].Error())
}
