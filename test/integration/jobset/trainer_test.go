package jobset

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
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/webhooks"
	"github.com/muster-dev/muster/test/integration/framework"
)

// trainerPodSpec is the pod spec of a runtime's replicated job, on the
// test's node pool and scheduled by muster-scheduler; Trainer gives the
// container named node its image, command, resources and environment.
const trainerPodSpec = `
                spec:
                  schedulerName: muster-scheduler
                  nodeSelector: {muster.dev/test-pool: NAMESPACE}
                  tolerations: [{key: muster.dev/test-pool, operator: Equal, value: NAMESPACE, effect: NoSchedule}]
                  containers:
                  - name: CONTAINER
                    image: registry.k8s.io/pause:3.10
                    resources: {requests: {cpu: "1"}}`

// trainerPodTemplate is a runtime's pod template whose pods run for
// runFor once started.
func trainerPodTemplate(container, runFor string) string {
	return `
                metadata:
                  annotations: {muster.dev/sim-run-for: ` + runFor + `}` + strings.Replace(trainerPodSpec, "CONTAINER", container, 1)
}

// A torch runtime with a dataset initializer the nodes wait for to
// Complete, as Trainer's torchtune runtimes have, and a TrainJob of three
// nodes.
var torchTrainJob = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: torch
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  podGroupPolicy:
    coscheduling: {scheduleTimeoutSeconds: 60}
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}
          spec:
            template:` + trainerPodTemplate("dataset-initializer", "2s") + `
      - name: node
        dependsOn: [{name: dataset-initializer, status: Complete}]
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:` + trainerPodTemplate("node", "3s") + `
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: torch
spec:
  runtimeRef: {apiGroup: trainer.kubeflow.org, kind: TrainingRuntime, name: torch}
  trainer:
    numNodes: 3
    command: [torchrun, train.py]
`

// An MPI runtime as Trainer's deepspeed runtime is made: nodes that run
// sshd, and a launcher, which is a node too, that JobSet creates once the
// nodes are Ready and whose completion completes the job. Its TrainJob has
// three nodes: two node pods and the launcher. POLICY is its PodGroup
// policy, if any.
var mpiTrainJob = `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: mpi
spec:
  mlPolicy:
    numNodes: 1
    mpi: {numProcPerNode: 1, mpiImplementation: OpenMPI, sshAuthMountPath: /home/mpiuser/.ssh, runLauncherAsNode: true}
  POLICY
  template:
    spec:
      network: {publishNotReadyAddresses: true}
      successPolicy: {operator: All, targetReplicatedJobs: [launcher]}
      replicatedJobs:
      - name: node
        template:
          spec:
            template:
                metadata:
                  annotations: {muster.dev/sim-ready-after: 3s}` + strings.Replace(trainerPodSpec, "CONTAINER", "node", 1) + `
      - name: launcher
        dependsOn: [{name: node, status: Ready}]
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:` + trainerPodTemplate("node", "2s") + `
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: pi
spec:
  runtimeRef: {apiGroup: trainer.kubeflow.org, kind: TrainingRuntime, name: mpi}
  trainer:
    numNodes: 3
    command: [mpirun, -n, "3", hostname]
