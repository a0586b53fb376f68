package launchorder

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func mpi(roles string) map[string]string {
	return map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: roles}
}

// TestMPIWorkersBeforeLauncher: 1 launcher and 4 slow workers are reserved
// together; the workers bind first, and the launcher only once every
// worker is Ready.
func TestMPIWorkersBeforeLauncher(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	h := record(t, ns)
	framework.CreatePodGroup(t, ns, "job", 5, mpi("launcher=1,worker=4"))
	rolePods(t, ns, "job", "launcher", 1, "1", 0)
	rolePods(t, ns, "job", "worker", 4, "1", 3*time.Second)
	workers, launcher := names("job", "worker", 4), names("job", "launcher", 1)

	h.waitFor(t, h.bound, "bound", append(workers, launcher...)...)
	h.after(t, h.bound, launcher, h.bound, workers, "the workers bind first")
	h.after(t, h.bound, launcher, h.ready, workers, "the launcher binds after every worker is Ready")
	if n := h.when(h.bound, launcher[0]); n == 0 {
		t.Fatal("the launcher was never bound")
	}

	held := framework.WaitForEvent(t, ns, launcher[0], "LaunchHeld")
	if want := "held until worker is Ready (0/4)"; held != want {
		t.Errorf("LaunchHeld says %q, want %q", held, want)
	}
	released := framework.WaitForEvent(t, ns, launcher[0], "LaunchReleased")
	if !strings.Contains(released, "worker is Ready (4/4)") {
		t.Errorf("LaunchReleased says %q", released)
	}
	metrics := framework.SchedulerMetrics(t)
	if metrics["muster_launch_release_delay_seconds_count"] < 1 || metrics["muster_launch_hold_duration_seconds_count"] < 1 {
		t.Errorf("the launch metrics were not recorded: release delay count %v, hold duration count %v",
			metrics["muster_launch_release_delay_seconds_count"], metrics["muster_launch_hold_duration_seconds_count"])
	}
}

