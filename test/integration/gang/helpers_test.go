package gang

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// plainPod is a pod of the test's node pool that belongs to no group,
// named name and asking for cpu.
func plainPod(namespace, name, cpu string) *corev1.Pod {
	pod := framework.MemberPod(namespace, "none", 0, cpu).Name(name).Obj()
	delete(pod.Labels, topology.GroupLabel)
	return framework.InPool(pod, namespace)
}

// createGang creates size members of group, each asking for cpu, on the
// test's node pool; runFor, when set, makes them finish that long after
// they become Ready.
func createGang(t *testing.T, namespace, group string, size int, cpu, runFor string) {
	t.Helper()
	for i := range size {
		pod := framework.MemberPod(namespace, group, i, cpu)
		if runFor != "" {
			pod = pod.Annotation(localcluster.SimRunForAnnotation, runFor)
		}
		framework.CreatePods(t, framework.InPool(pod.Obj(), namespace))
	}
}

// createInterleaved creates the members of several gangs, one CPU each, in
// turn: the first member of each gang, then the second, and so on, so that
// no gang is complete long before the others.
func createInterleaved(t *testing.T, namespace string, sizes map[string]int, runFor string) {
	t.Helper()
	groups := sets.List(sets.KeySet(sizes))
	for i := 0; ; i++ {
		created := false
		for _, group := range groups {
			if i < sizes[group] {
				pod := framework.MemberPod(namespace, group, i, "1").Annotation(localcluster.SimRunForAnnotation, runFor)
				framework.CreatePods(t, framework.InPool(pod.Obj(), namespace))
				created = true
			}
		}
		if !created {
			return
		}
	}
}

func boundCount(t *testing.T, namespace, group string) int {
	t.Helper()
	pods, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: topology.GroupLabel + "=" + group,
	})
	if err != nil {
		t.Fatalf("listing pods of %s: %v", group, err)
	}
	n := 0
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func waitForBound(t *testing.T, namespace, group string, want int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(context.Context) (bool, error) {
		return boundCount(t, namespace, group) == want, nil
	})
	if err != nil {
		t.Fatalf("group %s/%s never had %d pods bound (has %d): %v", namespace, group, want, boundCount(t, namespace, group), err)
	}
}

// waitForCondition waits until the pod's PodScheduled condition says why it
// waits, with exactly the message.
func waitForCondition(t *testing.T, namespace, name, message string) {
	t.Helper()
	framework.WaitForPod(t, namespace, name, "PodScheduled="+message, func(pod *corev1.Pod) bool {
		c := framework.Condition(pod, corev1.PodScheduled)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonSchedulingGated && c.Message == message
	})
}

// waitForPodGroup waits until the PodGroup's status satisfies cond.
func waitForPodGroup(t *testing.T, namespace, name, what string, cond func(*v1alpha1.PodGroup) bool) *v1alpha1.PodGroup {
	t.Helper()
	var last *v1alpha1.PodGroup
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		pg, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pg
		return cond(pg), nil
	})
	if err != nil {
		t.Fatalf("PodGroup %s/%s never became %s: %v; last status %+v", namespace, name, what, err, last)
	}
	return last
}

// gangWatch follows every pod of a namespace, in the order the API server
// committed their changes, and checks the gang invariant: no gang stays
// with some but not all of its minMember pods bound. A pod counts as bound
// from its binding on, through its end, so a gang whose pods finish one by
// one is not mistaken for a partial one.
//
// "Stays" is read from the order of events, not from a clock: a gang that
// is still partial when a pod finishes that was bound after the gang's
// first member has been partial for at least that pod's whole run
// (seconds), while the bindings of an admitted gang land within
// milliseconds of each other.
type gangWatch struct {
	mu         sync.Mutex
	seq        int
	minMember  map[string]int
	everBound  map[string]sets.Set[string]
	boundAt    map[string]int // pod -> position of its binding
	firstBound map[string]int // gang -> position of its first binding
	finished   map[string]sets.Set[string]
	finishedAt map[string]int // pod -> position of its end
	violations []string
}

func watchGangs(t *testing.T, namespace string, minMember map[string]int) *gangWatch {
	t.Helper()
	w := &gangWatch{
		minMember:  minMember,
		everBound:  map[string]sets.Set[string]{},
		boundAt:    map[string]int{},
		firstBound: map[string]int{},
		finished:   map[string]sets.Set[string]{},
		finishedAt: map[string]int{},
	}
	framework.WatchPods(t, namespace, w.observe)
	return w
}

func (w *gangWatch) observe(_, pod *corev1.Pod) {
	group := pod.Labels[topology.GroupLabel]
	if group == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	if pod.Spec.NodeName != "" && w.boundAt[pod.Name] == 0 {
		w.boundAt[pod.Name] = w.seq
		if w.everBound[group] == nil {
			w.everBound[group] = sets.New[string]()
			w.firstBound[group] = w.seq
		}
		w.everBound[group].Insert(pod.Name)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		return
	}
	if w.finished[group] == nil {
		w.finished[group] = sets.New[string]()
	}
	if w.finished[group].Has(pod.Name) {
		return
	}
	w.finished[group].Insert(pod.Name)
	w.finishedAt[pod.Name] = w.seq
	var partial []string
	for g, bound := range w.everBound {
		if n := bound.Len(); n > 0 && n < w.minMember[g] && w.boundAt[pod.Name] > w.firstBound[g] {
			partial = append(partial, fmt.Sprintf("%s (%d/%d)", g, n, w.minMember[g]))
		}
	}
	if len(partial) > 0 {
		w.violations = append(w.violations, fmt.Sprintf("%s ran its whole course while these stayed partially bound: %s", pod.Name, strings.Join(partial, ", ")))
	}
}

func (w *gangWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		t.Error(v)
	}
}

func (w *gangWatch) everBoundCount(group string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.everBound[group].Len()
}

// finishedBeforeBound counts the pods of group that had finished when
// other's first pod was bound, both as the watch saw them: the caller
// waits until the watch has seen other bound.
func (w *gangWatch) finishedBeforeBound(group, other string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for pod := range w.finished[group] {
		if w.finishedAt[pod] < w.firstBound[other] {
			n++
		}
	}
	return n
}

func (w *gangWatch) finishedCount(group string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.finished[group].Len()
}
