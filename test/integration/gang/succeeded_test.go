package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestAReplacementJoinsTheMembersThatSucceeded: a gang of 2 runs; its
// members end, some by succeeding and some deleted, as a member lost with
// its node is; then its owner creates a replacement. A member that
// succeeded counts toward the quorum, so the replacement is bound alone
// beside it; a gang whose members were all deleted is placed whole again,
// and its replacement waits for a second member.
func TestAReplacementJoinsTheMembersThatSucceeded(t *testing.T) {
	tests := []struct {
		name string
		// succeeds says which of the first two members finishes by
		// itself; the others are deleted.
		succeeds map[int]bool
		// alone says whether the replacement is bound on its own.
		alone bool
	}{
		{name: "one member succeeded and one was deleted", succeeds: map[int]bool{0: true}, alone: true},
		{name: "both members were deleted", succeeds: map[int]bool{}, alone: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := framework.NewNamespace(t)
			framework.NodePool(t, ns, 1, "4")
			framework.CreatePodGroup(t, ns, "job", 2, nil)
			for i := range 2 {
				pod := framework.MemberPod(ns, "job", i, "1")
				if tt.succeeds[i] {
					pod = pod.Annotation(localcluster.SimRunForAnnotation, "1s")
				}
				framework.CreatePods(t, framework.InPool(pod.Obj(), ns))
			}
			for i := range 2 {
				name := fmt.Sprintf("job-%d", i)
				if tt.succeeds[i] {
					framework.WaitForPod(t, ns, name, "Succeeded", func(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodSucceeded })
					continue
				}
				framework.WaitForPod(t, ns, name, "running", framework.IsRunning)
				deleteAndWaitGone(t, ns, name)
			}

			framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "job", 2, "1").Obj(), ns))
			if tt.alone {
				framework.WaitForPod(t, ns, "job-2", "bound beside the member that succeeded", framework.IsBound)
				return
			}
			waitForCondition(t, ns, "job-2", "waiting for 1 more pods of group "+ns+"/job (1/2)")
			if pod, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), "job-2", metav1.GetOptions{}); err != nil || framework.IsBound(pod) {
				t.Fatalf("job-2, alone in a gang of 2 whose members were deleted, was bound (%v)", err)
			}
			framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "job", 3, "1").Obj(), ns))
			framework.WaitForPod(t, ns, "job-2", "bound with its new sibling", framework.IsBound)
			framework.WaitForPod(t, ns, "job-3", "bound with its new sibling", framework.IsBound)
		})
	}
}

// TestAReplacementTakesRoomBesideTheMembersThatSucceeded: a gang of 2 of
// high priority runs; one member succeeds, the other is deleted, and a pod
// of low priority fills the node. The owner's replacement is the one
// member the gang lacks, as the one that succeeded counts as placed, so
// gang preemption takes the filler for it rather than waiting for a
// second member that will never come.
func TestAReplacementTakesRoomBesideTheMembersThatSucceeded(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	low, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 1000)
	framework.CreatePodGroup(t, ns, "job", 2, nil)
	member := func(i int, runFor string) *corev1.Pod {
		pod := framework.MemberPod(ns, "job", i, "2")
		if runFor != "" {
			pod = pod.Annotation(localcluster.SimRunForAnnotation, runFor)
		}
		obj := framework.InPool(pod.Obj(), ns)
		obj.Spec.PriorityClassName = high
		return obj
	}
	framework.CreatePods(t, member(0, "1s"), member(1, ""))
	framework.WaitForPod(t, ns, "job-0", "Succeeded", func(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodSucceeded })
	framework.WaitForPod(t, ns, "job-1", "running", framework.IsRunning)
	deleteAndWaitGone(t, ns, "job-1")
	filler := plainPod(ns, "filler", "4")
	filler.Spec.PriorityClassName = low
	framework.CreatePods(t, filler)
	framework.WaitForPod(t, ns, "filler", "bound", framework.IsBound)

	framework.CreatePods(t, member(2, ""))
	framework.WaitForPod(t, ns, "job-2", "bound beside the member that succeeded, in the filler's room", framework.IsBound)
	note := framework.WaitForEvent(t, ns, "job", gangpreemption.ReasonPreempting)
	if want := "so that its 1 missing members fit at once"; !strings.HasSuffix(note, want) {
		t.Errorf("%s says %q; want it to end %q", gangpreemption.ReasonPreempting, note, want)
	}
}

// deleteAndWaitGone deletes the pod and waits until the API server no
// longer has it.
func deleteAndWaitGone(t *testing.T, namespace, name string) {
	t.Helper()
	if err := framework.Client.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s/%s: %v", namespace, name, err)
	}
	framework.Eventually(t, name+" gone", func(ctx context.Context) (bool, error) {
		_, err := framework.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("%s still exists", name)
	})
}