`

// createTrainJob starts Trainer once and creates the runtime and the
// TrainJob of the manifest in the namespace.
func createTrainJob(t *testing.T, namespace, manifest string) {
	t.Helper()
	if err := startOperators(); err != nil {
		t.Fatalf("starting the JobSet controller and Trainer: %v", err)
	}
	client := dynamic.NewForConfigOrDie(framework.Config)
	for _, doc := range strings.Split(strings.ReplaceAll(manifest, "NAMESPACE", namespace), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		resource := client.Resource(schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: strings.ToLower(obj.GetKind()) + "s"}).Namespace(namespace)
		// Trainer registers its webhook handlers a moment after it is
		// ready: until then its server answers 404.
		framework.Eventually(t, obj.GetKind()+" "+obj.GetName()+" created", func(ctx context.Context) (*unstructured.Unstructured, error) {
			return resource.Create(ctx, obj, metav1.CreateOptions{})
		})
	}
}

// waitForTrainJobComplete waits for Trainer to mark the TrainJob Complete.
func waitForTrainJobComplete(t *testing.T, namespace, name string) {
	t.Helper()
	trainJobs := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}).Namespace(namespace)
	framework.Eventually(t, "TrainJob "+name+" Complete", func(ctx context.Context) (bool, error) {
		job, err := trainJobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(job.Object, "status", "conditions")
		for _, c := range conditions {
			if c, _ := c.(map[string]any); c["type"] == "Complete" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", conditions)
	})
}

// trainerPodGroup waits for the TrainJob's PodGroup, made by Trainer, to
// have the topology muster-controller derives.
func trainerPodGroup(t *testing.T, namespace, name string) *v1alpha1.PodGroup {
	t.Helper()
	return framework.Eventually(t, "the topology of PodGroup "+name, func(ctx context.Context) (*v1alpha1.PodGroup, error) {
		pg, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if _, awaits := topology.AwaitsDerivation(pg); awaits {
			return nil, fmt.Errorf("awaits derivation")
		}
		return pg, nil
	})
}

// checkTrainerEnvLeftAlone fails the test when muster added anything to a
// pod of the TrainJob but, when Trainer made no PodGroup, its group label.
func checkTrainerEnvLeftAlone(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if added := pod.Annotations[webhooks.AddedAnnotation]; !strings.HasPrefix(added, "nothing") && !strings.HasPrefix(added, "the group label") {
		t.Errorf("muster added %q to pod %s", added, pod.Name)
	}
	for _, c := range pod.Spec.Containers {
		for _, env := range c.Env {
			if strings.HasPrefix(env.Name, "MUSTER_") {
				t.Errorf("pod %s has muster's %s", pod.Name, env.Name)
			}
		}
	}
}

// TestTorchTrainJobRunsItsInitializerFirstAndItsNodesAsAGang: Trainer's
// PodGroup counts the initializer in minMember, yet the nodes are created
// only once it has completed. muster runs the initializer alone, outside
// the group, lowers minMember to the three nodes, and the job completes
// with Trainer's environment as Trainer wrote it.
func TestTorchTrainJobRunsItsInitializerFirstAndItsNodesAsAGang(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	createTrainJob(t, ns, torchTrainJob)

	pg := trainerPodGroup(t, ns, "torch")
	want := map[string]string{
		topology.FrameworkAnnotation:   "pytorch",
		topology.RolesAnnotation:       "node=3",
		topology.LaunchOrderAnnotation: "none",
		topology.DerivedFromAnnotation: "TrainJob/torch",
	}
	for name, value := range want {
		if pg.Annotations[name] != value {
			t.Errorf("PodGroup torch has %s=%q; want %q", name, pg.Annotations[name], value)
		}
	}
	if pg.Spec.MinMember != 3 || pg.Spec.MinResources.Cpu().String() != "3" {
		t.Errorf("PodGroup torch has minMember %d and minResources %v; want 3 and 3 CPUs, the nodes'", pg.Spec.MinMember, pg.Spec.MinResources)
	}
	framework.WaitForEvent(t, ns, "torch", podgroup.ReasonMinMemberLowered)

	waitForTrainJobComplete(t, ns, "torch")
	for _, pod := range jobSetPods(t, ns, 4) {
		role := pod.Labels[topology.JobSetReplicatedJobLabel]
		if group := pod.Labels[topology.GroupLabel]; (role == "dataset-initializer") != (group == "") {
			t.Errorf("pod %s of %s is in group %q", pod.Name, role, group)
		}
		if role == "node" {
			checkTrainerEnvLeftAlone(t, &pod)
		}
	}
}

// TestMPITrainJobLauncherIsBoundIntoItsReservedRoom: the launcher, which
// JobSet creates once the nodes are Ready, is a late member: the nodes'
// gang is admitted with its room held on a pool with room for the three
// and no more, a pod that arrives meanwhile does not get that room, and
// the job completes with Trainer's MPI environment as Trainer wrote it.
// The group is the same whether the runtime asks Trainer for a PodGroup
// (Trainer's, owned by the TrainJob) or names only muster-scheduler
// (muster's, owned by the TrainJob's JobSet).
func TestMPITrainJobLauncherIsBoundIntoItsReservedRoom(t *testing.T) {
	for _, tt := range []struct{ name, policy, owner string }{
		{"Trainer's PodGroup", "podGroupPolicy: {coscheduling: {scheduleTimeoutSeconds: 60}}", "TrainJob"},
		{"no PodGroup policy", "", "JobSet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testMPITrainJob(t, strings.Replace(mpiTrainJob, "POLICY", tt.policy, 1), tt.owner)
		})
	}
}

func testMPITrainJob(t *testing.T, manifest, owner string) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	seen := framework.WatchTimeline(t, ns)
	createTrainJob(t, ns, manifest)

	pg := trainerPodGroup(t, ns, "pi")
	if ref := metav1.GetControllerOf(pg); ref == nil || ref.Kind != owner || ref.Name != "pi" {
		t.Errorf("PodGroup pi is controlled by %v, not by %s pi", ref, owner)
	}
	want := map[string]string{
		topology.DerivedFromAnnotation: "TrainJob/pi",
		topology.FrameworkAnnotation:   "mpi",
		topology.RolesAnnotation:       "node=2,launcher=1",
		topology.LaunchOrderAnnotation: "node>launcher",
		topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"muster.dev/test-pool":"` + ns + `"},"tolerations":[{"key":"muster.dev/test-pool","operator":"Equal","value":"` + ns + `","effect":"NoSchedule"}]}}`,
	}
	for name, value := range want {
		if pg.Annotations[name] != value {
			t.Errorf("PodGroup pi has %s=%q; want %q", name, pg.Annotations[name], value)
		}
	}
	launcher := checkLauncherBoundIntoHeldRoom(t, ns, seen, jobSetPods(t, ns, 2))
	checkTrainerEnvLeftAlone(t, launcher)
	if !hasEnv(launcher, "OMPI_MCA_orte_default_hostfile") {
		t.Errorf("the launcher lacks Trainer's OMPI_MCA_orte_default_hostfile: %v", launcher.Spec.Containers[0].Env)
	}
	waitForTrainJobComplete(t, ns, "pi")
}

func hasEnv(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		for _, env := range c.Env {
			if env.Name == name {
				return true
			}
		}
	}
	return false
}
