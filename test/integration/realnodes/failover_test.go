package realnodes

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

// leaseHolder is the pod that holds a lease of muster-system: a
// scheduler's or controller's identity begins with its host name, which is
// its pod's name.
func leaseHolder(ctx context.Context, lease string) (string, error) {
	l, err := framework.Client.CoordinationV1().Leases(manifests.SystemNamespace).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", fmt.Errorf("lease %s has no holder", lease)
	}
	pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return pod, nil
}

// TestTheSchedulersLeaderDeletedWhileAGangWaitsHandsOverAndTheGangBindsWhole
// deletes muster-scheduler's leader pod while a gang waits for its last
// member: the other replica takes the lease, nothing of the gang was bound
// meanwhile, and the new leader binds the gang whole once it is complete.
func TestTheSchedulersLeaderDeletedWhileAGangWaitsHandsOverAndTheGangBindsWhole(t *testing.T) {
	ctx := context.Background()
	namespace := framework.NewNamespace(t)
	pause, err := localcluster.LocalImage(imagesDir(), "muster-pause")
	if err != nil {
		t.Fatal(err)
	}
	member := func(i int) *corev1.Pod {
		pod := framework.MemberPod(namespace, "g", i, "10m").Obj()
		// No registry is reachable: every container runs the imported
		// pause image.
		for c := range pod.Spec.Containers {
			pod.Spec.Containers[c].Image = pause
			pod.Spec.Containers[c].ImagePullPolicy = corev1.PullIfNotPresent
		}
		return pod
	}
	framework.CreatePodGroup(t, namespace, "g", 3, nil)
	framework.CreatePods(t, member(0), member(1))

	leader := framework.Eventually(t, "muster-scheduler's leader", func(ctx context.Context) (string, error) {
		return leaseHolder(ctx, "muster-scheduler")
	})
	if err := framework.Client.CoreV1().Pods(manifests.SystemNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the leader %s: %v", leader, err)
	}
	next := framework.Eventually(t, "another muster-scheduler pod to lead", func(ctx context.Context) (string, error) {
		holder, err := leaseHolder(ctx, "muster-scheduler")
		if err != nil {
			return "", err
		}
		if holder == leader {
			return "", fmt.Errorf("%s, deleted, still holds the lease", leader)
		}
		return holder, nil
	})
	t.Logf("muster-scheduler's lease passed from %s to %s", leader, next)
	for _, name := range []string{"g-0", "g-1"} {
		pod, err := framework.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != "" {
			t.Errorf("%s was bound to %s while its gang of 3 had 2 members", name, pod.Spec.NodeName)
		}
	}

	framework.CreatePods(t, member(2))
	framework.Eventually(t, "the gang of 3 Running on real nodes", func(ctx context.Context) ([]corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, pod := range pods.Items {
			if pod.Status.Phase != corev1.PodRunning || !onRealNode(pod) {
				return nil, fmt.Errorf("%s is %s", pod.Name, describe(pod))
			}
		}
		return pods.Items, nil
	})
}
