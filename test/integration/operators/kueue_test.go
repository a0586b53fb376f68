package operators

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/test/integration/framework"
)

// TestAPyTorchJobWaitsInKueueThenIsGangedAndOrdered: two PyTorchJobs in a
// ClusterQueue whose quota fits one at a time. The second waits in Kueue
// with no pod until the first has succeeded (its master runs for 2 s once
// Ready); each is ganged, its workers bound only after its master is
// Ready, with nothing configured for muster beyond what training-operator
// is started with.
func TestAPyTorchJobWaitsInKueueThenIsGangedAndOrdered(t *testing.T) {
	if err := startTrainingOperator(); err != nil {
		t.Fatalf("starting training-operator: %v", err)
	}
	ns := framework.QueuedNamespace(t, 0, "", "3")
	framework.LogTailOnFailure(t, "kueue")
	seen := framework.WatchTimeline(t, ns)
	early := framework.WatchNoneBefore(t, ns, func(pod *corev1.Pod) bool {
		return pod.Name == "first-master-0" && pod.Status.Phase == corev1.PodSucceeded
	}, func(pod *corev1.Pod) bool { return strings.HasPrefix(pod.Name, "second-") })
	jobs := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}).Namespace(ns)
	for _, name := range []string{"first", "second"} {
		manifest := strings.NewReplacer("name: pt", "name: "+name+"\n  labels: {kueue.x-k8s.io/queue-name: lq}",
			"annotations: {muster.dev/sim-ready-after: 3s}", "annotations: {muster.dev/sim-ready-after: 3s, muster.dev/sim-run-for: 2s}").Replace(pytorchJob)
		job := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(manifest), &job.Object); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, "PyTorchJob "+name+" created", func(ctx context.Context) (*unstructured.Unstructured, error) {
			return jobs.Create(ctx, job, metav1.CreateOptions{})
		})
		// Kueue admits in the order the jobs were created.
		if name == "first" {
			framework.WaitForPod(t, ns, "first-master-0", "created", func(*corev1.Pod) bool { return true })
		}
	}

	for _, job := range []string{"first", "second"} {
		for _, worker := range []string{job + "-worker-0", job + "-worker-1"} {
			framework.WaitForPod(t, ns, worker, "bound", framework.IsBound)
			seen.BoundAfterReady(t, job+"-master-0", worker)
		}
	}
	if pod := early(); pod != "" {
		t.Errorf("the second job, beyond the queue's quota, had pod %s before the first job's master had succeeded", pod)
	}
}
