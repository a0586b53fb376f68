package realnodes

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/test/integration/framework"
)

// onRealNode is true for a pod bound to one of the cluster's real nodes.
func onRealNode(pod corev1.Pod) bool { return strings.HasPrefix(pod.Spec.NodeName, "real-node-") }

func ready(pod corev1.Pod) (time.Time, bool) {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			return cond.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// kubectl runs bin/kubectl against the cluster, as a user would.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	args = append([]string{"--kubeconfig", framework.Cluster().Kubeconfig}, args...)
	out, err := exec.Command(filepath.Join(framework.BinDir(), "kubectl"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestMusterRunsAsPodsInstalledFromItsManifests(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"muster-scheduler", "muster-controller"} {
		pods := framework.Eventually(t, "2 Ready pods of "+name+" on real nodes", func(ctx context.Context) ([]corev1.Pod, error) {
			list, err := framework.Client.CoreV1().Pods(manifests.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
			if err != nil {
				return nil, err
			}
			var up []corev1.Pod
			for _, pod := range list.Items {
				if _, ok := ready(pod); ok && onRealNode(pod) && pod.DeletionTimestamp == nil {
					up = append(up, pod)
				}
			}
			if len(up) != 2 {
				return nil, fmt.Errorf("%d of 2 Ready", len(up))
			}
			return up, nil
		})
		// The replicas elect one leader through their lease, in-cluster.
		holder := framework.Eventually(t, "a holder of lease "+name, func(ctx context.Context) (string, error) {
			return leaseHolder(ctx, name)
		})
		if holder != pods[0].Name && holder != pods[1].Name {
			t.Errorf("lease %s is held by %q, neither of the pods %s and %s", name, holder, pods[0].Name, pods[1].Name)
		}
	}
	// The API server calls the webhooks through their Service, as the
	// manifests register them.
	webhook, err := framework.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, manifests.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range webhook.Webhooks {
		if w.ClientConfig.URL != nil || w.ClientConfig.Service == nil || w.ClientConfig.Service.Name != "muster-controller-webhook" {
			t.Errorf("webhook %s is not called through Service muster-controller-webhook: %+v", w.Name, w.ClientConfig)
		}
	}
}

// TestMPIRunsAcrossPodsWithMustersHostfileAndKeys applies the MPI example
// as a user would: mpirun on the launcher reaches the workers by the DNS
// names of muster's hostfile, over SSH with the group's keys, and the
// ranks all-reduce across pods.
func TestMPIRunsAcrossPodsWithMustersHostfileAndKeys(t *testing.T) {
	namespace := framework.NewNamespace(t)
	kubectl(t, "apply", "-n", namespace, "-f", filepath.Join(repoRoot(), "manifests", "examples", "real-nodes", "mpi.yaml"))
	launcher := waitForJobPod(t, namespace, "mpi-allreduce-launcher", corev1.PodSucceeded)
	checkMPIRun(t, namespace, launcher, "muster.dev/role=worker", false)
}

// checkMPIRun checks a finished MPI run of the examples: the launcher
// printed the allreduce of 3 ranks, and it was bound no earlier than its 2
// workers were Ready on real nodes, their sshd listening; created no
// earlier either, when createdAfterWorkers (mpi-operator's
// WaitForWorkersReady). A launcher of muster's own group exists from the
// start and waits, gated.
func checkMPIRun(t *testing.T, namespace string, launcher *corev1.Pod, workerSelector string, createdAfterWorkers bool) {
	t.Helper()
	if log := podLog(t, namespace, launcher.Name); !strings.Contains(log, "world size 3, allreduce of ranks 3") {
		t.Fatalf("the launcher's log has no line `world size 3, allreduce of ranks 3`:\n%s", log)
	}
	workers, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: workerSelector})
	if err != nil {
		t.Fatal(err)
	}
	if len(workers.Items) != 2 {
		t.Fatalf("%d workers, want 2", len(workers.Items))
	}
	created, scheduled := launcher.CreationTimestamp.Time, conditionTime(launcher, corev1.PodScheduled)
	for _, w := range workers.Items {
		at, ok := ready(w)
		if !ok || !onRealNode(w) {
			t.Errorf("worker %s is not Ready on a real node: %s", w.Name, describe(w))
			continue
		}
		// Kubernetes times are in seconds: equal is in order.
		if scheduled.Before(at) {
			t.Errorf("the launcher was bound at %s, before worker %s was Ready at %s", scheduled, w.Name, at)
		}
		if createdAfterWorkers && created.Before(at) {
			t.Errorf("the launcher was created at %s, before worker %s was Ready at %s", created, w.Name, at)
		}
	}
}

// describe says where a pod is and what its containers wait for.
func describe(pod corev1.Pod) string {
	s := fmt.Sprintf("%s on %q", pod.Status.Phase, pod.Spec.NodeName)
	for _, c := range pod.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			s += fmt.Sprintf(", %s waiting: %s %s", c.Name, w.Reason, w.Message)
		}
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			s += fmt.Sprintf(", %s: %s %s", cond.Type, cond.Reason, cond.Message)
		}
	}
	return s
}

func conditionTime(pod *corev1.Pod, kind corev1.PodConditionType) time.Time {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == kind && cond.Status == corev1.ConditionTrue {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// waitForJobPod waits until a pod of the Job reaches the phase.
func waitForJobPod(t *testing.T, namespace, job string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	return waitForPod(t, namespace, "job-name="+job, phase)
}

// waitForPod waits until a pod the selector selects reaches the phase,
// failing at once, with its log, when it reaches the other end.
func waitForPod(t *testing.T, namespace, selector string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	return framework.Eventually(t, "a pod "+selector+" "+string(phase), func(ctx context.Context) (*corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Status.Phase == phase {
				return pod, nil
			}
			if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
				t.Fatalf("pod %s ended %s; its log:\n%s", pod.Name, pod.Status.Phase, podLog(t, namespace, pod.Name))
			}
		}
		return nil, fmt.Errorf("no pod %s yet", phase)
	})
}

// podLog reads a container's log from its kubelet, through the API server.
func podLog(t *testing.T, namespace, pod string) string {
	t.Helper()
	data, err := framework.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the log of %s: %v", pod, err)
	}
	return string(data)
}

// TestMPIJobLaunchesOnlyOnceItsWorkersSSHDListens runs the MPI example
// through mpi-operator with WaitForWorkersReady: the workers' readiness is
// their sshd listening, and the launcher, created and bound after it,
// runs the allreduce over mpi-operator's hostfile and keys.
func TestMPIJobLaunchesOnlyOnceItsWorkersSSHDListens(t *testing.T) {
	if err := framework.Cluster().StartMPIOperator(context.Background(), framework.BinDir()); err != nil {
		t.Fatalf("starting mpi-operator: %v", err)
	}
	namespace := framework.NewNamespace(t)
	kubectl(t, "apply", "-n", namespace, "-f", filepath.Join(repoRoot(), "manifests", "examples", "real-nodes", "mpijob.yaml"))
	launcher := waitForPod(t, namespace, "training.kubeflow.org/job-role=launcher", corev1.PodSucceeded)
	checkMPIRun(t, namespace, launcher, "training.kubeflow.org/job-role=worker", true)
}
