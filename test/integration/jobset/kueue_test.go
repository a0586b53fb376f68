package jobset

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

var errNotTwo = errors.New("not two workers yet")

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
	if err := framework.StartKueue(); err != nil {
		t.Fatalf("starting Kueue: %v", err)
	}
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	framework.QueueFor(t, ns, "3")
	seen := framework.WatchTimeline(t, ns)
	// None of the second JobSet's pods may come before the first has
	// completed, in the order the API server committed the pods.
	var mu sync.Mutex
	firstDone, early := false, ""
	framework.WatchPods(t, ns, func(_, pod *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		switch js := pod.Labels[topology.JobSetNameLabel]; {
		case js == "first" && pod.Labels[topology.JobSetReplicatedJobLabel] == "launcher" && pod.Status.Phase == corev1.PodSucceeded:
			firstDone = true
		case js == "second" && !firstDone && early == "":
			early = pod.Name
		}
	})

	createJobSet(t, ns, queued(dependsOnJobSet, "first"), "3s")
	checkGrouped(t, ns, "first", "PodGroup first: minMember 3, roles workers=2,launcher=1, launch order workers>launcher")
	createJobSet(t, ns, queued(dependsOnJobSet, "second"), "3s")
	workers := framework.Eventually(t, "the first JobSet's workers", func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: topology.JobSetNameLabel + "=first," + topology.JobSetReplicatedJobLabel + "=workers"})
		if err != nil || len(pods.Items) != 2 {
			return nil, errNotTwo
		}
		return pods.Items, nil
	})
	checkLauncherBoundIntoHeldRoom(t, ns, seen, workers)
	// The pod of no group would take room the second JobSet needs.
	if err := framework.Client.CoreV1().Pods(ns).Delete(context.Background(), framework.IntruderName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	checkGrouped(t, ns, "second", "PodGroup second: minMember 3, roles workers=2,launcher=1, launch order workers>launcher")
	workers = framework.Eventually(t, "the second JobSet's workers", func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: topology.JobSetNameLabel + "=second," + topology.JobSetReplicatedJobLabel + "=workers"})
		if err != nil || len(pods.Items) != 2 {
			return nil, errNotTwo
		}
		return pods.Items, nil
	})
	for _, worker := range workers {
		framework.WaitForPod(t, ns, worker.Name, "bound", framework.IsBound)
	}
	mu.Lock()
	defer mu.Unlock()
	if early != "" {
		t.Errorf("the second JobSet, beyond the queue's quota, had pod %s before the first had completed", early)
	}
}
