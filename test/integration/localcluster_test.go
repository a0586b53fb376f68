package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

func musterPod(namespace, name string) *st.PodWrapper {
	return st.MakePod().Namespace(namespace).Name(name).
		SchedulerName(localcluster.SchedulerName).
		Container("registry.k8s.io/pause:3.10").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"})
}

func createPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := framework.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// TestWithoutTheWorkloadAPIGroupsAreSchedulerPluginsPodGroupsAlone: on a
// cluster that does not serve upstream's PodGroups, the default, both
// programs found that out at start and read scheduler-plugins' alone.
func TestWithoutTheWorkloadAPIGroupsAreSchedulerPluginsPodGroupsAlone(t *testing.T) {
	for program, want := range map[string]string{
		"muster-scheduler":  `"Reading groups from PodGroups" apis=["scheduling.x-k8s.io/v1alpha1"]`,
		"muster-controller": `"Serving groups from PodGroups" apis=["scheduling.x-k8s.io/v1alpha1"]`,
	} {
		if !strings.Contains(framework.Log(t, program), want) {
			t.Errorf("%s's log does not say %s", program, want)
		}
	}
}

// TestMusterSchedulerBindsPodsToSimulatedNodes shows the whole chain: pods
// that ask for muster-scheduler are bound by it to kwok's nodes, and kwok
// runs them to Ready.
func TestMusterSchedulerBindsPodsToSimulatedNodes(t *testing.T) {
	ns := framework.NewNamespace(t)
	names := []string{"a", "b", "c", "d"}
	for _, name := range names {
		createPod(t, musterPod(ns, name).Obj())
	}

	nodes, err := framework.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	simulated := map[string]bool{}
	for _, node := range nodes.Items {
		if node.Annotations["kwok.x-k8s.io/node"] == "fake" {
			simulated[node.Name] = true
		}
	}
	for _, name := range names {
		pod := framework.WaitForPod(t, ns, name, "Ready", framework.IsReady)
		if !simulated[pod.Spec.NodeName] {
			t.Errorf("pod %s is on %q, not on a simulated node (%v)", name, pod.Spec.NodeName, simulated)
		}
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is Ready in phase %s, want Running", name, pod.Status.Phase)
		}
	}

	// The binding was muster-scheduler's: its Scheduled event says so.
	events, err := framework.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "Scheduled").String(),
	})
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	scheduledBy := map[string]string{}
	for _, e := range events.Items {
		scheduledBy[e.Regarding.Name] = e.ReportingController
	}
	for _, name := range names {
		if got := scheduledBy[name]; got != localcluster.SchedulerName {
			t.Errorf("pod %s: Scheduled event reported by %q, want %q", name, got, localcluster.SchedulerName)
		}
	}
}

// TestSimReadyAfterDelaysReady checks the annotation that later tests use
// to make a role slow to start.
func TestSimReadyAfterDelaysReady(t *testing.T) {
	ns := framework.NewNamespace(t)
	const delay = 4 * time.Second
	createPod(t, musterPod(ns, "slow").Annotation(localcluster.SimReadyAfterAnnotation, delay.String()).Obj())
	createPod(t, musterPod(ns, "prompt").Obj())

	framework.WaitForPod(t, ns, "prompt", "Ready", framework.IsReady)
	slow := framework.WaitForPod(t, ns, "slow", "Running", framework.IsRunning)
	if framework.IsReady(slow) {
		t.Fatalf("pod slow is Ready as soon as it runs; %s should delay that", localcluster.SimReadyAfterAnnotation)
	}
	slow = framework.WaitForPod(t, ns, "slow", "Ready", framework.IsReady)

	// Both stamps come from the simulated kubelet, in whole seconds; a
	// truncated pair can only shrink the gap, never widen it.
	started := slow.Status.StartTime.Time
	ready := framework.Condition(slow, corev1.PodReady).LastTransitionTime.Time
	if gap := ready.Sub(started); gap < delay {
		t.Errorf("pod slow became Ready %s after it started, want at least %s", gap, delay)
	}
}

// TestSimRunForCompletesPod checks the annotation that makes a simulated
// pod finish, and that a pod without it keeps running.
func TestSimRunForCompletesPod(t *testing.T) {
	ns := framework.NewNamespace(t)
	createPod(t, musterPod(ns, "finite").Annotation(localcluster.SimRunForAnnotation, "2s").Obj())
	createPod(t, musterPod(ns, "endless").Obj())

	finite := framework.WaitForPod(t, ns, "finite", "Succeeded", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded
	})
	for _, cs := range finite.Status.ContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			t.Errorf("container %s of a Succeeded pod is %+v, want terminated with exit code 0", cs.Name, cs.State)
		}
	}
	endless, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), "endless", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting pod endless: %v", err)
	}
	if endless.Status.Phase != corev1.PodRunning || !framework.IsReady(endless) {
		t.Errorf("pod endless without %s is %s (ready=%v), want Running and Ready", localcluster.SimRunForAnnotation, endless.Status.Phase, framework.IsReady(endless))
	}
}

// TestOtherSchedulersPodsAreLeftAlone shows muster-scheduler runs as a
// secondary scheduler: a pod for the default scheduler is not its to bind.
func TestOtherSchedulersPodsAreLeftAlone(t *testing.T) {
	ns := framework.NewNamespace(t)
	createPod(t, musterPod(ns, "default-scheduler-pod").SchedulerName(corev1.DefaultSchedulerName).Obj())
	createPod(t, musterPod(ns, "muster-pod").Obj())

	framework.WaitForPod(t, ns, "muster-pod", "bound", framework.IsBound)
	// muster-scheduler has seen and bound the later pod, so it has had its
	// chance at the earlier one.
	other, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), "default-scheduler-pod", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting pod: %v", err)
	}
	if other.Spec.NodeName != "" {
		t.Errorf("a pod for %s was bound to %s; muster-scheduler must leave it alone", corev1.DefaultSchedulerName, other.Spec.NodeName)
	}
	if other.Status.Phase != corev1.PodPending {
		t.Errorf("pod for the default scheduler is %s, want Pending", other.Status.Phase)
	}
}
