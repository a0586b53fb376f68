package operators

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/webhooks"
	"github.com/muster-dev/muster/test/integration/framework"
)

// A PyTorchJob as its users write it, with no muster annotation. The
// master turns Ready 3 s after it starts, so that a worker bound before it
// was Ready would show.
const pytorchJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pt
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          containers:
          - {name: pytorch, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - {name: pytorch, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`

// runJob starts training-operator once, creates the job (of resource, in
// kubeflow.org/v1) in a namespace of the test, and waits until muster has
// derived its topology, which must read as derived. It returns the
// namespace and the pods' times.
func runJob(t *testing.T, manifest, resource, derived string) (string, *framework.Timeline) {
	t.Helper()
	if err := framework.StartTrainingOperator(); err != nil {
		t.Fatalf("starting training-operator: %v", err)
	}
	ns := framework.NewNamespace(t)
	framework.LogTailOnFailure(t, "training-operator")
	seen := framework.WatchTimeline(t, ns)
	job := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &job.Object); err != nil {
		t.Fatal(err)
	}
	jobs := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: resource}).Namespace(ns)
	// The operator registers its webhook handlers a moment after it is
	// ready: until then its server answers 404.
	framework.Eventually(t, job.GetKind()+" "+job.GetName()+" created", func(ctx context.Context) (*unstructured.Unstructured, error) {
		return jobs.Create(ctx, job, metav1.CreateOptions{})
	})
	note := framework.WaitForEvent(t, ns, job.GetName(), podgroup.ReasonTopologyDerived)
	if want := "read from " + job.GetKind() + "/" + job.GetName() + ": " + derived; note != want {
		t.Errorf("TopologyDerived says %q; want %q", note, want)
	}
	return ns, seen
}

// TestPyTorchJobIsGangedAndOrdered: training-operator makes the PodGroup;
// muster reads the topology from the PyTorchJob, binds the gang whole and
// the master before the workers, and leaves the operator's environment,
// hostnames and Services as they are.
func TestPyTorchJobIsGangedAndOrdered(t *testing.T) {
	ns, seen := runJob(t, pytorchJob, "pytorchjobs", "framework pytorch, roles master=1,worker=2")
	for _, name := range []string{"pt-master-0", "pt-worker-0", "pt-worker-1"} {
		framework.WaitForPod(t, ns, name, "Ready", framework.IsReady)
	}
	seen.BoundAfterReady(t, "pt-master-0", "pt-worker-0", "pt-worker-1")

	worker, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), "pt-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if worker.Spec.SchedulerName != localcluster.SchedulerName {
		t.Errorf("the operator gave the worker scheduler %q", worker.Spec.SchedulerName)
	}
	if added := worker.Annotations[webhooks.AddedAnnotation]; !strings.HasPrefix(added, "nothing") {
		t.Errorf("muster says it added %q to the operator's pod", added)
	}
	checkNoMusterEnv(t, worker, "pt")
	if got := worker.Labels[topology.GroupLabel]; got != "pt" {
		t.Errorf("the worker's group label is %q", got)
	}
	if _, err := framework.Client.CoreV1().Services(ns).Get(context.Background(), "pt", metav1.GetOptions{}); err == nil {
		t.Errorf("muster made a Service for a group whose Services are the operator's")
	}
}

// A TFJob as its users write it: parameter servers, then workers.
const tfJob = `
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: tf
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          containers:
          - {name: tensorflow, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - {name: tensorflow, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`

// TestTFJobStartsItsParameterServersFirst: a TFJob's workers are bound
// only once its parameter server is Ready, and keep the operator's
// TF_CONFIG.
func TestTFJobStartsItsParameterServersFirst(t *testing.T) {
	ns, seen := runJob(t, tfJob, "tfjobs", "framework tensorflow, roles ps=1,worker=2")
	for _, name := range []string{"tf-ps-0", "tf-worker-0", "tf-worker-1"} {
		framework.WaitForPod(t, ns, name, "Ready", framework.IsReady)
	}
	seen.BoundAfterReady(t, "tf-ps-0", "tf-worker-0", "tf-worker-1")
	worker, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), "tf-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNoMusterEnv(t, worker, "tf")
}

// checkNoMusterEnv fails the test when any container of an operator's pod
// has a variable muster writes, or an address in muster's form
// (<member>.<group>.<namespace>.svc) rather than the operator's.
func checkNoMusterEnv(t *testing.T, pod *corev1.Pod, group string) {
	t.Helper()
	musterAddress := "." + group + "." + pod.Namespace + ".svc"
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "MUSTER_") || strings.Contains(e.Value, musterAddress) {
				t.Errorf("container %s of %s has muster's %s=%s", c.Name, pod.Name, e.Name, e.Value)
			}
		}
	}
}

// An MPIJob of training-operator's v1 API: its launcher's init container
// delivers kubectl and asks for 5Gi of ephemeral storage, and its
// launcher runs mpirun through the operator's kubexec.sh.
const mpiJobV1 = `
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: mpi
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - {name: mpi, image: registry.k8s.io/pause:3.10, command: [mpirun, -n, "2", hostname], resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          containers:
          - {name: mpi, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`

// TestMPIJobV1LaunchesAfterItsWorkers: the launcher, which has no index
// and is not refused for it, is bound only once both workers are Ready,
// and keeps the operator's rsh agent with none of muster's ssh options.
func TestMPIJobV1LaunchesAfterItsWorkers(t *testing.T) {
	ns, seen := runJob(t, mpiJobV1, "mpijobs", "framework mpi, roles launcher=1,worker=2")
	launcher := framework.WaitForPod(t, ns, "mpi-launcher", "bound", framework.IsBound)
	seen.BoundAfterReady(t, "mpi-worker-0", "mpi-launcher")
	seen.BoundAfterReady(t, "mpi-worker-1", "mpi-launcher")
	checkNoMusterEnv(t, launcher, "mpi")
	env := map[string]string{}
	for _, e := range launcher.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["OMPI_MCA_plm_rsh_agent"] == "" {
		t.Errorf("the launcher lacks the operator's OMPI_MCA_plm_rsh_agent: %v", env)
	}
	if args, ok := env["OMPI_MCA_plm_rsh_args"]; ok {
		t.Errorf("the launcher has OMPI_MCA_plm_rsh_args=%q, which would reach the operator's kubexec.sh", args)
	}
}

// An elastic PyTorchJob of 1 to 3 workers started at 1, as its users write
// one for muster: minAvailable is its min, or training-operator would make
// every replica a member the gang waits for. Its pods go to the test's
// node pool (%[1]s).
const elasticPyTorchJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: ept
spec:
  runPolicy:
    schedulingPolicy: {minAvailable: 1}
  elasticPolicy: {rdzvBackend: c10d, minReplicas: 1, maxReplicas: 3}
  pytorchReplicaSpecs:
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {%[2]s: %[1]s}
          tolerations: [{key: %[2]s, operator: Equal, value: %[1]s, effect: NoSchedule}]
          containers:
          - {name: pytorch, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`

// TestElasticPyTorchJobIsScaledThroughItsScale: on a node of 3 CPUs,
// muster-controller grows an elastic PyTorchJob from 1 worker to 3 through
// the PyTorchJob's scale subresource, and training-operator creates the
// workers; when a rigid gang of two then waits for its min, it scales the
// job back to 1, training-operator deletes workers 2 and 1, and the gang
// is admitted whole.
func TestElasticPyTorchJobIsScaledThroughItsScale(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	growThenGiveBack(t, ns, "PyTorchJob", "ept", createElasticPyTorchJob(t, ns))
}

// growThenGiveBack waits until muster-controller has grown the elastic
// job kind/name, whose group is named after it, from 1 worker to 3 into
// idle room; then creates a rigid gang of two and waits until the job is
// scaled back to 1 for it. It checks the event of each.
func growThenGiveBack(t *testing.T, ns, kind, name string, workers func(want int64)) {
	t.Helper()
	workers(3)
	note := framework.WaitForEvent(t, ns, name, podgroup.ReasonElasticGrown)
	if want := "scaled " + kind + " " + ns + "/" + name + " worker replicas 1 → 3 into idle room; fulfillment 0.00 → 1.00"; note != want {
		t.Errorf("%s says %q; want %q", podgroup.ReasonElasticGrown, note, want)
	}

	createGangOfTwo(t, ns, "rigid", "")
	workers(1)
	note = framework.WaitForEvent(t, ns, name, podgroup.ReasonElasticShrunk)
	if want := "scaled " + kind + " " + ns + "/" + name + " worker replicas 3 → 1 for gang " + ns + "/rigid (priority 0), which waits for its min; fulfillment 1.00 → 0.00"; note != want {
		t.Errorf("%s says %q; want %q", podgroup.ReasonElasticShrunk, note, want)
	}
}

// TestAHighPriorityGangShrinksAnElasticPyTorchJobThroughItsScale: an
// elastic PyTorchJob grown to 3 workers fills a node of 3 CPUs; a
// high-priority gang of two takes workers 2 and 1 through muster-scheduler's
// GangPreemption, which shrinks the job through its scale subresource so
// that training-operator does not create them again.
func TestAHighPriorityGangShrinksAnElasticPyTorchJobThroughItsScale(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	workers := createElasticPyTorchJob(t, ns)
	workers(3)

	createGangOfTwo(t, ns, "high", framework.PriorityClass(t, ns, 1000))
	workers(1)
}

// An elastic MPIJob of training-operator's v1 API, for Horovod elastic:
// 1 to 3 workers started at 1, and a launcher. The job names its group's
// topology itself, and training-operator copies it to the PodGroup; its
// minAvailable is the min workers and the launcher. Its pods go to the
// test's node pool (%[1]s).
const elasticMPIJob = `
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: empi
  annotations:
    muster.dev/framework: mpi
    muster.dev/roles: launcher=1,worker=3
    muster.dev/elastic: "1:3"
spec:
  slotsPerWorker: 1
  runPolicy:
    schedulingPolicy: {minAvailable: 2}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          nodeSelector: {%[2]s: %[1]s}
          tolerations: [{key: %[2]s, operator: Equal, value: %[1]s, effect: NoSchedule}]
          containers:
          - {name: mpi, image: registry.k8s.io/pause:3.10, command: [horovodrun, --host-discovery-script, /etc/mpi/discover_hosts.sh, python, train.py], resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 1
      template:
        spec:
          nodeSelector: {%[2]s: %[1]s}
          tolerations: [{key: %[2]s, operator: Equal, value: %[1]s, effect: NoSchedule}]
          containers:
          - {name: mpi, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`

// TestElasticMPIJobIsScaledInItsWorkerReplicas: an MPIJob has no scale
// subresource, so muster-controller grows it from 1 worker to 3 by
// patching its worker replicas, on a node of 4 CPUs beside its launcher,
// and training-operator creates the workers; when a rigid gang of two
// then waits for its min, it patches them back to 1, and the gang is
// admitted whole.
func TestElasticMPIJobIsScaledInItsWorkerReplicas(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	growThenGiveBack(t, ns, "MPIJob", "empi", createElasticJob(t, ns, fmt.Sprintf(elasticMPIJob, ns, framework.PoolLabel), "mpijobs"))
}

// TestAHighPriorityGangShrinksAnElasticMPIJobInItsWorkerReplicas: an
// elastic MPIJob grown to 3 workers fills a node of 4 CPUs with its
// launcher; a high-priority gang of two takes workers 2 and 1 through
// muster-scheduler's GangPreemption, which patches the job's worker
// replicas so that training-operator does not create them again.
func TestAHighPriorityGangShrinksAnElasticMPIJobInItsWorkerReplicas(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	workers := createElasticJob(t, ns, fmt.Sprintf(elasticMPIJob, ns, framework.PoolLabel), "mpijobs")
	workers(3)
	createGangOfTwo(t, ns, "high", framework.PriorityClass(t, ns, 1000))
	workers(1)
}

// createElasticPyTorchJob creates the PyTorchJob ept, elastic from 1 to 3
// workers of 1 CPU on the test's pool, and returns a wait for it to run
// want workers, all bound, with its worker replicas at want.
func createElasticPyTorchJob(t *testing.T, ns string) (workers func(want int64)) {
	t.Helper()
	workers = createElasticJob(t, ns, fmt.Sprintf(elasticPyTorchJob, ns, framework.PoolLabel), "pytorchjobs")
	if note := framework.WaitForEvent(t, ns, "ept", podgroup.ReasonTopologyDerived); note != "read from PyTorchJob/ept: framework pytorch, roles worker=3" {
		t.Errorf("TopologyDerived says %q", note)
	}
	return workers
}

// createElasticJob creates a training-operator job (of resource, in
// kubeflow.org/v1) whose group is elastic and named after it, and returns
// a wait for it to run want workers, all bound, with its worker replicas
// at want.
func createElasticJob(t *testing.T, ns, manifest, resource string) (workers func(want int64)) {
	t.Helper()
	if err := framework.StartTrainingOperator(); err != nil {
		t.Fatalf("starting training-operator: %v", err)
	}
	job := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &job.Object); err != nil {
		t.Fatal(err)
	}
	name := job.GetName()
	replicasPath, known := topology.RoleReplicasPath(job.GetAPIVersion(), job.GetKind(), topology.ElasticRole)
	if !known {
		t.Fatalf("muster scales no %s", job.GetKind())
	}
	jobs := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: resource}).Namespace(ns)
	framework.Eventually(t, job.GetKind()+" "+name+" created", func(ctx context.Context) (*unstructured.Unstructured, error) {
		return jobs.Create(ctx, job, metav1.CreateOptions{})
	})
	// The job is deleted before the pool's pods, which it would create
	// again.
	t.Cleanup(func() {
		if err := jobs.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting %s %s: %v", job.GetKind(), name, err)
		}
	})
	return func(want int64) {
		t.Helper()
		framework.Eventually(t, fmt.Sprintf("%d workers, all bound", want), func(ctx context.Context) (bool, error) {
			got, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			replicas, _, _ := unstructured.NestedInt64(got.Object, replicasPath...)
			bound, err := framework.BoundActive(ctx, ns, topology.GroupLabel+"="+name+","+topology.KubeflowRoleLabel+"="+topology.ElasticRole)
			if err != nil {
				return false, err
			}
			if replicas != want || int64(len(bound)) != want {
				return false, fmt.Errorf("worker replicas %d, bound %v", replicas, bound)
			}
			return true, nil
		})
	}
}

// createGangOfTwo creates a gang of two 1-CPU members on the test's pool,
// of the PriorityClass class ("" for none), and waits until it is bound
// whole.
func createGangOfTwo(t *testing.T, ns, group, class string) {
	t.Helper()
	framework.CreatePodGroup(t, ns, group, 2, nil)
	for i := range 2 {
		pod := framework.InPool(framework.MemberPod(ns, group, i, "1").Obj(), ns)
		pod.Spec.PriorityClassName = class
		framework.CreatePods(t, pod)
	}
	framework.Eventually(t, "gang "+group+" bound whole", func(ctx context.Context) (bool, error) {
		for i := range 2 {
			pod, err := framework.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("%s-%d", group, i), metav1.GetOptions{})
			if err != nil || !framework.IsBound(pod) {
				return false, fmt.Errorf("%s-%d not bound: %v", group, i, err)
			}
		}
		return true, nil
	})
}
