package envinject

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/topology"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

type member struct {
	role  string
	index int32
}

// TestGolden renders, for each framework case, the environment of its
// members and the group's files, and compares the bytes with
// testdata/<case>.golden. Run with -update to rewrite them, then read the
// diff: these bytes are what the frameworks parse.
func TestGolden(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		slots       int32
		members     []member
		// workersAtStart are an elastic group's workers as its members
		// are created.
		workersAtStart []int32
	}{
		{
			name:        "tensorflow",
			annotations: map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=2,master=1,worker=2,evaluator=1"},
			members:     []member{{"ps", 1}, {"master", 0}, {"worker", 1}, {"evaluator", 0}},
		},
		{
			name: "tensorflow-evaluator-in-cluster",
			annotations: map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "chief=1,worker=1,evaluator=1",
				topology.TFEvaluatorAnnotation: "cluster", topology.PortAnnotation: "3333"},
			members: []member{{"worker", 0}},
		},
		{
			name:        "pytorch",
			annotations: map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=2", topology.NProcPerNodeAnnotation: "4"},
			members:     []member{{"master", 0}, {"worker", 1}},
		},
		{
			name:        "pytorch-nproc-auto",
			annotations: map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=2"},
			members:     []member{{"worker", 0}},
		},
		{
			name:           "pytorch-elastic",
			annotations:    map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "worker=3", topology.ElasticAnnotation: "2:3"},
			members:        []member{{"worker", 1}},
			workersAtStart: []int32{1, 0},
		},
		{
			name:        "mpi-openmpi",
			annotations: map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"},
			slots:       2,
			members:     []member{{"launcher", 0}, {"worker", 1}},
		},
		{
			name:        "mpi-intel",
			annotations: map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2", topology.MPIImplementationAnnotation: "intel"},
			slots:       8,
			members:     []member{{"launcher", 0}},
		},
		{
			name:        "mpi-mpich",
			annotations: map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2", topology.MPIImplementationAnnotation: "mpich"},
			slots:       1,
			members:     []member{{"launcher", 0}},
		},
		{
			name:        "mxnet",
			annotations: map[string]string{topology.FrameworkAnnotation: "mxnet", topology.RolesAnnotation: "scheduler=1,server=2,worker=2"},
			members:     []member{{"scheduler", 0}, {"server", 1}, {"worker", 1}},
		},
		{
			name:        "generic",
			annotations: map[string]string{topology.RolesAnnotation: "head=1,worker-gpu=2"},
			members:     []member{{"worker-gpu", 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, errs := topology.Parse(tt.annotations)
			require.Empty(t, errs)
			g := Group{Name: "job", Namespace: "team-a", UID: "2f1c8a4e-uid", Topology: topo, WorkerSlots: tt.slots, WorkersAtStart: tt.workersAtStart}
			var out strings.Builder
			for _, m := range tt.members {
				env, err := Env(g, m.role, m.index, DefaultClusterDomain)
				require.NoError(t, err)
				fmt.Fprintf(&out, "# env of %s\n", g.Hostname(m.role, m.index))
				for _, e := range env {
					fmt.Fprintf(&out, "%s=%s\n", e.Name, e.Value)
				}
			}
			shown := tt.members[len(tt.members)-1]
			pod := st.MakePod().Namespace("team-a").Name("p").Container("trainer:1").Obj()
			require.Empty(t, Apply(pod, g, topology.Member{Role: shown.role, Index: shown.index}, "cluster.local"))
			pod.Spec.Containers[0].Env = nil
			spec, err := yaml.Marshal(pod.Spec)
			require.NoError(t, err)
			fmt.Fprintf(&out, "# pod spec of %s, its env as above\n%s", g.Hostname(shown.role, shown.index), spec)
			files, err := Files(g, []int32{1, 0})
			require.NoError(t, err)
			keys := make([]string, 0, len(files))
			for key := range files {
				keys = append(keys, key)
			}
			slices.Sort(keys)
			for _, key := range keys {
				fmt.Fprintf(&out, "# file %s\n%s", key, files[key])
			}

			path := filepath.Join("testdata", tt.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(out.String()), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./pkg/envinject -update to create it")
			assert.Equal(t, string(want), out.String())
		})
	}
}

func TestEnvRefusesAnUnknownMember(t *testing.T) {
	topo, errs := topology.Parse(map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	require.Empty(t, errs)
	g := Group{Name: "job", Namespace: "team-a", Topology: topo, WorkerSlots: 1}
	_, err := Env(g, "workers", 0, DefaultClusterDomain)
	assert.EqualError(t, err, `role "workers" is not one of the group's roles [launcher worker]`)
	_, err = Env(g, "worker", 2, DefaultClusterDomain)
	assert.EqualError(t, err, "index 2 is out of range for role worker, which has 2 replicas")
}

func TestDNSSearch(t *testing.T) {
	g := Group{Name: "job", Namespace: "team-a"}
	assert.Equal(t, "job.team-a.svc.cluster.local", g.DNSSearch("cluster.local"))
	assert.Equal(t, "job-worker-3.job.team-a.svc", g.Address("worker", 3))
}

func TestAJobSetsMembersKeepJobSetsNames(t *testing.T) {
	topo, errs := topology.Parse(map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=4", topology.JobSetAnnotation: "js"})
	require.Empty(t, errs)
	g := Group{Name: "job", Namespace: "team-a", Topology: topo, WorkerSlots: 1,
		JobSet: &topology.JobSetNames{JobSet: "js", Subdomain: "net", PodsPerJob: map[string]int32{"launcher": 1, "worker": 2}}}
	assert.Equal(t, "net", g.ServiceName())
	assert.Equal(t, "net.team-a.svc.cluster.local", g.DNSSearch("cluster.local"))
	assert.Equal(t, "js-worker-1-1.net.team-a.svc", g.Address("worker", 3))
	files, err := Files(g, []int32{3})
	require.NoError(t, err)
	assert.Equal(t, "js-worker-0-0.net.team-a.svc slots=1\njs-worker-0-1.net.team-a.svc slots=1\njs-worker-1-0.net.team-a.svc slots=1\njs-worker-1-1.net.team-a.svc slots=1\n", files["hostfile"])
	assert.Equal(t, "#!/bin/sh\necho js-worker-1-1.net.team-a.svc:1\n", files[DiscoverHostsKey])

	pod := &corev1.Pod{Spec: corev1.PodSpec{Hostname: "js-worker-1-0", Subdomain: "net", Containers: []corev1.Container{{Name: "main"}}}}
	require.Empty(t, Apply(pod, g, topology.Member{Role: "worker", Index: 2}, "cluster.local"), "JobSet's hostname and subdomain are the member's")
	assert.Equal(t, "js-worker-1-0", pod.Spec.Hostname)
}
