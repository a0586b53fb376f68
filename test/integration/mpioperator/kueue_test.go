package mpioperator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// queuedJob is lateLauncherJob named NAME in the namespace's LocalQueue
// lq, its launcher succeeding 2 s after it is Ready, and with it the job.
var queuedJob = strings.Replace(
	strings.Replace(lateLauncherJob, "  name: late\n", "  name: NAME\n  labels: {kueue.x-k8s.io/queue-name: lq}\n", 1),
	"      template:\n        spec:\n", "      template:\n        metadata:\n          annotations: {muster.dev/sim-run-for: 2s}\n        spec:\n", 1)

// jobNameLabel names the MPIJob of each pod mpi-operator makes.
const jobNameLabel = "training.kubeflow.org/job-name"

// jobPods lists the pods mpi-operator made for the job.
func jobPods(ctx context.Context, namespace, job string) ([]corev1.Pod, error) {
	pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel + "=" + job})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// boundLauncherOf waits until the job's launcher is bound and returns it.
func boundLauncherOf(t *testing.T, namespace, job string) *corev1.Pod {
	t.Helper()
	return framework.Eventually(t, "the launcher of "+job+" bound", func(ctx context.Context) (*corev1.Pod, error) {
		pods, err := jobPods(ctx, namespace, job)
		if err != nil {
			return nil, err
		}
		for i := range pods {
			if pods[i].Labels[topology.KubeflowJobRoleLabel] == "launcher" && framework.IsBound(&pods[i]) {
				return &pods[i], nil
			}
		}
		return nil, errNotYet
	})
}

// TestAnMPIJobWaitsInKueueThenLaunchesInOrder: two MPIJobs whose launchers
// wait for their workers (WaitForWorkersReady), queued in a ClusterQueue
// whose quota fits one at a time, on nodes with room for both. The second
// waits in Kueue, suspended with no pod, not half bound in muster; the
// first is ganged and its launcher bound only after both workers are
// Ready. Once the first has succeeded, the second is admitted and launched
// the same way, with nothing configured for muster beyond what mpi-operator
// is started with. (mpi-operator creates a resumed job's launcher with its
// workers, not once they are Ready: LaunchOrder, not the late member's
// room, holds it back; docs/kueue.md.)
func TestAnMPIJobWaitsInKueueThenLaunchesInOrder(t *testing.T) {
	if err := startMPIOperator(); err != nil {
		t.Fatalf("starting mpi-operator: %v", err)
	}
	ns := framework.QueuedNamespace(t, 2, "3", "3")
	seen := framework.WatchTimeline(t, ns)
	early := framework.WatchNoneBefore(t, ns, func(pod *corev1.Pod) bool {
		return pod.Labels[jobNameLabel] == "first" && pod.Labels[topology.KubeflowJobRoleLabel] == "launcher" && pod.Status.Phase == corev1.PodSucceeded
	}, func(pod *corev1.Pod) bool { return pod.Labels[jobNameLabel] == "second" })
	for _, name := range []string{"first", "second"} {
		job := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(strings.NewReplacer("NAMESPACE", ns, "NAME", name).Replace(queuedJob)), &job.Object); err != nil {
			t.Fatal(err)
		}
		createMPIJob(t, ns, job)
		// Kueue admits in the order the jobs were created.
		if name == "first" {
			framework.WaitForPod(t, ns, "first-worker-0", "created", func(*corev1.Pod) bool { return true })
		}
	}

	launcher := boundLauncherOf(t, ns, "first")
	seen.BoundAfterReady(t, "first-worker-0", launcher.Name)
	seen.BoundAfterReady(t, "first-worker-1", launcher.Name)

	launcher = boundLauncherOf(t, ns, "second")
	seen.BoundAfterReady(t, "second-worker-0", launcher.Name)
	seen.BoundAfterReady(t, "second-worker-1", launcher.Name)
	if pod := early(); pod != "" {
		t.Errorf("the second job, beyond the queue's quota, had pod %s before the first job's launcher had succeeded", pod)
	}
}

// TestAnMPIJobSuspendedAndResumedByKueueLaunchesInOrderAgain: a queued
// MPIJob runs, its launcher bound after its workers are Ready; then its
// Workload is deactivated (spec.active: false), as a user stops a job
// Kueue manages, and Kueue suspends it: mpi-operator deletes its pods.
// Activated again, it is admitted again, and its new pods are ganged and
// ordered as the first time, with nothing left of the first run in the
// way.
func TestAnMPIJobSuspendedAndResumedByKueueLaunchesInOrderAgain(t *testing.T) {
	if err := startMPIOperator(); err != nil {
		t.Fatalf("starting mpi-operator: %v", err)
	}
	ns := framework.QueuedNamespace(t, 1, "3", "3")
	seen := framework.WatchTimeline(t, ns)
	job := &unstructured.Unstructured{}
	// The launcher runs until it is deleted.
	manifest := strings.NewReplacer("NAMESPACE", ns, "NAME", "resumed", "muster.dev/sim-run-for: 2s", "muster.dev/sim-run-for: 1h").Replace(queuedJob)
	if err := yaml.Unmarshal([]byte(manifest), &job.Object); err != nil {
		t.Fatal(err)
	}
	createMPIJob(t, ns, job)
	launcher := boundLauncherOf(t, ns, "resumed")
	seen.BoundAfterReady(t, "resumed-worker-0", launcher.Name)
	seen.BoundAfterReady(t, "resumed-worker-1", launcher.Name)

	setWorkloadActive(t, ns, false)
	framework.Eventually(t, "the suspended job's pods gone", func(ctx context.Context) (int, error) {
		pods, err := jobPods(ctx, ns, "resumed")
		if err != nil || len(pods) > 0 {
			return 0, fmt.Errorf("%d pods (%v)", len(pods), err)
		}
		return 0, nil
	})
	again := framework.WatchTimeline(t, ns)
	setWorkloadActive(t, ns, true)
	relaunched := boundLauncherOf(t, ns, "resumed")
	if relaunched.UID == launcher.UID {
		t.Fatalf("the launcher %s was never replaced", launcher.Name)
	}
	again.BoundAfterReady(t, "resumed-worker-0", relaunched.Name)
	again.BoundAfterReady(t, "resumed-worker-1", relaunched.Name)
}

// setWorkloadActive sets spec.active of the namespace's one Kueue
// Workload.
func setWorkloadActive(t *testing.T, namespace string, active bool) {
	t.Helper()
	workloads := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}).Namespace(namespace)
	list, err := workloads.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the namespace has %d Workloads (%v), want 1", len(list.Items), err)
	}
	patch := fmt.Sprintf(`{"spec":{"active":%t}}`, active)
	if _, err := workloads.Patch(context.Background(), list.Items[0].GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting Workload %s active %t: %v", list.Items[0].GetName(), active, err)
	}
}
