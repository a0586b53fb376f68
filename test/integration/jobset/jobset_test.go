// Package jobset tests muster with the real JobSet controller and Kubeflow
// Trainer, built from the module graph by `make tools` and run as their
// users run them (webhooks served on loopback, internal certificate
// management off), against a real control plane: JobSets and Trainer's
// runtimes name muster-scheduler in their pod templates and nothing else
// of muster.
package jobset

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}

// startOperators starts Trainer, and with it the JobSet controller, once
// for the package's tests.
var startOperators = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return framework.Cluster().StartTrainer(ctx, framework.BinDir())
})

// podTemplate is a JobSet pod template on the test's node pool, scheduled
// by muster-scheduler, asking for one CPU.
const podTemplate = `
          metadata:
            annotations: {muster.dev/sim-ready-after: READY}
          spec:
            schedulerName: muster-scheduler
            restartPolicy: Never
            nodeSelector: {muster.dev/test-pool: NAMESPACE}
            tolerations: [{key: muster.dev/test-pool, operator: Equal, value: NAMESPACE, effect: NoSchedule}]
            containers:
            - {name: main, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}`

// A JobSet of a leader and two replicas of a 2-pod Indexed Job: 5 pods.
const plainJobSet = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js
spec:
  replicatedJobs:
  - name: leader
    template:
      spec:
        template:` + podTemplate + `
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:` + podTemplate

// createJobSet starts the JobSet controller once and creates the JobSet
// in the namespace; its pods become Ready after ready.
func createJobSet(t *testing.T, namespace, manifest, ready string) {
	t.Helper()
	if err := startOperators(); err != nil {
		t.Fatalf("starting the JobSet controller and Trainer: %v", err)
	}
	js := &unstructured.Unstructured{}
	manifest = strings.NewReplacer("NAMESPACE", namespace, "READY", ready).Replace(manifest)
	if err := yaml.Unmarshal([]byte(manifest), &js.Object); err != nil {
		t.Fatal(err)
	}
	jobSets := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}).Namespace(namespace)
	// The controller registers its webhook handlers a moment after it is
	// ready: until then its server answers 404.
	framework.Eventually(t, "JobSet "+js.GetName()+" created", func(ctx context.Context) (*unstructured.Unstructured, error) {
		return jobSets.Create(ctx, js, metav1.CreateOptions{})
	})
}

// checkGrouped waits for muster's event that it made the JobSet's
// PodGroup, and checks what the event says of it.
func checkGrouped(t *testing.T, namespace, jobSet, want string) {
	t.Helper()
	if note := framework.WaitForEvent(t, namespace, jobSet, podgroup.ReasonJobSetGrouped); note != want {
		t.Errorf("%s says %q; want %q", podgroup.ReasonJobSetGrouped, note, want)
	}
}

// jobSetPods lists the JobSet's pods, once there are as many as want.
func jobSetPods(t *testing.T, namespace string, want int) []corev1.Pod {
	t.Helper()
	return framework.Eventually(t, fmt.Sprintf("%d pods of the JobSet", want), func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.JobSetNameLabel})
		if err != nil {
			return nil, err
		}
		if len(pods.Items) != want {
			return nil, fmt.Errorf("%d pods; the namespace's warnings: %s", len(pods.Items), warnings(ctx, namespace))
		}
		return pods.Items, nil
	})
}

// warnings lists the namespace's Warning events, such as a Job's pod the
// API server refused, to say why a pod is missing.
func warnings(ctx context.Context, namespace string) string {
	events, err := framework.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return err.Error()
	}
	var notes []string
	for _, e := range events.Items {
		notes = append(notes, fmt.Sprintf("%s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message))
	}
	return strings.Join(notes, "; ")
}

// TestJobSetIsGroupedAndPlacedWhole: muster makes the JobSet's PodGroup,
// owned by it, with a member for each of its 5 pods and a role for each
// replicated job; the pods join the group as they are created, keep
// JobSet's hostnames, and are all bound.
func TestJobSetIsGroupedAndPlacedWhole(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "5")
	createJobSet(t, ns, plainJobSet, "0s")
	checkGrouped(t, ns, "js", "PodGroup js: minMember 5, roles leader=1,workers=4, launch order none")
	pg := framework.Eventually(t, "PodGroup js", func(ctx context.Context) (*v1alpha1.PodGroup, error) {
		return framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "js", metav1.GetOptions{})
	})
	if owner := metav1.GetControllerOf(pg); owner == nil || owner.Kind != "JobSet" || owner.Name != "js" {
		t.Errorf("PodGroup js is controlled by %v, not by JobSet js", owner)
	}
	for _, pod := range jobSetPods(t, ns, 5) {
		if pod.Labels[topology.GroupLabel] != "js" {
			t.Errorf("pod %s is in group %q, not js", pod.Name, pod.Labels[topology.GroupLabel])
		}
		if !strings.HasPrefix(pod.Spec.Hostname, "js-") {
			t.Errorf("pod %s has hostname %q, not JobSet's", pod.Name, pod.Spec.Hostname)
		}
		framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
	}
}

// TestJobSetThatDoesNotFitBindsNothing: with room for 4 of its 5 pods, the
// gang is rejected and no pod is bound.
func TestJobSetThatDoesNotFitBindsNothing(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	createJobSet(t, ns, plainJobSet, "0s")
	framework.WaitForEvent(t, ns, "js", "GangRejected")
	for _, pod := range jobSetPods(t, ns, 5) {
		if framework.IsBound(&pod) {
			t.Errorf("pod %s was bound to %s, with its gang incomplete", pod.Name, pod.Spec.NodeName)
		}
	}
}

// A JobSet whose launcher JobSet creates only once its two workers are
// Ready (dependsOn), on a pool with room for the three and no more. The
// launcher runs for 2 s, and its completion completes the JobSet.
var dependsOnJobSet = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: mpi
spec:
  successPolicy: {operator: All, targetReplicatedJobs: [launcher]}
  replicatedJobs:
  - name: workers
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:` + podTemplate + `
  - name: launcher
    dependsOn: [{name: workers, status: Ready}]
    template:
      spec:
        template:` + strings.Replace(podTemplate, "sim-ready-after: READY", "sim-run-for: 2s", 1) + `
`

