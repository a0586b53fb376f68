// Package mpioperator tests muster with the real mpi-operator, built from
// the module graph by `make tools` and run as its users run it, against a
// real control plane of its own: its MPIJob v2beta1 CRD has the name of
// training-operator's MPIJob v1, so the two cannot share a cluster.
package mpioperator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/webhooks"
	"github.com/muster-dev/muster/test/integration/framework"
)

var errNotYet = errors.New("not yet")

// boundLauncher waits until the namespace's launcher, which mpi-operator
// names with a random suffix, is bound, and returns it.
func boundLauncher(t *testing.T, namespace string) *corev1.Pod {
	t.Helper()
	return framework.Eventually(t, "the launcher bound", func(ctx context.Context) (*corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.KubeflowJobRoleLabel + "=launcher"})
		if err != nil || len(pods.Items) != 1 || !framework.IsBound(&pods.Items[0]) {
			return nil, errNotYet
		}
		return &pods.Items[0], nil
	})
}

// createMPIJob creates the job, and deletes it when the test ends before
// its pods are: the operator would recreate them.
func createMPIJob(t *testing.T, namespace string, job *unstructured.Unstructured) {
	t.Helper()
	jobs := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}).Namespace(namespace)
	if _, err := jobs.Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating MPIJob %s: %v", job.GetName(), err)
	}
	t.Cleanup(func() {
		if err := jobs.Delete(context.Background(), job.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting MPIJob %s: %v", job.GetName(), err)
		}
	})
}

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}

var startMPIOperator = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return framework.Cluster().StartMPIOperator(ctx, framework.BinDir())
})

// An MPIJob v2beta1 as mpi-operator's users write it, with no muster
// annotation; its launcher is created with its workers (AtStartup). The
// workers turn Ready 3 s after they start.
const mpiJob = `
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: pi
spec:
  slotsPerWorker: 1
  launcherCreationPolicy: AtStartup
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - {name: launcher, image: mpioperator/mpi-pi:openmpi, command: [mpirun, -n, "2", /home/mpiuser/pi], resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          containers:
          - {name: worker, image: mpioperator/mpi-pi:openmpi, command: [/usr/sbin/sshd, -De], resources: {requests: {cpu: "1"}}}
`

// TestMPIJobLaunchesAfterItsWorkers: mpi-operator's launcher, which has a
// job-role label and no index, is bound only once both workers are Ready;
// the operator's Service named after the job, its hostfile and its
// environment are left as they are.
func TestMPIJobLaunchesAfterItsWorkers(t *testing.T) {
	if err := startMPIOperator(); err != nil {
		t.Fatalf("starting mpi-operator: %v", err)
	}
	ns := framework.NewNamespace(t)
	seen := framework.WatchTimeline(t, ns)
	job := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(mpiJob), &job.Object); err != nil {
		t.Fatal(err)
	}
	createMPIJob(t, ns, job)
	note := framework.WaitForEvent(t, ns, "pi", podgroup.ReasonTopologyDerived)
	if want := "read from MPIJob/pi: framework mpi, roles launcher=1,worker=2"; note != want {
		t.Errorf("TopologyDerived says %q; want %q", note, want)
	}
	launcher := boundLauncher(t, ns)
	seen.BoundAfterReady(t, "pi-worker-0", launcher.Name)
	seen.BoundAfterReady(t, "pi-worker-1", launcher.Name)
	if added := launcher.Annotations[webhooks.AddedAnnotation]; !strings.HasPrefix(added, "nothing") {
		t.Errorf("muster says it added %q to the operator's launcher", added)
	}
	for _, c := range launcher.Spec.Containers {
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "MUSTER_") {
				t.Errorf("the launcher has muster's %s=%s", e.Name, e.Value)
			}
		}
	}
	// The operator's Service named after the job is its own.
	svc := framework.Eventually(t, "the operator's Service pi", func(ctx context.Context) (*corev1.Service, error) {
		return framework.Client.CoreV1().Services(ns).Get(ctx, "pi", metav1.GetOptions{})
	})
	if owner := metav1.GetControllerOf(svc); owner == nil || owner.Kind != "MPIJob" {
		t.Errorf("Service pi is controlled by %v, not by the MPIJob", owner)
	}
}