// TestTensorFlowParameterServersFirst: the chief and the workers bind only
// after both parameter servers are Ready.
func TestTensorFlowParameterServersFirst(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	h := record(t, ns)
	framework.CreatePodGroup(t, ns, "tf", 6, map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=2,chief=1,worker=3"})
	rolePods(t, ns, "tf", "ps", 2, "1", 3*time.Second)
	rolePods(t, ns, "tf", "chief", 1, "1", 0)
	rolePods(t, ns, "tf", "worker", 3, "1", 0)
	ps := names("tf", "ps", 2)
	successors := append(names("tf", "chief", 1), names("tf", "worker", 3)...)

	h.waitFor(t, h.bound, "bound", append(ps, successors...)...)
	h.after(t, h.bound, successors, h.ready, ps, "chief and workers bind after both ps are Ready")
}

// TestMXNetChainStageByStage: scheduler, then servers, then workers.
func TestMXNetChainStageByStage(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	h := record(t, ns)
	framework.CreatePodGroup(t, ns, "mx", 5, map[string]string{topology.FrameworkAnnotation: "mxnet", topology.RolesAnnotation: "scheduler=1,server=2,worker=2"})
	rolePods(t, ns, "mx", "scheduler", 1, "1", 2*time.Second)
	rolePods(t, ns, "mx", "server", 2, "1", 2*time.Second)
	rolePods(t, ns, "mx", "worker", 2, "1", 0)
	scheduler, servers, workers := names("mx", "scheduler", 1), names("mx", "server", 2), names("mx", "worker", 2)

	h.waitFor(t, h.bound, "bound", workers...)
	h.after(t, h.bound, servers, h.ready, scheduler, "servers bind after the scheduler is Ready")
	h.after(t, h.bound, workers, h.ready, servers, "workers bind after every server is Ready")
}

// TestNoRoomForTheLauncherBindsNoWorker: with room for the workers but not
// for the launcher, the gang is not admitted and no worker is bound.
func TestNoRoomForTheLauncherBindsNoWorker(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	h := record(t, ns)
	framework.CreatePodGroup(t, ns, "job", 5, mpi("launcher=1,worker=4"))
	rolePods(t, ns, "job", "worker", 4, "1", 0)
	rolePods(t, ns, "job", "launcher", 1, "1", 0)

	// The gang fails at the launcher, releases the workers' reservations
	// and backs off; nothing may have been bound meanwhile.
	rejected := framework.WaitForEvent(t, ns, "job", "GangRejected")
	if !strings.Contains(rejected, "fits on no node") {
		t.Errorf("GangRejected says %q", rejected)
	}
	for _, pod := range append(names("job", "worker", 4), "job-launcher-0") {
		if at := h.when(h.bound, pod); at != 0 {
			t.Errorf("%s was bound although the gang does not fit", pod)
		}
	}
}

// TestHeldLauncherSurvivesSchedulerRestart: the scheduler dies while the
// launcher is held; the new one holds it again and binds it after the
// workers are Ready, with nothing bound twice.
func TestHeldLauncherSurvivesSchedulerRestart(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	h := record(t, ns)
	framework.CreatePodGroup(t, ns, "job", 5, mpi("launcher=1,worker=4"))
	rolePods(t, ns, "job", "launcher", 1, "1", 0)
	rolePods(t, ns, "job", "worker", 4, "1", 8*time.Second)
	workers, launcher := names("job", "worker", 4), names("job", "launcher", 1)

	framework.WaitForEvent(t, ns, launcher[0], "LaunchHeld")
	h.waitFor(t, h.bound, "bound", workers...)
	ctx, cancel := context.WithTimeout(context.Background(), framework.Timeout)
	defer cancel()
	if err := framework.Cluster().Restart(ctx, "muster-scheduler"); err != nil {
		t.Fatalf("restarting muster-scheduler: %v", err)
	}

	h.waitFor(t, h.bound, "bound", launcher...)
	h.after(t, h.bound, launcher, h.ready, workers, "the launcher binds after every worker is Ready")
	for _, pod := range append(workers, launcher...) {
		if n := h.when(h.binds, pod); n != 1 {
			t.Errorf("%s was bound %d times", pod, n)
		}
	}
}

// slowWorkersJob creates an MPI group of a launcher and two workers that
// turn Ready 5s after they start, with one more topology annotation.
func slowWorkersJob(t *testing.T, annotation, value string) (*history, []string) {
	t.Helper()
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	h := record(t, ns)
	annotations := mpi("launcher=1,worker=2")
	annotations[annotation] = value
	framework.CreatePodGroup(t, ns, "job", 3, annotations)
	rolePods(t, ns, "job", "launcher", 1, "1", 0)
	rolePods(t, ns, "job", "worker", 2, "1", 5*time.Second)
	return h, names("job", "worker", 2)
}

// TestOrderNoneAndStartAfterScheduled: launch-order none binds every role
// at once; start-after Scheduled frees the launcher as soon as the workers
// are bound, before they are Ready.
func TestOrderNoneAndStartAfterScheduled(t *testing.T) {
	launcher := []string{"job-launcher-0"}
	t.Run("launch-order none", func(t *testing.T) {
		h, workers := slowWorkersJob(t, topology.LaunchOrderAnnotation, "none")
		h.waitFor(t, h.bound, "bound", launcher...)
		h.waitFor(t, h.ready, "Ready", workers...)
		h.after(t, h.ready, workers, h.bound, launcher, "the launcher is bound before the slow workers are Ready")
	})
	t.Run("start-after Scheduled", func(t *testing.T) {
		h, workers := slowWorkersJob(t, topology.StartAfterAnnotation, "Scheduled")
		h.waitFor(t, h.bound, "bound", launcher...)
		h.after(t, h.bound, launcher, h.bound, workers, "the launcher binds after the workers are bound")
		h.waitFor(t, h.ready, "Ready", workers...)
		h.after(t, h.ready, workers, h.bound, launcher, "and before they are Ready")
	})
}

// TestStoredCyclicOrderLeavesPodsPending: a cycle in the launch order that
// reached storage, through an update made while muster's PodGroup webhook
// was not installed, keeps every pod of the group pending, with a message
// that names the cycle. (With the webhook the update is refused; see
// test/integration/controller.)
func TestStoredCyclicOrderLeavesPodsPending(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	h := record(t, ns)
	// Two of three pods: the members wait, unscheduled, for the update.
	framework.CreatePodGroup(t, ns, "job", 3, map[string]string{topology.RolesAnnotation: "a=1,b=2"})
	rolePods(t, ns, "job", "a", 1, "1", 0)
	rolePods(t, ns, "job", "b", 1, "1", 0)
	framework.WithoutPodGroupValidation(t)
	// The cycle and the smaller gang in one update: Gang and LaunchOrder
	// read one model of the group, so neither sees one change without
	// the other.
	updatePodGroup(t, ns, "job", func(pg *v1alpha1.PodGroup) {
		pg.Annotations[topology.LaunchOrderAnnotation] = "a>b>a"
		pg.Spec.MinMember = 2
	})
	for _, pod := range []string{"job-a-0", "job-b-0"} {
		framework.WaitForPod(t, ns, pod, "told its order has a cycle", func(p *corev1.Pod) bool {
			c := framework.Condition(p, corev1.PodScheduled)
			return c != nil && strings.Contains(c.Message, "the order has a cycle, a>b>a")
		})
	}

	// A pod of the same pool without a group is bound meanwhile, so the
	// scheduler was at work.
	plain := framework.InPool(st.MakePod().Namespace(ns).Name("plain").SchedulerName(localcluster.SchedulerName).
		Container("registry.k8s.io/pause:3.10").Obj(), ns)
	if _, err := framework.Client.CoreV1().Pods(ns).Create(context.Background(), plain, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod plain: %v", err)
	}
	framework.WaitForPod(t, ns, "plain", "bound", framework.IsBound)
	for _, pod := range []string{"job-a-0", "job-b-0"} {
		if h.when(h.bound, pod) != 0 {
			t.Errorf("%s of a group with a cyclic order was bound", pod)
		}
	}
}

// updatePodGroup changes a PodGroup, retrying on conflicts with the
// controller's status updates.
func updatePodGroup(t *testing.T, namespace, name string, change func(*v1alpha1.PodGroup)) {
	t.Helper()
	podGroups := framework.PodGroups.SchedulingV1alpha1().PodGroups(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pg, err := podGroups.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(pg)
		_, err = podGroups.Update(context.Background(), pg, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating PodGroup %s/%s: %v", namespace, name, err)
	}
}
