package realnodes

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// lostNodeToleration is how long the test's members stay on a node that
// stopped reporting, where Kubernetes' default is 300 s.
const lostNodeToleration = 5

// nodeReady reports the node's Ready condition.
func nodeReady(ctx context.Context, name string) (corev1.ConditionStatus, error) {
	node, err := framework.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, nil
		}
	}
	return corev1.ConditionUnknown, nil
}

// TestAGangOnANodeWhoseKubeletStopsIsCompletedByReplacementsOnTheOtherNode:
// a gang of 2, an Indexed Job's pods, runs on the real nodes; the kubelet
// of the node that runs index 1 is stopped by its PID. The node goes
// NotReady, the taint manager deletes its pods once their toleration ends,
// and they stay Terminating, since no kubelet confirms it. The Job creates
// a replacement, which muster binds alone to the node left, beside index 0
// running or, on a busy machine, already succeeded (a member that
// succeeded counts toward the quorum), and the Job's two indices succeed. Once the kubelet
// is back, the pods it ran are gone and the Job is Complete: nothing of
// the gang is left bound.
func TestAGangOnANodeWhoseKubeletStopsIsCompletedByReplacementsOnTheOtherNode(t *testing.T) {
	ctx := context.Background()
	namespace := framework.NewNamespace(t)
	image, err := localcluster.LocalImage(imagesDir(), "muster-example-python")
	if err != nil {
		t.Fatal(err)
	}
	framework.CreatePodGroup(t, namespace, "survivor", 2, map[string]string{topology.RolesAnnotation: "worker=2"})
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "survivor-worker"},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To[int32](2),
			Parallelism:    ptr.To[int32](2),
			// A pod deleted off a lost node counts as failed; a Job run
			// across nodes allows for that, or loses its work to it.
			BackoffLimit: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{topology.GroupLabel: "survivor", topology.RoleLabel: "worker"}},
				Spec: corev1.PodSpec{
					SchedulerName: localcluster.SchedulerName,
					RestartPolicy: corev1.RestartPolicyNever,
					Tolerations: []corev1.Toleration{
						{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](lostNodeToleration)},
						{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](lostNodeToleration)},
					},
					Containers: []corev1.Container{{
						Name: "work", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						// A minute of work, counted by the workload itself.
						Command:   []string{"bash", "-c", `echo "index $JOB_COMPLETION_INDEX started"; for i in $(seq 60); do sleep 1; done; echo done`},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					}},
				},
			},
		},
	}
	if _, err := framework.Client.BatchV1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s: %v", job.Name, err)
	}

	first := framework.Eventually(t, "both members running", func(ctx context.Context) (map[string]corev1.Pod, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=survivor"})
		if err != nil {
			return nil, err
		}
		byIndex := map[string]corev1.Pod{}
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodRunning && onRealNode(pod) {
				byIndex[pod.Annotations[batchv1.JobCompletionIndexAnnotation]] = pod
			}
		}
		if len(byIndex) != 2 {
			return nil, fmt.Errorf("%d of 2 members running", len(byIndex))
		}
		return byIndex, nil
	})
	lost := first["1"].Spec.NodeName
	t.Logf("index 0 runs on %s, index 1 on %s; stopping the kubelet of %s", first["0"].Spec.NodeName, lost, lost)
	if err := framework.Cluster().Kill("kubelet-" + lost); err != nil {
		t.Fatalf("stopping the kubelet of %s: %v", lost, err)
	}
	// The node comes back whatever happens, for the tests that follow.
	back := false
	t.Cleanup(func() {
		if back {
			return
		}
		if err := framework.Cluster().Restart(context.Background(), "kubelet-"+lost); err != nil {
			t.Errorf("starting the kubelet of %s again: %v", lost, err)
			return
		}
		framework.Eventually(t, lost+" Ready again", func(ctx context.Context) (bool, error) {
			status, err := nodeReady(ctx, lost)
			return status == corev1.ConditionTrue, err
		})
	})

	framework.Eventually(t, lost+" not Ready", func(ctx context.Context) (bool, error) {
		status, err := nodeReady(ctx, lost)
		if err != nil {
			return false, err
		}
		if status == corev1.ConditionTrue {
			return false, fmt.Errorf("Ready")
		}
		return true, nil
	})
	framework.Eventually(t, "the members on "+lost+" deleted by the taint manager", func(ctx context.Context) (bool, error) {
		for _, old := range first {
			if old.Spec.NodeName != lost {
				continue
			}
			pod, err := framework.Client.CoreV1().Pods(namespace).Get(ctx, old.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pod.DeletionTimestamp == nil {
				return false, fmt.Errorf("%s: %s", pod.Name, describe(*pod))
			}
		}
		return true, nil
	})

	succeeded := framework.Eventually(t, "both indices succeeded, index 1 by a replacement off "+lost, func(ctx context.Context) (*batchv1.Job, error) {
		j, err := framework.Client.BatchV1().Jobs(namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
				t.Fatalf("the Job failed: %s: %s", c.Reason, c.Message)
			}
		}
		if j.Status.Succeeded != 2 {
			pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=survivor"})
			if err != nil {
				return nil, err
			}
			var states []string
			for _, pod := range pods.Items {
				states = append(states, pod.Name+": "+describe(pod))
			}
			return nil, fmt.Errorf("%d of 2 succeeded; %v", j.Status.Succeeded, states)
		}
		return j, nil
	})
	pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=survivor"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase == corev1.PodSucceeded && pod.Spec.NodeName == lost {
			t.Errorf("%s succeeded on %s, whose kubelet was stopped", pod.Name, lost)
		}
	}
	t.Logf("the Job: %d succeeded, conditions %v", succeeded.Status.Succeeded, succeeded.Status.Conditions)

	if err := framework.Cluster().Restart(ctx, "kubelet-"+lost); err != nil {
		t.Fatalf("starting the kubelet of %s again: %v", lost, err)
	}
	back = true
	framework.Eventually(t, "no member left on "+lost+" and the Job Complete", func(ctx context.Context) (bool, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=survivor"})
		if err != nil {
			return false, err
		}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodSucceeded {
				return false, fmt.Errorf("%s: %s", pod.Name, describe(pod))
			}
		}
		j, err := framework.Client.BatchV1().Jobs(namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("the Job's conditions: %v", j.Status.Conditions)
	})
}
