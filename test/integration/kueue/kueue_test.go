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
	if err := framework.StartKueue(); err != nil {
		t.Fatalf("starting Kueue: %v", err)
	}
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	framework.QueueFor(t, ns, "3")
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
	if err := framework.StartKueue(); err != nil {
		t.Fatalf("starting Kueue: %v", err)
	}
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "3")
	framework.QueueFor(t, ns, "3")
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
			framework.Eventually(t, "a pod of Job first", func(ctx context.Context) (int, error) {
				pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=first"})
				if err != nil || len(pods.Items) == 0 {
					return 0, fmt.Errorf("no pod yet (%v)", err)
				}
				return len(pods.Items), nil
			})
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
