// Package outage tests what an outage of muster-controller reaches,
// against a real control plane whose webhooks are registered as manifests/
// registers them: muster-controller is paused (SIGSTOP), so the API server's
// calls to it are accepted and never answered, as with a hung process.
package outage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}

// runFor is how long the Job's pods run once Ready, in kwok's simulation:
// long enough that they still run when muster-controller is paused.
const runFor = "15s"

// holdFinalizer is a finalizer the test removes itself, as a controller
// that owns a pod would.
const holdFinalizer = "muster.dev/test-hold"

func TestAControllerOutageStopsNothingAlreadyRunning(t *testing.T) {
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	pods := framework.Client.CoreV1().Pods(ns)

	// A Job of muster-scheduler whose two pods are a gang.
	framework.CreatePodGroup(t, ns, "job", 2, nil)
	template := framework.MemberPod(ns, "job", 0, "100m").Obj().Spec
	template.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{topology.GroupLabel: "job"},
					Annotations: map[string]string{"muster.dev/sim-run-for": runFor},
				},
				Spec: template,
			},
		},
	}
	if _, err := framework.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Job: %v", err)
	}
	// A grouped pod of muster-scheduler that its owner keeps with a
	// finalizer.
	framework.CreatePodGroup(t, ns, "solo", 1, nil)
	solo := framework.MemberPod(ns, "solo", 0, "100m").Obj()
	solo.Finalizers = []string{holdFinalizer}
	framework.CreatePods(t, solo)
	framework.WaitForPod(t, ns, solo.Name, "running", framework.IsRunning)
	jobPods := framework.Eventually(t, "the Job's two pods running", func(ctx context.Context) ([]corev1.Pod, error) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=job"})
		if err != nil {
			return nil, err
		}
		running := 0
		for i := range list.Items {
			if framework.IsRunning(&list.Items[i]) {
				running++
			}
		}
		if running != 2 {
			return nil, fmt.Errorf("%d of 2 running", running)
		}
		return list.Items, nil
	})

	// A PodGroup of muster's, which muster-controller validates, kept by
	// its owner with a finalizer.
	annotated := framework.CreatePodGroup(t, ns, "annotated", 2, map[string]string{
		topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=1",
	})
	if _, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Patch(ctx, annotated.Name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["`+holdFinalizer+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("giving the PodGroup a finalizer: %v", err)
	}

	resume, err := framework.Cluster().Pause("muster-controller")
	if err != nil {
		t.Fatal(err)
	}
	resumed := false
	resumeController := func() {
		if !resumed {
			resumed = true
			if err := resume(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resumeController)
	for _, pod := range jobPods {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if current.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod %s is %s before muster-controller was paused: the test would prove nothing; raise runFor", pod.Name, current.Status.Phase)
		}
	}

	t.Run("a pod of another scheduler with the group label is created and labelled", func(t *testing.T) {
		other := framework.MemberPod(ns, "coscheduled", 0, "100m").SchedulerName("another-scheduler").Obj()
		if _, err := pods.Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating a pod of another scheduler: %v", err)
		}
		if _, err := pods.Patch(ctx, other.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("labelling a pod of another scheduler: %v", err)
		}
	})

	t.Run("a label that is no member's place changes on muster's pod", func(t *testing.T) {
		if _, err := pods.Patch(ctx, solo.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("labelling a grouped pod: %v", err)
		}
	})

	t.Run("a grouped pod is deleted and its owner's finalizer removed: it goes", func(t *testing.T) {
		if err := pods.Delete(ctx, solo.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting a grouped pod: %v", err)
		}
		if _, err := pods.Patch(ctx, solo.Name, types.JSONPatchType, []byte(removeFinalizers), metav1.PatchOptions{}); err != nil {
			t.Fatalf("removing the finalizer of a grouped pod: %v", err)
		}
		waitGone(t, "the grouped pod", func(ctx context.Context) error {
			_, err := pods.Get(ctx, solo.Name, metav1.GetOptions{})
			return err
		})
	})

	t.Run("muster's PodGroup is labelled, deleted and its owner's finalizer removed: it goes", func(t *testing.T) {
		podGroups := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns)
		if _, err := podGroups.Patch(ctx, annotated.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("labelling muster's PodGroup: %v", err)
		}
		if err := podGroups.Delete(ctx, annotated.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting muster's PodGroup: %v", err)
		}
		if _, err := podGroups.Patch(ctx, annotated.Name, types.JSONPatchType, []byte(removeFinalizers), metav1.PatchOptions{}); err != nil {
			t.Fatalf("removing the finalizer of muster's PodGroup: %v", err)
		}
		waitGone(t, "muster's PodGroup", func(ctx context.Context) error {
			_, err := podGroups.Get(ctx, annotated.Name, metav1.GetOptions{})
			return err
		})
	})

	t.Run("the Job's pods finish and the Job completes", func(t *testing.T) {
		framework.Eventually(t, "the Job complete", func(ctx context.Context) (bool, error) {
			current, err := framework.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range current.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, fmt.Errorf("succeeded %d, uncounted %v", current.Status.Succeeded, current.Status.UncountedTerminatedPods)
		})
	})

	t.Run("only a new grouped pod of muster-scheduler waits, naming muster-controller", func(t *testing.T) {
		_, err := pods.Create(ctx, framework.MemberPod(ns, "job", 9, "100m").Obj(), metav1.CreateOptions{})
		if err == nil {
			t.Fatal("a grouped pod was created without muster-controller's webhook")
		}
		if !strings.Contains(err.Error(), `"pods.muster-controller.muster.dev"`) {
			t.Errorf("the error does not name muster-controller's webhook: %v", err)
		}
		resumeController()
		framework.Eventually(t, "a grouped pod created once muster-controller is back", func(ctx context.Context) (bool, error) {
			_, err := pods.Create(ctx, framework.MemberPod(ns, "job", 9, "100m").Obj(), metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				return true, nil
			}
			return false, err
		})
	})
}

// removeFinalizers is the JSON patch that removes an object's finalizers,
// as the controller that owns it would.
const removeFinalizers = `[{"op":"remove","path":"/metadata/finalizers"}]`

// waitGone waits until get says the object is not found.
func waitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	framework.Eventually(t, what+" gone", func(ctx context.Context) (bool, error) {
		if err := get(ctx); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("still there: %v", err)
		}
		return true, nil
	})
}
