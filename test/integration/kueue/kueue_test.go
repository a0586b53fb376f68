// Package kueue tests muster behind the real Kueue, built from the module
// graph by `make tools` and run as its users run it in front of a
// scheduler, against a real control plane of its own.
package kueue

import (
	"context"
	"fmt"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	// A workload whose pods are not all Ready this long after its
	// admission is evicted (TestAWorkloadEvictedForPodsNotReadyLeavesNothingBehind);
	// every other test's pods are Ready well within it.
	framework.KueueOptions.WaitForPodsReady = "15s"
	framework.RunMain(m, nil)
}

// kueuePodGroup creates the size pods of Kueue pod group name, each asking
// for one CPU on the namespace's pool, in LocalQueue lq, scheduled by
// muster-scheduler, with no muster label or PodGroup. Each succeeds 2 s
// after it is Ready: Kueue lets the pods of a group go only once the
// group has finished (it waits for a failed or deleted one's
// replacement).
func kueuePodGroup(t *testing.T, namespace, name string, size int) {
	t.Helper()
	for i := range size {
		pod := st.MakePod().Namespace(namespace).Name(fmt.Sprintf("%s-%d", name, i)).
			SchedulerName(localcluster.SchedulerName).
			Label("kueue.x-k8s.io/queue-name", "lq").
			Label(topology.KueuePodGroupLabel, name).
			Annotation(topology.KueuePodGroupTotalAnnotation, fmt.Sprint(size)).
			Annotation("muster.dev/sim-run-for", "2s").
			Container("registry.k8s.io/pause:3.10").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
		framework.CreatePods(t, framework.InPool(pod, namespace))
	}
}

// TestAKueuePodGroupIsAGangOnceAdmitted: a Kueue pod group of 3 pods, with
// no PodGroup written by hand, in a queue whose quota holds it, on a pool
// with room for 2. Kueue admits it; muster-controller makes its PodGroup,
// of minMember 3, owned by Kueue's Workload; and muster-scheduler binds
// none of the 3, where one by one 2 would have been bound. Given a third
// CPU, all are bound.
func TestAKueuePodGroupIsAGangOnceAdmitted(t *testing.T) {
	ns := framework.QueuedNamespace(t, 1, "2", "3")
	var mu sync.Mutex
	bound := map[string]bool{}
	framework.WatchPods(t, ns, func(_, pod *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		if framework.IsBound(pod) {
			bound[pod.Name] = true
		}
	})
	kueuePodGroup(t, ns, "train", 3)

	pg := framework.Eventually(t, "PodGroup train", func(ctx context.Context) (*v1alpha1.PodGroup, error) {
		return framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
	})
	if pg.Spec.MinMember != 3 {
		t.Errorf("PodGroup train has minMember %d, want the pod group's total count, 3", pg.Spec.MinMember)
	}
	if owner := metav1.GetControllerOf(pg); owner == nil || owner.Kind != "Workload" || owner.Name != "train" {
		t.Errorf("PodGroup train is controlled by %v, not by Kueue's Workload train", owner)
	}
	framework.WaitForEvent(t, ns, "train", "GangRejected")
	mu.Lock()
	if len(bound) > 0 {
		t.Fatalf("%v of a gang of 3 were bound with room for 2", bound)
	}
	mu.Unlock()

	framework.AddPoolNode(t, ns, ns+"-extra", "1")
	for i := range 3 {
		framework.WaitForPod(t, ns, fmt.Sprintf("train-%d", i), "bound", framework.IsBound)
	}
	for i := range 3 {
		framework.WaitForPod(t, ns, fmt.Sprintf("train-%d", i), "let go by Kueue", func(pod *corev1.Pod) bool {
			return pod.Status.Phase == corev1.PodSucceeded && len(pod.Finalizers) == 0
		})
	}
}

// queuedJob is a batch/v1 Job of three pods in the group of the PodGroup
// of its name, written by hand, in LocalQueue lq: each asks for one CPU
// on the namespace's pool and succeeds 2 s after it is Ready.
func queuedJob(namespace, name string) *batchv1.Job {
	template := framework.InPool(st.MakePod().SchedulerName(localcluster.SchedulerName).
		Label(topology.GroupLabel, name).
		Annotation("muster.dev/sim-run-for", "2s").
		Container("registry.k8s.io/pause:3.10").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj(), namespace)
	template.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "lq"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](3), Completions: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels, Annotations: template.Annotations}, Spec: template.Spec},
		},
	}
}

