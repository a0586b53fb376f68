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

// queuedOperatorJob is a job of training-operator's, as a manifest whose
// name is the resource's short one (pt, tf), with the pod that starts
// first, the pods muster holds until it is Ready (successors), and those
// it starts with it (peers), when the kind has no launch order.
type queuedOperatorJob struct {
	manifest, resource, name, first string
	successors, peers               []string
}

// runQueuedOperatorJobs creates two of the job, first and second, in a
// ClusterQueue whose quota (3 CPUs) fits one at a time, every pod running
// 2 s once Ready. The second waits in Kueue with no pod until the first's
// first pod has succeeded; each is ganged, its first pod and peers bound,
// its successors only after its first pod is Ready, with nothing
// configured for muster beyond what training-operator is started with.
func runQueuedOperatorJobs(t *testing.T, job queuedOperatorJob) {
	t.Helper()
	if err := framework.StartTrainingOperator(); err != nil {
		t.Fatalf("starting training-operator: %v", err)
	}
	ns := framework.QueuedNamespace(t, 0, "", "3")
	framework.LogTailOnFailure(t, "kueue")
	seen := framework.WatchTimeline(t, ns)
	early := framework.WatchNoneBefore(t, ns, func(pod *corev1.Pod) bool {
		return pod.Name == "first-"+job.first && pod.Status.Phase == corev1.PodSucceeded
	}, func(pod *corev1.Pod) bool { return strings.HasPrefix(pod.Name, "second-") })
	jobs := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: job.resource}).Namespace(ns)
	for _, name := range []string{"first", "second"} {
		manifest := strings.NewReplacer("name: "+job.name+"\n", "name: "+name+"\n  labels: {kueue.x-k8s.io/queue-name: lq}\n",
			"annotations: {muster.dev/sim-ready-after: 3s}", "annotations: {muster.dev/sim-ready-after: 3s, muster.dev/sim-run-for: 2s}",
			"      template:\n        spec:", "      template:\n        metadata:\n          annotations: {muster.dev/sim-run-for: 2s}\n        spec:").Replace(job.manifest)
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, obj.GetKind()+" "+name+" created", func(ctx context.Context) (*unstructured.Unstructured, error) {
			return jobs.Create(ctx, obj, metav1.CreateOptions{})
		})
		// Kueue admits in the order the jobs were created.
		if name == "first" {
			framework.WaitForPod(t, ns, "first-"+job.first, "created", func(*corev1.Pod) bool { return true })
		}
	}

	for _, name := range []string{"first", "second"} {
		for _, peer := range append([]string{job.first}, job.peers...) {
			framework.WaitForPod(t, ns, name+"-"+peer, "bound", framework.IsBound)
		}
		for _, successor := range job.successors {
			framework.WaitForPod(t, ns, name+"-"+successor, "bound", framework.IsBound)
			seen.BoundAfterReady(t, name+"-"+job.first, name+"-"+successor)
		}
	}
	if pod := early(); pod != "" {
		t.Errorf("the second job, beyond the queue's quota, had pod %s before the first job's %s had succeeded", pod, job.first)
	}
}

// TestAPyTorchJobWaitsInKueueThenIsGangedAndOrdered: PyTorchJobs, their
// workers after their master (runQueuedOperatorJobs).
func TestAPyTorchJobWaitsInKueueThenIsGangedAndOrdered(t *testing.T) {
	runQueuedOperatorJobs(t, queuedOperatorJob{manifest: pytorchJob, resource: "pytorchjobs", name: "pt", first: "master-0", successors: []string{"worker-0", "worker-1"}})
}

// TestATFJobWaitsInKueueThenIsGangedAndOrdered: TFJobs, their workers
// after their parameter server (runQueuedOperatorJobs).
func TestATFJobWaitsInKueueThenIsGangedAndOrdered(t *testing.T) {
	runQueuedOperatorJobs(t, queuedOperatorJob{manifest: tfJob, resource: "tfjobs", name: "tf", first: "ps-0", successors: []string{"worker-0", "worker-1"}})
}

// TestAPaddleJobWaitsInKueueThenIsGangedAndOrdered: PaddleJobs, their
// workers after their master (runQueuedOperatorJobs).
func TestAPaddleJobWaitsInKueueThenIsGangedAndOrdered(t *testing.T) {
	runQueuedOperatorJobs(t, queuedOperatorJob{manifest: paddleJob, resource: "paddlejobs", name: "pd", first: "master-0", successors: []string{"worker-0", "worker-1"}})
}

// TestAnXGBoostJobWaitsInKueueThenIsGangedAndOrdered: XGBoostJobs, their
// workers after their master (runQueuedOperatorJobs).
func TestAnXGBoostJobWaitsInKueueThenIsGangedAndOrdered(t *testing.T) {
	runQueuedOperatorJobs(t, queuedOperatorJob{manifest: xgboostJob, resource: "xgboostjobs", name: "xgb", first: "master-0", successors: []string{"worker-0", "worker-1"}})
}

// TestAJAXJobWaitsInKueueThenIsGanged: JAXJobs, whose workers have no
// launch order, bound together (runQueuedOperatorJobs).
func TestAJAXJobWaitsInKueueThenIsGanged(t *testing.T) {
	runQueuedOperatorJobs(t, queuedOperatorJob{manifest: jaxJob, resource: "jaxjobs", name: "jax", first: "worker-0", peers: []string{"worker-1", "worker-2"}})
}

// A PaddleJob as its users write it: a master, then workers.
const paddleJob = `
apiVersion: kubeflow.org/v1
kind: PaddleJob
metadata:
  name: pd
spec:
  paddleReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          containers:
          - {name: paddle, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - {name: paddle, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`

// An XGBoostJob as its users write it: its one master, then workers.
const xgboostJob = `
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata:
  name: xgb
spec:
  xgbReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          containers:
          - {name: xgboost, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - {name: xgboost, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`

// A JAXJob as its users write it: workers alone.
const jaxJob = `
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata:
  name: jax
spec:
  jaxReplicaSpecs:
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        metadata:
          annotations: {muster.dev/sim-ready-after: 3s}
        spec:
          containers:
          - {name: jax, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}
`