// An MPIJob whose launcher mpi-operator creates only once both workers are
// Ready (WaitForWorkersReady), on the test's pool of one node with room
// for the two workers and the launcher, and no more.
const lateLauncherJob = `
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: late
spec:
  slotsPerWorker: 1
  launcherCreationPolicy: WaitForWorkersReady
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          nodeSelector: {muster.dev/test-pool: NAMESPACE}
          tolerations: [{key: muster.dev/test-pool, operator: Equal, value: NAMESPACE, effect: NoSchedule}]
          containers:
          - {name: launcher, image: mpioperator/mpi-pi:openmpi, command: [mpirun, -n, "2", /home/mpiuser/pi], resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          nodeSelector: {muster.dev/test-pool: NAMESPACE}
          tolerations: [{key: muster.dev/test-pool, operator: Equal, value: NAMESPACE, effect: NoSchedule}]
          containers:
          - {name: worker, image: mpioperator/mpi-pi:openmpi, command: [/usr/sbin/sshd, -De], resources: {requests: {cpu: "1"}}}
`

// TestLateLauncherIsBoundIntoItsReservedRoom: the gang of two workers is
// admitted although its PodGroup counts a launcher that does not exist
// yet, with room held for it; a pod that arrives meanwhile does not get
// that room; and the launcher, created once the workers are Ready, is
// bound into it.
func TestLateLauncherIsBoundIntoItsReservedRoom(t *testing.T) {
	runLateLauncherJob(t, "3s", func() {})
}

// TestLateLauncherRoomOutlivesASchedulerRestart: muster-scheduler restarts
// after the gang is admitted and before the launcher exists, losing the
// room it held in memory; the restarted scheduler holds it again before it
// places anything else, so the pod that arrives then still does not get
// it, and the launcher is bound into it.
func TestLateLauncherRoomOutlivesASchedulerRestart(t *testing.T) {
	// The workers turn Ready well after the restart is over, so that the
	// launcher comes only then.
	runLateLauncherJob(t, "20s", func() {
		if err := framework.Cluster().Restart(context.Background(), "muster-scheduler"); err != nil {
			t.Fatalf("restarting muster-scheduler: %v", err)
		}
	})
}

// runLateLauncherJob runs lateLauncherJob, its workers Ready readyAfter
// they start, on a pool of its own; once the workers are bound it calls
// meanwhile, then has another pod of the same priority ask for the room
// the launcher needs, and checks that the launcher, not that pod, gets it.
func runLateLauncherJob(t *testing.T, readyAfter string, meanwhile func()) {
	t.Helper()
	if err := startMPIOperator(); err != nil {
		t.Fatalf("starting mpi-operator: %v", err)
	}
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	manifest := strings.NewReplacer("NAMESPACE", ns, "sim-ready-after: 3s", "sim-ready-after: "+readyAfter).Replace(lateLauncherJob)
	job := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &job.Object); err != nil {
		t.Fatal(err)
	}
	createMPIJob(t, ns, job)
	for _, worker := range []string{"late-worker-0", "late-worker-1"} {
		framework.WaitForPod(t, ns, worker, "bound", framework.IsBound)
	}
	meanwhile()
	framework.CreateIntruder(t, ns, "1")
	launcher := boundLauncher(t, ns)
	if launcher.Spec.NodeName != ns+"-0" {
		t.Errorf("the launcher went to %s", launcher.Spec.NodeName)
	}
	framework.CheckIntruderKeptOut(t, ns)
}

// TestALateLauncherIsBoundInItsWorkersRack: an MPIJob that must stay in one
// rack (its annotation, which muster-controller carries to the PodGroup
// mpi-operator makes), whose launcher mpi-operator creates only once the
// workers are Ready. rack-a's one node of 2 CPUs holds the two workers
// but not the launcher; rack-b's two such nodes hold all three. The gang
// goes to rack-b, and the launcher's room is held and bound there.
func TestALateLauncherIsBoundInItsWorkersRack(t *testing.T) {
	if err := startMPIOperator(); err != nil {
		t.Fatalf("starting mpi-operator: %v", err)
	}
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 1, "rack-b": 2}, "2")
	job := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(lateLauncherJob, "NAMESPACE", ns)), &job.Object); err != nil {
		t.Fatal(err)
	}
	job.SetAnnotations(map[string]string{topology.DomainRequiredAnnotation: framework.RackLabel})
	createMPIJob(t, ns, job)
	launcher := boundLauncher(t, ns)
	names := []string{"late-worker-0", "late-worker-1", launcher.Name}
	framework.CheckInRack(t, ns, names, "rack-b")
}

