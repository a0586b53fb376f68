package kueue

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// groupPods waits until the group's want pods are bound, and returns them.
func groupPods(t *testing.T, namespace, group string, want int) []corev1.Pod {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("the %d pods of %s bound", want, group), func(ctx context.Context) (int, error) {
		return boundOf(ctx, namespace, group, want)
	})
	pods, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: topology.GroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// createQueuedJob creates the Job once Kueue's webhook serves, which it
// does a moment after Kueue is ready.
func createQueuedJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	framework.Eventually(t, "Job "+job.Name+" created", func(ctx context.Context) (*batchv1.Job, error) {
		return framework.Client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
	})
}

// TestAGangKueuePlacesAcrossRacksRunsWhereKueueSaid: a queue whose
// ResourceFlavor has a topology of racks and hosts, so that Kueue's
// Topology Aware Scheduling places every workload it admits; two racks of
// one node of 2 CPUs. A Job of three pods of one CPU, in a PodGroup that
// requires one rack, which no rack holds. Kueue admits it and writes a
// host into each pod's node selector, over both racks. muster does not
// choose a rack of its own, which could only disagree and leave the gang
// unschedulable: the gang is bound whole, each pod on the host Kueue
// said.
func TestAGangKueuePlacesAcrossRacksRunsWhereKueueSaid(t *testing.T) {
	ns := framework.KueueNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 1, "rack-b": 1}, "2")
	framework.TopologyQueueFor(t, ns, "4", framework.RackLabel, corev1.LabelHostname)
	framework.ShowOnFailure(t, ns, framework.KueueObjects)
	framework.CreatePodGroup(t, ns, "train", 3, map[string]string{topology.DomainRequiredAnnotation: framework.RackLabel})
	createQueuedJob(t, queuedJob(ns, "train"))

	pods := groupPods(t, ns, "train", 3)
	var names []string
	for _, pod := range pods {
		names = append(names, pod.Name)
		if _, ok := pod.Annotations[topology.KueueUnconstrainedTopologyAnnotation]; !ok {
			t.Errorf("pod %s has no %s: Kueue did not place it", pod.Name, topology.KueueUnconstrainedTopologyAnnotation)
		}
		if host := pod.Spec.NodeSelector[corev1.LabelHostname]; host != pod.Spec.NodeName {
			t.Errorf("pod %s is bound on %s; Kueue placed it on %q", pod.Name, pod.Spec.NodeName, host)
		}
	}
	racks := map[string]bool{}
	for _, rack := range framework.RacksOf(t, ns, names) {
		racks[rack] = true
	}
	if len(racks) != 2 {
		t.Errorf("the gang is in racks %v; Kueue can only have placed it over both", racks)
	}
}

// TestAGangOnlyMusterPlacesStaysInOneRackUnderKueue: a queue whose
// ResourceFlavor has no topology, so Kueue admits by quota alone; rack-a
// of two nodes of 2 CPUs, rack-b of one node of 3. A Job of three pods of
// one CPU, in a PodGroup that requires one rack: muster places it, in the
// rack it fills most, rack-b.
func TestAGangOnlyMusterPlacesStaysInOneRackUnderKueue(t *testing.T) {
	ns := framework.KueueNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2}, "2")
	framework.AddRackNode(t, ns, ns+"-b", "3", "rack-b")
	framework.QueueFor(t, ns, "7")
	framework.ShowOnFailure(t, ns, framework.KueueObjects)
	framework.CreatePodGroup(t, ns, "train", 3, map[string]string{topology.DomainRequiredAnnotation: framework.RackLabel})
	createQueuedJob(t, queuedJob(ns, "train"))

	var names []string
	for _, pod := range groupPods(t, ns, "train", 3) {
		names = append(names, pod.Name)
		if topology.KueuePlaces(&pod) {
			t.Errorf("pod %s carries Kueue's topology placement; its queue has none", pod.Name)
		}
	}
	framework.CheckInRack(t, ns, names, "rack-b")
}
