package realnodes

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// victimScript logs SIGTERM and the grace it takes before exiting.
const victimScript = `trap 'echo "SIGTERM received"; sleep 2; echo "exiting after 2s of grace"; exit 0' TERM
echo running
while true; do sleep 0.2; done`

// createPriorityClass creates a PriorityClass until the test ends.
func createPriorityClass(t *testing.T, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := framework.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PriorityClass %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = framework.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// gangMember is a pod of group on a real node that asks for most of a
// node's CPU, so that one fits per node.
func gangMember(t *testing.T, namespace, group string, i int, priorityClass string, script string) *corev1.Pod {
	t.Helper()
	image, err := localcluster.LocalImage(imagesDir(), "muster-example-python")
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%d", group, i), Labels: map[string]string{topology.GroupLabel: group}},
		Spec: corev1.PodSpec{
			SchedulerName:                 localcluster.SchedulerName,
			PriorityClassName:             priorityClass,
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Containers: []corev1.Container{{
				Name: "work", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:   []string{"bash", "-c", script},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1200m")}},
			}},
		},
	}
}

// followedLog is a container's log, streamed until the container exits.
type followedLog struct {
	mu   sync.Mutex
	text strings.Builder
	done chan struct{}
}

func followLog(t *testing.T, namespace, pod string) *followedLog {
	t.Helper()
	stream, err := framework.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(context.Background())
	if err != nil {
		t.Fatalf("following the log of %s: %v", pod, err)
	}
	f := &followedLog{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer stream.Close()
		lines := bufio.NewScanner(stream)
		for lines.Scan() {
			f.mu.Lock()
			f.text.WriteString(lines.Text() + "\n")
			f.mu.Unlock()
		}
	}()
	return f
}

// TestAPreemptedGangsContainersGetSIGTERMAndTheirGraceBeforeThePreemptorBinds:
// a running gang fills both real nodes; a gang of higher priority takes
// them. Each victim's container logs SIGTERM and exits after its grace;
// only then are the preemptor's members bound.
func TestAPreemptedGangsContainersGetSIGTERMAndTheirGraceBeforeThePreemptorBinds(t *testing.T) {
	namespace := framework.NewNamespace(t)
	low, high := namespace+"-low", namespace+"-high"
	createPriorityClass(t, low, 10)
	createPriorityClass(t, high, 1000)

	// When each victim's container exited, as its kubelet reported it
	// before the pod was removed.
	var mu sync.Mutex
	exited := map[string]time.Time{}
	framework.WatchPods(t, namespace, func(_, pod *corev1.Pod) {
		for _, c := range pod.Status.ContainerStatuses {
			if c.State.Terminated != nil && strings.HasPrefix(pod.Name, "victim-") {
				mu.Lock()
				exited[pod.Name] = c.State.Terminated.FinishedAt.Time
				mu.Unlock()
			}
		}
	})
	framework.CreatePodGroup(t, namespace, "victim", 2, nil)
	framework.CreatePods(t, gangMember(t, namespace, "victim", 0, low, victimScript), gangMember(t, namespace, "victim", 1, low, victimScript))
	var logs []*followedLog
	for i := range 2 {
		name := fmt.Sprintf("victim-%d", i)
		framework.Eventually(t, name+" running", func(ctx context.Context) (bool, error) {
			pod, err := framework.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pod.Status.Phase != corev1.PodRunning {
				return false, fmt.Errorf("%s", describe(*pod))
			}
			return true, nil
		})
		logs = append(logs, followLog(t, namespace, name))
	}

	framework.CreatePodGroup(t, namespace, "preemptor", 2, nil)
	framework.CreatePods(t, gangMember(t, namespace, "preemptor", 0, high, "sleep 300"), gangMember(t, namespace, "preemptor", 1, high, "sleep 300"))
	bound := framework.Eventually(t, "the preemptor's 2 members bound", func(ctx context.Context) ([]time.Time, error) {
		var times []time.Time
		for i := range 2 {
			pod, err := framework.Client.CoreV1().Pods(namespace).Get(ctx, fmt.Sprintf("preemptor-%d", i), metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			at := conditionTime(pod, corev1.PodScheduled)
			if at.IsZero() {
				return nil, fmt.Errorf("preemptor-%d is not bound: %s", i, describe(*pod))
			}
			times = append(times, at)
		}
		return times, nil
	})
	for i, log := range logs {
		select {
		case <-log.done:
		case <-time.After(framework.Timeout):
			t.Fatalf("victim-%d's log did not end", i)
		}
		text := log.text.String()
		if !strings.Contains(text, "SIGTERM received") || !strings.Contains(text, "exiting after 2s of grace") {
			t.Errorf("victim-%d did not log SIGTERM and its grace:\n%s", i, text)
		}
		mu.Lock()
		end, ok := exited[fmt.Sprintf("victim-%d", i)]
		mu.Unlock()
		if !ok {
			t.Errorf("victim-%d's kubelet never reported its container's exit", i)
			continue
		}
		// Both times are kept to the second: the same second is in order.
		for j, at := range bound {
			if at.Before(end) {
				t.Errorf("preemptor-%d was bound at %s, before victim-%d's container exited at %s", j, at, i, end)
			}
		}
	}
}
