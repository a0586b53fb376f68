package conformance

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

// startTrainingOperator starts training-operator, serving MPIJob v1 only,
// once for the package. It waits its turn for the machine's one
// training-operator certificate directory while another package's
// training-operator holds it.
var startTrainingOperator = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	return framework.Cluster().StartTrainingOperator(ctx, framework.BinDir(), localcluster.TrainingOperatorOptions{Schemes: []string{"mpijob"}})
})

// An MPIJob of training-operator's v1 API as its users write it, with no
// muster annotation: two workers of two slots, and a launcher that runs
// mpirun through the operator's kubexec.sh.
const kubexecMPIJob = `
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: job
spec:
  slotsPerWorker: 2
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - {name: mpi, image: mpi:1, command: [mpirun, -np, "4", hostname], resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - {name: mpi, image: mpi:1, resources: {requests: {cpu: "1"}}}
`

// operatorMPIJob has training-operator run kubexecMPIJob through muster
// and reads back its pods as muster-scheduler bound them, with the
// operator's ConfigMap (hostfile and kubexec.sh) at the launcher's mount.
func operatorMPIJob(t *testing.T, subnet int) map[string]*member {
	t.Helper()
	if err := startTrainingOperator(); err != nil {
		t.Fatalf("starting training-operator: %v", err)
	}
	// Who did not make or place a pod that never came: the operator, whose
	// pods muster-controller's webhook admits, or muster-scheduler.
	for _, program := range []string{"training-operator", "muster-controller", "muster-scheduler"} {
		framework.LogTailOnFailure(t, program)
	}
	ns := framework.NewNamespace(t)
	job := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(kubexecMPIJob), &job.Object); err != nil {
		t.Fatal(err)
	}
	jobs := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "mpijobs"}).Namespace(ns)
	// The operator registers its webhook handlers a moment after it is
	// ready: until then its server answers 404.
	framework.Eventually(t, "MPIJob job created", func(ctx context.Context) (*unstructured.Unstructured, error) {
		return jobs.Create(ctx, job, metav1.CreateOptions{})
	})
	members := map[string]*member{}
	for i, name := range []string{"job-worker-0", "job-worker-1", "job-launcher"} {
		m := readBack(t, framework.WaitForPod(t, ns, name, "bound", framework.IsBound))
		m.ip = fmt.Sprintf("127.0.%d.%d", subnet, 10+i)
		members[m.hostname] = m
	}
	return members
}

// runKubexecMPI starts each worker as a pod whose container sleeps, as the
// operator's workers do, and runs launch as the launcher, with a kubectl
// at /opt/kube (where the operator's init container delivers it) whose
// `exec POD -- CMD` runs CMD in that worker's namespaces with its
// environment, as the API server's exec would in its container. It
// returns the launcher's output and whether it exited 0.
func runKubexecMPI(t *testing.T, c *cluster, extraEnv []string, launch ...string) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(caseTimeout)
	var script strings.Builder
	script.WriteString(`#!/bin/sh
# kubectl exec POD [FLAG...] -- CMD...
[ "$1" = exec ] || { echo "kubectl: only exec is here" >&2; exit 1; }
pod=$2
shift 2
while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done
shift
case $pod in
`)
	for _, name := range []string{"job-worker-0", "job-worker-1"} {
		w := c.members[name]
		p := c.start(w, nil, nil, "sleep", "infinity")
		env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
		env = append(env, w.env...)
		quoted := make([]string, len(env))
		for i, kv := range env {
			quoted[i] = "'" + strings.ReplaceAll(kv, "'", `'\''`) + "'"
		}
		fmt.Fprintf(&script, "%s) exec nsenter -t %d -m -u -- env -i %s \"$@\" ;;\n", name, p.pid, strings.Join(quoted, " "))
	}
	script.WriteString("*) echo \"kubectl: pod $pod not found\" >&2; exit 1 ;;\nesac\n")
	kubectlDir := filepath.Join(c.dir, "opt-kube")
	mustWrite(t, filepath.Join(kubectlDir, "kubectl"), []byte(script.String()), 0o755)

	launcher := c.start(c.members["job-launcher"], extraEnv, map[string]string{"/opt/kube": kubectlDir}, launch...)
	return launcher.wait(deadline)
}

// TestOpenMPIThroughTrainingOperatorKubexec: mpirun -np 4 on the launcher
// of a training-operator MPIJob that muster scheduled, with exactly the
// environment and files the launcher got (the operator's hostfile,
// kubexec.sh as the rsh agent, and nothing of muster's), starts two ranks
// on each worker.
func TestOpenMPIThroughTrainingOperatorKubexec(t *testing.T) {
	t.Parallel()
	c := newCluster(t, operatorMPIJob(t, 21))
	launcher := c.members["job-launcher"]
	if agent := launcher.getenv("OMPI_MCA_plm_rsh_agent"); agent != "/etc/mpi/kubexec.sh" {
		t.Fatalf("the launcher's rsh agent is %q, not the operator's /etc/mpi/kubexec.sh", agent)
	}
	out, ok := runKubexecMPI(t, c, openMPIHarnessEnv, "mpirun.openmpi", "-np", "4", "hostname")
	if !ok || !ranksOnWorkers(out) {
		t.Errorf("mpirun did not start 2 ranks on each worker:\n%s", out)
	}
}

// TestKubexecFailsWithSSHOptions: the ssh options muster gives its own MPI
// launchers (OMPI_MCA_plm_rsh_args) reach kubexec.sh as `kubectl exec -o
// ...` and no rank starts, which is why muster never sets them beside an
// operator's rsh agent.
func TestKubexecFailsWithSSHOptions(t *testing.T) {
	t.Parallel()
	c := newCluster(t, operatorMPIJob(t, 22))
	c.members["job-launcher"].setenv("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10")
	out, ok := runKubexecMPI(t, c, openMPIHarnessEnv, "mpirun.openmpi", "-np", "4", "hostname")
	if ok || ranksOnWorkers(out) {
		t.Errorf("mpirun started its ranks with ssh options passed to kubexec.sh:\n%s", out)
	}
}
