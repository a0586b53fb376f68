package jobset

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/plugins/heldrooms"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

var errNotTwo = errors.New("not two workers yet")

// boundWorkers waits until the JobSet's two workers, not being deleted,
// are bound, and returns them.
func boundWorkers(t *testing.T, namespace, jobSet string) []corev1.Pod {
	t.Helper()
	return framework.Eventually(t, "the workers of "+jobSet+" bound", func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.JobSetNameLabel + "=" + jobSet + "," + topology.JobSetReplicatedJobLabel + "=workers"})
		if err != nil {
			return nil, err
		}
		var bound []corev1.Pod
		for _, pod := range pods.Items {
			if framework.IsBound(&pod) && pod.DeletionTimestamp == nil {
				bound = append(bound, pod)
			}
		}
		if len(bound) != 2 {
			return nil, errNotTwo
		}
		return bound, nil
	})
}

// queued puts the JobSet manifest in the namespace's LocalQueue lq and
// names it name.
func queued(manifest, name string) string {
	return strings.Replace(manifest, "  name: mpi\n", "  name: "+name+"\n  labels: {kueue.x-k8s.io/queue-name: lq}\n", 1)
}

// TestAJobSetWaitsInKueueAndItsLateLauncherKeepsItsRoom: two JobSets whose
// launcher JobSet creates only once its two workers are Ready (dependsOn),
// queued in a ClusterQueue whose quota fits one, on a pool with room for
// the three pods of one and no more. The second waits in Kueue with no pod
// until the first has completed. Under Kueue the launcher is still a late
// member: the first's workers are admitted with room held for it, a pod of
// no group that arrives meanwhile does not get that room, and the launcher
// is bound into it once the workers are Ready. Then the second is admitted
// and launched the same way.
func TestAJobSetWaitsInKueueAndItsLateLauncherKeepsItsRoom(t *testing.T) {
	if err := startOperators(); err != nil {
		t.Fatalf("starting the JobSet controller and Trainer: %v", err)
	}
	ns := framework.QueuedNamespace(t, 1, "3", "3")
	seen := framework.WatchTimeline(t, ns)
	early := framework.WatchNoneBefore(t, ns, func(pod *corev1.Pod) bool {
		return pod.Labels[topology.JobSetNameLabel] == "first" && pod.Labels[topology.JobSetReplicatedJobLabel] == "launcher" && pod.Status.Phase == corev1.PodSucceeded
	}, func(pod *corev1.Pod) bool { return pod.Labels[topology.JobSetNameLabel] == "second" })

	createJobSet(t, ns, queued(dependsOnJobSet, "first"), "3s")
	checkGrouped(t, ns, "first", "PodGroup first: minMember 3, roles workers=2,launcher=1, launch order workers>launcher")
	createJobSet(t, ns, queued(dependsOnJobSet, "second"), "3s")
	checkLauncherBoundIntoHeldRoom(t, ns, seen, boundWorkers(t, ns, "first"))
	// The pod of no group would take room the second JobSet needs.
	if err := framework.Client.CoreV1().Pods(ns).Delete(context.Background(), framework.IntruderName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	checkGrouped(t, ns, "second", "PodGroup second: minMember 3, roles workers=2,launcher=1, launch order workers>launcher")
	boundWorkers(t, ns, "second")
	if pod := early(); pod != "" {
		t.Errorf("the second JobSet, beyond the queue's quota, had pod %s before the first had completed", pod)
	}
}

// TestAJobSetKueuePreemptsReleasesItsHeldRoomAndRunsAgain: a low-priority
// JobSet is admitted; its two workers are bound, with room held for its
// launcher, which comes only once they are Ready, a minute later. A
// high-priority JobSet then needs the whole pool of 3 CPUs: Kueue evicts
// the low one, whose pods go, and muster lets go of the room it held for
// the low one's launcher as its last worker goes (an event on its
// PodGroup says so), not at the room's schedule timeout, which the high
// one's launcher would wait for. The high one runs to completion; then
// Kueue admits the low one again, and its workers are bound anew.
func TestAJobSetKueuePreemptsReleasesItsHeldRoomAndRunsAgain(t *testing.T) {
	if err := startOperators(); err != nil {
		t.Fatalf("starting the JobSet controller and Trainer: %v", err)
	}
	ns := framework.QueuedNamespace(t, 1, "3", "3")
	for name, value := range map[string]int{"low": 100, "high": 1000} {
		framework.CreateObject(t, "", fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: %s-%s}\nvalue: %d\n", ns, name, value))
	}
	prioritized := func(name, ready string) string {
		manifest := strings.Replace(queued(dependsOnJobSet, name), "labels: {kueue.x-k8s.io/queue-name: lq}",
			"labels: {kueue.x-k8s.io/queue-name: lq, kueue.x-k8s.io/priority-class: "+ns+"-"+name+"}", 1)
		return strings.ReplaceAll(manifest, "READY", ready)
	}

	createJobSet(t, ns, prioritized("low", "60s"), "60s")
	evicted := boundWorkers(t, ns, "low")
	createJobSet(t, ns, prioritized("high", "1s"), "1s")
	framework.Eventually(t, "JobSet high Completed", func(ctx context.Context) (string, error) {
		return "Completed", jobSetCompleted(ctx, ns, "high")
	})
	// The room held for the evicted JobSet's launcher went with its
	// workers, not at its schedule timeout.
	framework.WaitForEvent(t, ns, "low", heldrooms.RoomReleasedReason)
	expired, err := framework.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=LateMemberMissing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(expired.Items) > 0 {
		t.Errorf("the room held for the evicted JobSet's launcher was kept until its schedule timeout: %s", expired.Items[0].Note)
	}

	again := boundWorkers(t, ns, "low")
	for _, pod := range again {
		for _, old := range evicted {
			if pod.UID == old.UID {
				t.Errorf("worker %s of the evicted JobSet was never replaced", pod.Name)
			}
		}
	}
}

// TestATrainJobWaitsInKueueThenRunsItsNodesAsAGang: two torch TrainJobs,
// each a dataset initializer and then three nodes, in a queue whose quota
// (4 CPUs: the initializer's and the nodes') holds one, on a pool with
// room for both. The second has no pod until the first's nodes have
// succeeded; each runs its initializer alone, then its nodes as a gang,
// and completes.
func TestATrainJobWaitsInKueueThenRunsItsNodesAsAGang(t *testing.T) {
	if err := startOperators(); err != nil {
		t.Fatalf("starting the JobSet controller and Trainer: %v", err)
	}
	ns := framework.QueuedNamespace(t, 2, "3", "4")
	early := framework.WatchNoneBefore(t, ns, func(pod *corev1.Pod) bool {
		return pod.Labels[topology.JobSetNameLabel] == "torch" && pod.Labels[topology.JobSetReplicatedJobLabel] == "node" && pod.Status.Phase == corev1.PodSucceeded
	}, func(pod *corev1.Pod) bool { return pod.Labels[topology.JobSetNameLabel] == "torch-2" })
	queuedJob := "kind: TrainJob\nmetadata:\n  name: torch\n  labels: {kueue.x-k8s.io/queue-name: lq}\n"
	manifest := strings.Replace(torchTrainJob, "kind: TrainJob\nmetadata:\n  name: torch\n", queuedJob, 1)
	createTrainJob(t, ns, manifest)
	// Kueue admits in the order the jobs were created.
	framework.WaitForAPodOf(t, ns, topology.JobSetNameLabel+"=torch")
	second := manifest[strings.LastIndex(manifest, "\n---\n")+len("\n---\n"):]
	createTrainJob(t, ns, strings.Replace(second, "  name: torch\n", "  name: torch-2\n", 1))

	for _, name := range []string{"torch", "torch-2"} {
		waitForTrainJobComplete(t, ns, name)
		trainerPodGroup(t, ns, name)
		framework.WaitForEvent(t, ns, name, podgroup.ReasonMinMemberLowered)
	}
	if pod := early(); pod != "" {
		t.Errorf("the second TrainJob, beyond the queue's quota, had pod %s before the first's nodes had succeeded", pod)
	}
}

// TestAJobSetKueuePlacesRunsItsLateLauncherWhereKueueSaid: a queue whose
// ResourceFlavor has a topology of hosts, so that Kueue's Topology Aware
// Scheduling places each pod; a node of 1 CPU and one of 4. The JobSet's
// two workers require one host, which only the larger holds; its launcher,
// created once they are Ready, Kueue places on the smaller, the tighter
// fit. muster held the launcher's room beside the workers, from its pod
// template, before Kueue's node selector was written into its pod: it gives
// that room up (an event on the PodGroup says so) rather than keep the
// launcher from where Kueue placed it, and the launcher is bound there,
// after its workers are Ready, with no rejection of its gang on the way.
func TestAJobSetKueuePlacesRunsItsLateLauncherWhereKueueSaid(t *testing.T) {
	if err := startOperators(); err != nil {
		t.Fatalf("starting the JobSet controller and Trainer: %v", err)
	}
	ns := framework.KueueNamespace(t)
	small, large := ns+"-small", ns+"-large"
	framework.AddPoolNode(t, ns, small, "1")
	framework.AddPoolNode(t, ns, large, "4")
	framework.TopologyQueueFor(t, ns, "5", corev1.LabelHostname)
	framework.ShowOnFailure(t, ns, framework.KueueObjects)
	seen := framework.WatchTimeline(t, ns)
	workersOnOneHost := strings.Replace(queued(dependsOnJobSet, "placed"), "annotations: {muster.dev/sim-ready-after: READY}",
		"annotations: {muster.dev/sim-ready-after: READY, "+topology.KueueRequiredTopologyAnnotation+": "+corev1.LabelHostname+"}", 1)
	createJobSet(t, ns, workersOnOneHost, "3s")

	workers := boundWorkers(t, ns, "placed")
	for _, pod := range workers {
		if pod.Spec.NodeName != large {
			t.Fatalf("worker %s is on %s; Kueue can only have placed the workers together on %s", pod.Name, pod.Spec.NodeName, large)
		}
	}
	launcher := boundLauncher(t, ns, "placed")
	if host := launcher.Spec.NodeSelector[corev1.LabelHostname]; host != small || launcher.Spec.NodeName != small {
		t.Errorf("the launcher is bound on %s, with Kueue's host %q; want both %s", launcher.Spec.NodeName, host, small)
	}
	if note := framework.WaitForEvent(t, ns, "placed", heldrooms.RoomReleasedReason); !strings.Contains(note, "may not run on node "+large) {
		t.Errorf("%s says %q; want it to say the launcher may not run where its room was held, %s", heldrooms.RoomReleasedReason, note, large)
	}
	rejected, err := framework.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=GangRejected"})
	if err != nil {
		t.Fatal(err)
	}
	for _, event := range rejected.Items {
		t.Errorf("muster fought Kueue's placement: %s", event.Note)
	}
	for _, worker := range workers {
		seen.BoundAfterReady(t, worker.Name, launcher.Name)
	}
}