// TestDependsOnLauncherIsBoundIntoItsReservedRoom: the gang of the two
// workers is admitted with room held for the launcher JobSet creates
// later; a pod that arrives meanwhile does not get that room, the
// launcher is bound into it once the workers are Ready, and the JobSet
// completes.
func TestDependsOnLauncherIsBoundIntoItsReservedRoom(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	seen := framework.WatchTimeline(t, ns)
	createJobSet(t, ns, dependsOnJobSet, "3s")
	checkGrouped(t, ns, "mpi", "PodGroup mpi: minMember 3, roles workers=2,launcher=1, launch order workers>launcher")
	checkLauncherBoundIntoHeldRoom(t, ns, seen, jobSetPods(t, ns, 2))
	framework.Eventually(t, "JobSet mpi Completed", func(ctx context.Context) (string, error) {
		return "Completed", jobSetCompleted(ctx, ns, "mpi")
	})
}

// jobSetCompleted returns nil once the JobSet's terminal state is
// Completed.
func jobSetCompleted(ctx context.Context, namespace, name string) error {
	jobSets := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}).Namespace(namespace)
	js, err := jobSets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if state, _, _ := unstructured.NestedString(js.Object, "status", "terminalState"); state != "Completed" {
		return fmt.Errorf("terminal state %q", state)
	}
	return nil
}

// checkLauncherBoundIntoHeldRoom waits for the members to be bound, creates
// a pod that would take the room held for the launcher, and checks that the
// launcher, once created, is bound into that room after the members are
// Ready, and the other pod is kept out. It returns the launcher.
func checkLauncherBoundIntoHeldRoom(t *testing.T, ns string, seen *framework.Timeline, members []corev1.Pod) *corev1.Pod {
	t.Helper()
	for _, pod := range members {
		framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
	}
	framework.CreateIntruder(t, ns, "1")
	launcher := boundLauncher(t, ns, members[0].Labels[topology.JobSetNameLabel])
	for _, member := range members {
		seen.BoundAfterReady(t, member.Name, launcher.Name)
	}
	framework.CheckIntruderKeptOut(t, ns)
	return launcher
}

// boundLauncher waits until the JobSet's one launcher pod is bound, and
// returns it.
func boundLauncher(t *testing.T, ns, jobSet string) *corev1.Pod {
	t.Helper()
	selector := topology.JobSetNameLabel + "=" + jobSet + "," + topology.JobSetReplicatedJobLabel + "=launcher"
	return framework.Eventually(t, "the launcher of "+jobSet+" bound", func(ctx context.Context) (*corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		switch {
		case err != nil:
			return nil, err
		case len(pods.Items) != 1:
			return nil, fmt.Errorf("%d launcher pods", len(pods.Items))
		case !framework.IsBound(&pods.Items[0]):
			return nil, fmt.Errorf("launcher %s not bound; its node selector %v, its conditions %v", pods.Items[0].Name, pods.Items[0].Spec.NodeSelector, pods.Items[0].Status.Conditions)
		}
		return &pods.Items[0], nil
	})
}

