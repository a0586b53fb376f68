package launchorder

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// rolePods creates count pods of role in group, each asking for cpu on the
// test's node pool and turning Ready readyAfter after they start.
func rolePods(t *testing.T, namespace, group, role string, count int, cpu string, readyAfter time.Duration) {
	t.Helper()
	for i := range count {
		pod := st.MakePod().Namespace(namespace).Name(fmt.Sprintf("%s-%s-%d", group, role, i)).
			SchedulerName(localcluster.SchedulerName).
			Label(topology.GroupLabel, group).Label(topology.RoleLabel, role).Label(topology.IndexLabel, strconv.Itoa(i)).
			Container("registry.k8s.io/pause:3.10").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu})
		if readyAfter > 0 {
			pod = pod.Annotation(localcluster.SimReadyAfterAnnotation, readyAfter.String())
		}
		created := framework.InPool(pod.Obj(), namespace)
		if _, err := framework.Client.CoreV1().Pods(namespace).Create(context.Background(), created, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", created.Name, err)
		}
	}
}

// history records, in the order the API server committed them, the moments
// each pod of a namespace was bound, ran and became Ready. The order of a
// watch is the order of writes, so "bound after Ready" read from it needs
// no clock.
type history struct {
	mu      sync.Mutex
	seq     int
	bound   map[string]int
	running map[string]int
	ready   map[string]int
	binds   map[string]int
}

func record(t *testing.T, namespace string) *history {
	t.Helper()
	h := &history{bound: map[string]int{}, running: map[string]int{}, ready: map[string]int{}, binds: map[string]int{}}
	framework.WatchPods(t, namespace, h.observe)
	return h
}

func (h *history) observe(old, pod *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	if pod.Spec.NodeName != "" && (old == nil || old.Spec.NodeName == "") {
		h.binds[pod.Name]++
	}
	first := func(m map[string]int, happened bool) {
		if _, seen := m[pod.Name]; happened && !seen {
			m[pod.Name] = h.seq
		}
	}
	first(h.bound, pod.Spec.NodeName != "")
	first(h.running, pod.Status.Phase == corev1.PodRunning)
	first(h.ready, podutil.IsPodReady(pod))
}

// when returns the position in the history at which the pod was bound,
// ran or became Ready; 0 if it has not.
func (h *history) when(event map[string]int, pod string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return event[pod]
}

func (h *history) waitFor(t *testing.T, event map[string]int, what string, pods ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, framework.Timeout, true, func(context.Context) (bool, error) {
		for _, pod := range pods {
			if h.when(event, pod) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("not every one of %v was %s: %v", pods, what, err)
	}
}

// after checks that every pod of later happened, in the history, after
// every pod of earlier.
func (h *history) after(t *testing.T, laterEvent map[string]int, later []string, earlierEvent map[string]int, earlier []string, what string) {
	t.Helper()
	last := 0
	for _, pod := range earlier {
		if at := h.when(earlierEvent, pod); at == 0 {
			t.Errorf("%s: %s never happened", what, pod)
		} else if at > last {
			last = at
		}
	}
	for _, pod := range later {
		if at := h.when(laterEvent, pod); at <= last {
			t.Errorf("%s: %s happened at %d, not after %d", what, pod, at, last)
		}
	}
}

func names(group, role string, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%s-%d", group, role, i)
	}
	return out
}
