package realnodes

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// runExample applies manifests/examples/real-nodes/FILE in a namespace of
// its own, as a user would, and waits until every pod the selector selects
// has Succeeded on a real node; it returns each pod's log by pod name. A
// pod that fails ends the test with its log.
func runExample(t *testing.T, file, selector string, pods int) map[string]string {
	t.Helper()
	namespace := framework.NewNamespace(t)
	kubectl(t, "apply", "-n", namespace, "-f", filepath.Join(repoRoot(), "manifests", "examples", "real-nodes", file))
	done := framework.Eventually(t, fmt.Sprintf("the %d pods %s Succeeded", pods, selector), func(ctx context.Context) ([]corev1.Pod, error) {
		list, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		succeeded := 0
		for _, pod := range list.Items {
			switch {
			case pod.Status.Phase == corev1.PodFailed:
				t.Fatalf("%s failed: %s; its log:\n%s", pod.Name, describe(pod), podLog(t, namespace, pod.Name))
			case pod.Status.Phase == corev1.PodSucceeded && onRealNode(pod):
				succeeded++
			}
		}
		if succeeded != pods || len(list.Items) != pods {
			return nil, fmt.Errorf("%d of %d pods Succeeded", succeeded, len(list.Items))
		}
		return list.Items, nil
	})
	logs := map[string]string{}
	for _, pod := range done {
		logs[pod.Name] = podLog(t, namespace, pod.Name)
	}
	return logs
}

// TestPyTorchTrainsAcrossPodsWithMustersEnvironment: torchrun, given only
// the environment muster injects, forms a world of 3 across pods, trains
// with gloo, and all-reduces.
func TestPyTorchTrainsAcrossPodsWithMustersEnvironment(t *testing.T) {
	checkTorchRanks(t, runExample(t, "pytorch.yaml", topology.GroupLabel+"=pt-tiny", 3))
}

// TestPyTorchJobTrainsAcrossPods runs the same training through
// training-operator's PyTorchJob and the environment it sets.
func TestPyTorchJobTrainsAcrossPods(t *testing.T) {
	// Its workers' init container waits for the master's name with
	// nslookup, from an image of its own that no registry serves here.
	initImage, err := localcluster.LocalImage(imagesDir(), "muster-example-torch")
	if err != nil {
		t.Fatal(err)
	}
	options := localcluster.TrainingOperatorOptions{Schemes: []string{"pytorchjob"}, PyTorchInitImage: initImage}
	if err := framework.Cluster().StartTrainingOperator(context.Background(), framework.BinDir(), options); err != nil {
		t.Fatalf("starting training-operator: %v", err)
	}
	checkTorchRanks(t, runExample(t, "pytorchjob.yaml", "training.kubeflow.org/job-name=pt-tiny-job", 3))
}

// checkTorchRanks: each of 3 ranks printed `rank R of 3`, and rank 0
// alone the all-reduce of ones.
func checkTorchRanks(t *testing.T, logs map[string]string) {
	t.Helper()
	ranks := map[string]bool{}
	allreduce := 0
	for _, log := range logs {
		for _, line := range strings.Split(log, "\n") {
			if strings.HasPrefix(line, "rank ") && strings.HasSuffix(line, " of 3") {
				ranks[line] = true
			}
			if line == "allreduce 3" {
				allreduce++
			}
		}
	}
	for _, want := range []string{"rank 0 of 3", "rank 1 of 3", "rank 2 of 3"} {
		if !ranks[want] {
			t.Errorf("no pod printed %q", want)
		}
	}
	if allreduce != 1 {
		t.Errorf("%d pods printed `allreduce 3`, want rank 0 alone", allreduce)
	}
	if t.Failed() {
		for pod, log := range logs {
			t.Logf("the log of %s:\n%s", pod, log)
		}
	}
}

// TestEveryTaskOfTFConfigReachesEveryOther: each pod listens on its own
// address of TF_CONFIG and connects to every other.
func TestEveryTaskOfTFConfigReachesEveryOther(t *testing.T) {
	logs := runExample(t, "tensorflow.yaml", topology.GroupLabel+"=tf-peers", 3)
	for pod, log := range logs {
		if !strings.Contains(log, "reached the 2 other tasks of TF_CONFIG and was reached by 2") {
			t.Errorf("%s did not reach and was not reached by the 2 other tasks:\n%s", pod, log)
		}
	}
}