// A JobSet whose trainer nodes JobSet creates only once its initializer
// has completed (dependsOn Complete), as Kubeflow Trainer's runtimes do.
// The initializer finishes 2 s after it starts.
var initializedJobSet = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: trained
spec:
  replicatedJobs:
  - name: initializer
    template:
      spec:
        template:
          metadata:
            annotations: {muster.dev/sim-run-for: 2s}` + strings.TrimPrefix(podTemplate, `
          metadata:
            annotations: {muster.dev/sim-ready-after: READY}`) + `
  - name: node
    replicas: 2
    dependsOn: [{name: initializer, status: Complete}]
    template:
      spec:
        template:` + podTemplate

// TestInitializerRunsAloneBeforeTheGang: the initializer, which the nodes
// wait for to complete, is scheduled on its own, out of the group; the
// two nodes, created once it has finished, are the gang.
func TestInitializerRunsAloneBeforeTheGang(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	createJobSet(t, ns, initializedJobSet, "0s")
	checkGrouped(t, ns, "trained", "PodGroup trained: minMember 2, roles node=2, launch order none; initializer run first, alone")
	for _, pod := range jobSetPods(t, ns, 3) {
		role := pod.Labels[topology.JobSetReplicatedJobLabel]
		if group := pod.Labels[topology.GroupLabel]; (role == "initializer") != (group == "") {
			t.Errorf("pod %s of %s is in group %q", pod.Name, role, group)
		}
		if role == "node" {
			framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
		}
	}
}

// trainGroupPodTemplate is podTemplate in the PodGroup train.
var trainGroupPodTemplate = strings.Replace(podTemplate, `
          spec:`, `
            labels: {scheduling.x-k8s.io/pod-group: train}
          spec:`, 1)

// A PyTorch job as a JobSet: a master and two Jobs of two workers, in a
// PodGroup made by hand that names the JobSet (muster.dev/jobset).
var handGroupedJobSet = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: pt
spec:
  network: {subdomain: pt-net}
  replicatedJobs:
  - name: master
    template:
      spec:
        template:` + trainGroupPodTemplate + `
  - name: worker
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:` + trainGroupPodTemplate

// TestHandMadeGroupOfAJobSetUsesJobSetsNames: with muster.dev/jobset, the
// JobSet's pods keep JobSet's hostnames and subdomain, each worker's index
// runs across the replicated job's Jobs, and every address muster writes
// is JobSet's.
func TestHandMadeGroupOfAJobSetUsesJobSetsNames(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "5")
	framework.CreatePodGroup(t, ns, "train", 5, map[string]string{
		topology.FrameworkAnnotation: "pytorch",
		topology.RolesAnnotation:     "master=1,worker=4",
		topology.JobSetAnnotation:    "pt",
	})
	createJobSet(t, ns, handGroupedJobSet, "0s")
	master := "pt-master-0-0.pt-net." + ns + ".svc"
	ranks := map[string]bool{}
	for _, pod := range jobSetPods(t, ns, 5) {
		if pod.Labels[topology.JobSetReplicatedJobLabel] == "master" {
			continue
		}
		env := map[string]string{}
		for _, e := range pod.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		want := fmt.Sprintf("pt-worker-%s-%s", pod.Labels[topology.JobSetJobIndexLabel], pod.Annotations[topology.JobCompletionIndex])
		if pod.Spec.Hostname != want || pod.Spec.Subdomain != "pt-net" {
			t.Errorf("pod %s has hostname %s.%s; want JobSet's %s.pt-net", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, want)
		}
		if env["MASTER_ADDR"] != master {
			t.Errorf("pod %s has MASTER_ADDR %q; want %q", pod.Name, env["MASTER_ADDR"], master)
		}
		if !strings.Contains(env["MUSTER_WORKER_HOSTS"], "pt-worker-1-1.pt-net."+ns+".svc") {
			t.Errorf("pod %s has MUSTER_WORKER_HOSTS %q, without JobSet's name of the last worker", pod.Name, env["MUSTER_WORKER_HOSTS"])
		}
		ranks[env["PET_NODE_RANK"]] = true
		framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
	}
	if len(ranks) != 4 || !ranks["1"] || !ranks["4"] {
		t.Errorf("the workers' ranks are %v; want 1 to 4, one each", ranks)
	}
	if _, err := framework.Client.CoreV1().Services(ns).Get(context.Background(), "train", metav1.GetOptions{}); err == nil {
		t.Errorf("muster made a Service for a group whose members resolve each other through JobSet's")
	}
}