// An MPIJob whose workers and late launcher each claim one device through
// DRA, as the demo's: mpi-operator creates the launcher, with its claim,
// once both workers are Ready.
const deviceJob = `
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: gpus
spec:
  slotsPerWorker: 1
  launcherCreationPolicy: WaitForWorkersReady
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          nodeSelector: {muster.dev/test-pool: NAMESPACE}
          tolerations: [{key: muster.dev/test-pool, operator: Equal, value: NAMESPACE, effect: NoSchedule}]
          resourceClaims: [{name: gpu, resourceClaimTemplateName: TEMPLATE}]
          containers:
          - {name: launcher, image: mpioperator/mpi-pi:openmpi, command: [mpirun, -n, "2", /home/mpiuser/pi], resources: {requests: {cpu: "1"}, claims: [{name: gpu}]}}
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 15s}
        spec:
          nodeSelector: {muster.dev/test-pool: NAMESPACE}
          tolerations: [{key: muster.dev/test-pool, operator: Equal, value: NAMESPACE, effect: NoSchedule}]
          resourceClaims: [{name: gpu, resourceClaimTemplateName: TEMPLATE}]
          containers:
          - {name: worker, image: mpioperator/mpi-pi:openmpi, command: [/usr/sbin/sshd, -De], resources: {requests: {cpu: "1"}, claims: [{name: gpu}]}}
`

// TestAnMPIJobsLateLauncherKeepsItsDevice: on 2 nodes of 2 devices, an
// MPIJob's two workers and its late launcher each claim a device.
// muster-controller reads the launcher's device from its template; once
// the workers are bound, its room holds one of the two devices left. Two
// pods of no group, each claiming a device, arrive before the launcher:
// one is bound, the other waits, and the launcher, created once the
// workers are Ready, is bound with a device of its node.
func TestAnMPIJobsLateLauncherKeepsItsDevice(t *testing.T) {
	if err := startMPIOperator(); err != nil {
		t.Fatalf("starting mpi-operator: %v", err)
	}
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 2, "4", 2)
	framework.CreateDeviceClaimTemplate(t, ns)
	job := &unstructured.Unstructured{}
	manifest := strings.NewReplacer("NAMESPACE", ns, "TEMPLATE", framework.DeviceClaimTemplate).Replace(deviceJob)
	if err := yaml.Unmarshal([]byte(manifest), &job.Object); err != nil {
		t.Fatal(err)
	}
	createMPIJob(t, ns, job)
	pg := framework.Eventually(t, "the launcher's devices on the PodGroup", func(ctx context.Context) (map[string]string, error) {
		pg, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "gpus", metav1.GetOptions{})
		if err != nil || pg.Annotations[topology.LateMembersAnnotation] == "" {
			return nil, errNotYet
		}
		return pg.Annotations, nil
	})
	if want := `"devices":[{"deviceClassName":"` + localcluster.DeviceClassName + `","count":1}]`; !strings.Contains(pg[topology.LateMembersAnnotation], want) {
		t.Errorf("the PodGroup's late members are %s; want the launcher's device, %s", pg[topology.LateMembersAnnotation], want)
	}
	for _, worker := range []string{"gpus-worker-0", "gpus-worker-1"} {
		framework.WaitForPod(t, ns, worker, "bound", framework.IsBound)
	}
	for _, name := range []string{"user-0", "user-1"} {
		user := framework.ClaimOneDevice(framework.InPool(st.MakePod().Namespace(ns).Name(name).SchedulerName(localcluster.SchedulerName).
			Container("user").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj(), ns))
		framework.CreatePods(t, user)
	}
	framework.Eventually(t, "one pod of no group bound and the other unschedulable", func(ctx context.Context) (bool, error) {
		var bound, unschedulable int
		for _, name := range []string{"user-0", "user-1"} {
			pod, err := framework.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if framework.IsBound(pod) {
				bound++
			} else if c := framework.Condition(pod, corev1.PodScheduled); c != nil && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable++
			}
		}
		if bound != 1 || unschedulable != 1 {
			return false, errNotYet
		}
		return true, nil
	})
	launcher := boundLauncher(t, ns)
	claimName := framework.Eventually(t, "the launcher's claim", func(ctx context.Context) (string, error) {
		pod, err := framework.Client.CoreV1().Pods(ns).Get(ctx, launcher.Name, metav1.GetOptions{})
		if err != nil || len(pod.Status.ResourceClaimStatuses) == 0 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return "", errNotYet
		}
		return *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, nil
	})
	claim, err := framework.Client.ResourceV1().ResourceClaims(ns).Get(context.Background(), claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 || claim.Status.Allocation.Devices.Results[0].Pool != launcher.Spec.NodeName {
		t.Errorf("the launcher, on %s, has the allocation %+v; want one device of its node", launcher.Spec.NodeName, claim.Status.Allocation)
	}
}