// TestABatchJobWaitsInKueueThenRunsAsAGang: two Jobs of three pods, each
// in a hand-written PodGroup of minMember 3, in a queue whose quota holds
// one, on a pool with room for both. The second waits in Kueue, suspended
// with no pod, until the first has completed; then it runs to completion
// too.
func TestABatchJobWaitsInKueueThenRunsAsAGang(t *testing.T) {
	ns := framework.QueuedNamespace(t, 2, "3", "3")
	early := framework.WatchNoneBefore(t, ns, func(pod *corev1.Pod) bool {
		return pod.Labels[topology.GroupLabel] == "first" && pod.Status.Phase == corev1.PodSucceeded
	}, func(pod *corev1.Pod) bool { return pod.Labels[topology.GroupLabel] == "second" })
	for _, name := range []string{"first", "second"} {
		framework.CreatePodGroup(t, ns, name, 3, nil)
		// Kueue's webhook serves a moment after Kueue is ready.
		framework.Eventually(t, "Job "+name+" created", func(ctx context.Context) (*batchv1.Job, error) {
			return framework.Client.BatchV1().Jobs(ns).Create(ctx, queuedJob(ns, name), metav1.CreateOptions{})
		})
		if name == "first" {
			framework.WaitForAPodOf(t, ns, topology.GroupLabel+"=first")
		}
	}
	for _, name := range []string{"first", "second"} {
		framework.Eventually(t, "Job "+name+" complete", func(ctx context.Context) (*batchv1.Job, error) {
			job, err := framework.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if job.Status.Succeeded != 3 {
				return nil, fmt.Errorf("%d of 3 pods succeeded", job.Status.Succeeded)
			}
			return job, nil
		})
	}
	if pod := early(); pod != "" {
		t.Errorf("the second Job, beyond the queue's quota, had pod %s before the first had completed", pod)
	}
}

// TestAWorkloadEvictedForPodsNotReadyLeavesNothingBehind: Kueue runs with
// waitForPodsReady (15 s). A Job of three pods in a hand-written PodGroup
// is admitted and bound whole on a pool of 3 CPUs, but its pods never turn
// Ready: Kueue evicts it, suspending the Job, whose pods go. muster keeps
// nothing of it: the PodGroup's status no longer says any member runs,
// and a gang of three of no queue, which needs the whole pool, is bound
// whole.
func TestAWorkloadEvictedForPodsNotReadyLeavesNothingBehind(t *testing.T) {
	ns := framework.QueuedNamespace(t, 1, "3", "3")
	framework.CreatePodGroup(t, ns, "stuck", 3, nil)
	job := queuedJob(ns, "stuck")
	job.Spec.Template.Annotations = map[string]string{"muster.dev/sim-ready-after": "1h"}
	framework.Eventually(t, "Job stuck created", func(ctx context.Context) (*batchv1.Job, error) {
		return framework.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	})
	framework.Eventually(t, "Job stuck's three pods bound", func(ctx context.Context) (int, error) {
		return boundOf(ctx, ns, "stuck", 3)
	})

	framework.Eventually(t, "Job stuck suspended by Kueue", func(ctx context.Context) (bool, error) {
		got, err := framework.Client.BatchV1().Jobs(ns).Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil || got.Spec.Suspend == nil || !*got.Spec.Suspend {
			return false, fmt.Errorf("not suspended (%v)", err)
		}
		return true, nil
	})
	framework.Eventually(t, "the Workload evicted for PodsReadyTimeout", func(ctx context.Context) (string, error) {
		return workloadCondition(ctx, ns, "stuck", "Evicted", "True", "PodsReadyTimeout")
	})
	framework.Eventually(t, "Job stuck's pods gone", func(ctx context.Context) (int, error) {
		pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=stuck"})
		if err != nil || len(pods.Items) > 0 {
			return 0, fmt.Errorf("%d pods (%v)", len(pods.Items), err)
		}
		return 0, nil
	})
	framework.Eventually(t, "PodGroup stuck's status without running members", func(ctx context.Context) (*v1alpha1.PodGroup, error) {
		pg, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil || pg.Status.Running != 0 || pg.Status.Phase != v1alpha1.PodGroupPending {
			return nil, fmt.Errorf("status %+v (%v)", pg.Status, err)
		}
		return pg, nil
	})

	framework.CreatePodGroup(t, ns, "after", 3, nil)
	for i := range 3 {
		framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "after", i, "1").Obj(), ns))
	}
	framework.Eventually(t, "the gang after it bound whole", func(ctx context.Context) (int, error) {
		return boundOf(ctx, ns, "after", 3)
	})
}

// boundOf returns how many of the group's pods are bound, once want are.
func boundOf(ctx context.Context, namespace, group string, want int) (int, error) {
	pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=" + group})
	if err != nil {
		return 0, err
	}
	bound := 0
	for i := range pods.Items {
		if framework.IsBound(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
			bound++
		}
	}
	if bound != want {
		return bound, fmt.Errorf("%d of %d bound", bound, want)
	}
	return bound, nil
}
