package realnodes

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// fillRealNodes creates on each real node a pod of the default scheduler
// that requests all the node's free CPU but leave, so that room appears
// only when the test deletes one. Pods still terminating would free room
// later, so it first waits until none is left. It returns the fillers'
// names by node.
func fillRealNodes(t *testing.T, namespace string, leave resource.Quantity) map[string]string {
	t.Helper()
	pause, err := localcluster.LocalImage(imagesDir(), "muster-pause")
	if err != nil {
		t.Fatal(err)
	}
	requested := framework.Eventually(t, "no pod terminating on a real node", func(ctx context.Context) (map[string]*resource.Quantity, error) {
		pods, err := framework.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		requested := map[string]*resource.Quantity{}
		for _, pod := range pods.Items {
			if !onRealNode(pod) || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			if pod.DeletionTimestamp != nil {
				return nil, fmt.Errorf("%s/%s is terminating", pod.Namespace, pod.Name)
			}
			if requested[pod.Spec.NodeName] == nil {
				requested[pod.Spec.NodeName] = resource.NewQuantity(0, resource.DecimalSI)
			}
			// As the scheduler counts it: init containers and overhead too.
			requested[pod.Spec.NodeName].Add(resourcehelper.PodRequests(&pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceCPU])
		}
		return requested, nil
	})
	nodes, err := framework.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	fillers := map[string]string{}
	for _, node := range nodes.Items {
		if !strings.HasPrefix(node.Name, "real-node-") {
			continue
		}
		fill := node.Status.Allocatable[corev1.ResourceCPU]
		if used := requested[node.Name]; used != nil {
			fill.Sub(*used)
		}
		fill.Sub(leave)
		if fill.Sign() <= 0 {
			t.Fatalf("node %s has less than %s of CPU free", node.Name, leave.String())
		}
		filler := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "filler-" + node.Name, Labels: map[string]string{"filler": node.Name}},
			Spec: corev1.PodSpec{
				NodeName:                      node.Name,
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{
					Name: "pause", Image: pause, ImagePullPolicy: corev1.PullIfNotPresent,
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: fill}},
				}},
			},
		}
		framework.CreatePods(t, filler)
		fillers[node.Name] = filler.Name
	}
	for node := range fillers {
		waitForPod(t, namespace, "filler="+node, corev1.PodRunning)
	}
	return fillers
}

// worldLine is what each rank of the elastic example prints as it starts.
var worldLine = regexp.MustCompile(`(?m)^rank (\d+): world size (\d+)$`)

// worlds is every `rank R: world size W` the selected pods printed, as
// "R/W", each pod's lines in order.
func worlds(t *testing.T, namespace, selector string) map[string][]string {
	t.Helper()
	pods, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing pods %s: %v", selector, err)
	}
	seen := map[string][]string{}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, m := range worldLine.FindAllStringSubmatch(podLog(t, namespace, pod.Name), -1) {
			seen[pod.Name] = append(seen[pod.Name], m[1]+"/"+m[2])
		}
	}
	return seen
}

// TestElasticPyTorchGrowsIntoFreedRoomAndTheRendezvousReforms: the elastic
// example (2:3) starts while each real node has room for one worker only,
// and trains in a world of 2. When a node's room is freed, muster-controller
// scales the set to 3, the third worker binds, and torchrun's agents re-form
// the rendezvous through muster's PET_RDZV_ENDPOINT: every rank starts
// again in a world of 3, and training goes on with an all-reduce of 3.
func TestElasticPyTorchGrowsIntoFreedRoomAndTheRendezvousReforms(t *testing.T) {
	namespace := framework.NewNamespace(t)
	fillers := fillRealNodes(t, namespace, resource.MustParse("500m"))
	kubectl(t, "apply", "-n", namespace, "-f", filepath.Join(repoRoot(), "manifests", "examples", "real-nodes", "pytorch-elastic.yaml"))
	selector := topology.GroupLabel + "=pt-elastic"

	framework.Eventually(t, "a world of 2 trained", func(ctx context.Context) (bool, error) {
		logs := strings.Join(podLogs(t, namespace, selector), "\n")
		if !strings.Contains(logs, "step 3 world size 2 allreduce 2 ") {
			return false, fmt.Errorf("no 4th step in a world of 2 yet; the workers' logs end:\n%s", logTails(t, namespace, selector))
		}
		return true, nil
	})
	if seen := worlds(t, namespace, selector); len(seen) != 2 {
		t.Fatalf("a world of 2 trained with %d workers running: %v", len(seen), seen)
	}
	if set, err := framework.Client.AppsV1().StatefulSets(namespace).Get(context.Background(), "pt-elastic-worker", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if got := ptr.Deref(set.Spec.Replicas, 0); got != 2 {
		t.Fatalf("the set was scaled to %d while no node had room for a third worker", got)
	}

	for node, filler := range fillers {
		t.Logf("freeing room on %s", node)
		if err := framework.Client.CoreV1().Pods(namespace).Delete(context.Background(), filler, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s: %v", filler, err)
		}
		break
	}
	framework.Eventually(t, "the set scaled to 3 by muster-controller", func(ctx context.Context) (bool, error) {
		set, err := framework.Client.AppsV1().StatefulSets(namespace).Get(ctx, "pt-elastic-worker", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := ptr.Deref(set.Spec.Replicas, 0); got != 3 {
			return false, fmt.Errorf("replicas %d", got)
		}
		return true, nil
	})
	framework.Eventually(t, "every rank in a world of 3, training", func(ctx context.Context) (bool, error) {
		seen := worlds(t, namespace, selector)
		ranks := map[string]bool{}
		for _, lines := range seen {
			ranks[lines[len(lines)-1]] = true
		}
		if len(seen) != 3 || !ranks["0/3"] || !ranks["1/3"] || !ranks["2/3"] {
			return false, fmt.Errorf("the workers' worlds, oldest first: %v; their logs end:\n%s", seen, logTails(t, namespace, selector))
		}
		if !strings.Contains(strings.Join(podLogs(t, namespace, selector), "\n"), "step 3 world size 3 allreduce 3 ") {
			return false, fmt.Errorf("no 4th step in a world of 3 yet")
		}
		return true, nil
	})
}

// podLogs reads the log of every running pod the selector selects.
func podLogs(t *testing.T, namespace, selector string) []string {
	t.Helper()
	pods, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing pods %s: %v", selector, err)
	}
	var logs []string
	for _, pod := range pods.Items {
		if pod.Status.Phase == corev1.PodRunning {
			logs = append(logs, podLog(t, namespace, pod.Name))
		}
	}
	return logs
}

// logTails is the last lines of each selected running pod's log, to say
// where a framework stands when a test gives up on it.
func logTails(t *testing.T, namespace, selector string) string {
	t.Helper()
	var tails []string
	for _, log := range podLogs(t, namespace, selector) {
		lines := strings.Split(strings.TrimSpace(log), "\n")
		tails = append(tails, strings.Join(lines[max(0, len(lines)-8):], "\n"))
	}
	return strings.Join(tails, "\n---\n")
}
