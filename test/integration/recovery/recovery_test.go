package recovery

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// bindings records which members of each group are bound, and whether a
// member of one group was ever bound while another group was partly bound.
type bindings struct {
	mu    sync.Mutex
	bound map[string]sets.Set[string]
	// crossed lists the binds of a group that happened while the watched
	// group had some, but not all, of its members bound.
	crossed []string
}

func watchBindings(t *testing.T, namespace, watched string, size int) *bindings {
	b := &bindings{bound: map[string]sets.Set[string]{}}
	framework.WatchPods(t, namespace, func(old, pod *corev1.Pod) {
		if pod.Spec.NodeName == "" || (old != nil && old.Spec.NodeName != "") {
			return
		}
		group := pod.Labels[v1alpha1.PodGroupLabel]
		b.mu.Lock()
		defer b.mu.Unlock()
		if n := b.bound[watched].Len(); group != watched && n > 0 && n < size {
			b.crossed = append(b.crossed, fmt.Sprintf("%s bound while %s had %d/%d", pod.Name, watched, n, size))
		}
		if b.bound[group] == nil {
			b.bound[group] = sets.New[string]()
		}
		b.bound[group].Insert(pod.Name)
	})
	return b
}

func (b *bindings) count(group string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bound[group].Len()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, framework.Timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestCrashMidBindCompletesTheGangFirst crashes muster-scheduler while gang
// late, which fills the pool, is half bound, with an older gang early
// waiting for room. After the restart late must be completed before
// anything else gets its room: it goes ahead of early in the queue,
// although early is older and comes first by name.
func TestCrashMidBindCompletesTheGangFirst(t *testing.T) {
	// It failed once in a loaded make test, late never completing after
	// the restart, and never alone: the restarted scheduler's log says why.
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	// early is older, and waits for its last member.
	framework.CreatePodGroup(t, ns, "early", 4, nil)
	for i := range 3 {
		framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "early", i, "1").Obj(), ns))
	}
	// Creation times count in whole seconds.
	time.Sleep(1100 * time.Millisecond)
	held := holdBinds(t, ns, "late-4", "late-5", "late-6", "late-7")
	seen := watchBindings(t, ns, "late", 8)

	framework.CreatePodGroup(t, ns, "late", 8, nil)
	for i := range 8 {
		framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "late", i, "1").Obj(), ns))
	}
	waitUntil(t, "late half bound, its other binds held", func() bool { return seen.count("late") == 4 && held.heldCount() == 4 })
	// early is complete now, but late's reservations hold the pool.
	framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "early", 3, "1").Obj(), ns))

	if err := framework.Cluster().Restart(context.Background(), "muster-scheduler"); err != nil {
		t.Fatalf("restarting muster-scheduler: %v", err)
	}
	held.letGo()

	waitUntil(t, "gang late complete", func() bool { return seen.count("late") == 8 })
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.crossed) > 0 {
		t.Errorf("another gang took room while late was partly bound: %s", strings.Join(seen.crossed, "; "))
	}
	if n := seen.bound["early"].Len(); n > 0 {
		t.Errorf("gang early has %d members bound in a pool that late fills", n)
	}
}

// TestPartlyBoundGangThatCannotCompleteIsEvicted leaves a gang with half
// its members bound and no room for the rest: within its schedule
// timeout, counted from its last bind, its bound members are evicted with
// an event, so that it holds no room it cannot use.
func TestPartlyBoundGangThatCannotCompleteIsEvicted(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	createTimedPodGroup(t, ns, "a", 4, 5)
	// Two members bound, as a crash between binds would leave them, and
	// two that need more room than the node has left.
	for i := range 2 {
		framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "a", i, "1").Node(ns+"-0").Obj(), ns))
	}
	for i := 2; i < 4; i++ {
		framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "a", i, "2").Obj(), ns))
	}
	note := framework.WaitForEvent(t, ns, "a", "GangEvicted")
	if !strings.Contains(note, "evicted the bound members a-0, a-1") {
		t.Errorf("the event says %q; want it to name the evicted members", note)
	}
	waitUntil(t, "the bound members gone", func() bool {
		pods, err := framework.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, pod := range pods.Items {
			if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
}

// createTimedPodGroup creates a gang-only PodGroup with its own schedule
// timeout.
func createTimedPodGroup(t *testing.T, namespace, name string, minMember, timeoutSeconds int32) {
	t.Helper()
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember, ScheduleTimeoutSeconds: &timeoutSeconds},
	}
	if _, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(namespace).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s: %v", name, err)
	}
}

// TestLoweredMinMemberBindsWaitingMembersAtOnce lowers minMember under
// three members waiting at Permit for a fourth that is held by a
// scheduling gate: they bind at once, not when their (long) schedule
// timeout ends.
func TestLoweredMinMemberBindsWaitingMembersAtOnce(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "8")
	createTimedPodGroup(t, ns, "a", 4, 600)
	for i := range 3 {
		framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "a", i, "1").Obj(), ns))
	}
	framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "a", 3, "1").SchedulingGates([]string{"test.muster.dev/later"}).Obj(), ns))
	waitUntil(t, "three members waiting at Permit", func() bool {
		return framework.SchedulerMetrics(t)["muster_gangs_waiting"] >= 1
	})

	// A patch, since muster-controller writes the PodGroup's status
	// meanwhile.
	if _, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Patch(context.Background(), "a", types.MergePatchType,
		[]byte(`{"spec":{"minMember":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("lowering minMember: %v", err)
	}
	for i := range 3 {
		framework.WaitForPod(t, ns, fmt.Sprintf("a-%d", i), "bound", framework.IsBound)
	}
}

// scheduleAttempts is the scheduler's count of scheduling attempts, of
// every result.
func scheduleAttempts(t *testing.T) float64 {
	var sum float64
	for name, value := range framework.SchedulerMetrics(t) {
		if strings.HasPrefix(name, "scheduler_schedule_attempts_total") {
			sum += value
		}
	}
	return sum
}

// TestStatusOnlyWritesCauseNoSchedulingAttempt writes a waiting gang's
// PodGroup status again and again, as muster-controller does: no member
// is tried again, since nothing that could help it changed.
func TestStatusOnlyWritesCauseNoSchedulingAttempt(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	framework.CreatePodGroup(t, ns, "a", 2, nil)
	for i := range 2 {
		framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "a", i, "2").Obj(), ns))
	}
	framework.WaitForEvent(t, ns, "a", "GangRejected")
	// Settled: no attempt for as long as the scheduler's longest pod
	// backoff, so that none still in flight is counted below.
	settled := scheduleAttempts(t)
	for round := 1; ; round++ {
		time.Sleep(12 * time.Second)
		now := scheduleAttempts(t)
		if now == settled {
			break
		}
		if round == 10 {
			t.Fatalf("the scheduler kept trying the gang: %v attempts", now)
		}
		settled = now
	}

	for i := range 10 {
		patch := fmt.Sprintf(`{"status":{"occupiedBy":"status write %d"}}`, i)
		if _, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Patch(context.Background(), "a", types.MergePatchType,
			[]byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("writing the status of PodGroup a: %v", err)
		}
	}
	// Long enough for a woken member to clear its backoff and be tried.
	time.Sleep(12 * time.Second)
	if now := scheduleAttempts(t); now != settled {
		t.Errorf("status-only writes caused %v scheduling attempts", now-settled)
	}
}

// TestARaisedMinMemberNeverEvictsAGangAdmittedBeforeARestart: a gang
// admitted whole has its minMember raised while muster-scheduler runs,
// which then restarts, as a rollout or a change of leader does, and members
// that cannot fit come. The gang once had its quorum, which its PodGroup
// records, so it is never evicted. A control gang that never had its
// quorum, bound after, with the same schedule timeout, is evicted: by
// then the admitted gang's deadline has passed too.
func TestARaisedMinMemberNeverEvictsAGangAdmittedBeforeARestart(t *testing.T) {
	tests := []struct {
		name          string
		bound, raised int32
		waitingBefore int
		waitingAfter  int
	}{
		{name: "2 raised to 3, a member that cannot fit added after the restart", bound: 2, raised: 3, waitingAfter: 1},
		{name: "4 raised to 6 with members waiting already", bound: 4, raised: 6, waitingBefore: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			framework.LogTailOnFailure(t, "muster-scheduler")
			ns := framework.NewNamespace(t)
			framework.NodePool(t, ns, 1, "8")
			createTimedPodGroup(t, ns, "a", tt.bound, 5)
			for i := range tt.bound {
				framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "a", int(i), "1").Obj(), ns))
			}
			for i := range tt.bound {
				framework.WaitForPod(t, ns, fmt.Sprintf("a-%d", i), "bound", framework.IsBound)
			}
			framework.Eventually(t, "gang a's admission recorded on its PodGroup", func(ctx context.Context) (bool, error) {
				pg, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "a", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if _, ok := pg.Annotations[topology.QuorumReachedAnnotation]; !ok {
					return false, fmt.Errorf("PodGroup a has annotations %v", pg.Annotations)
				}
				return true, nil
			})
			// Members that need more than the node has left.
			addWaiting := func(from, count int) {
				for i := from; i < from+count; i++ {
					framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "a", i, "8").Obj(), ns))
				}
			}
			addWaiting(int(tt.bound), tt.waitingBefore)
			if _, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Patch(context.Background(), "a", types.MergePatchType,
				fmt.Appendf(nil, `{"spec":{"minMember":%d}}`, tt.raised), metav1.PatchOptions{}); err != nil {
				t.Fatalf("raising minMember: %v", err)
			}
			if err := framework.Cluster().Restart(context.Background(), "muster-scheduler"); err != nil {
				t.Fatalf("restarting muster-scheduler: %v", err)
			}
			addWaiting(int(tt.bound)+tt.waitingBefore, tt.waitingAfter)

			createTimedPodGroup(t, ns, "control", 2, 5)
			framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "control", 0, "1").Node(ns+"-0").Obj(), ns))
			framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "control", 1, "8").Obj(), ns))
			framework.WaitForEvent(t, ns, "control", "GangEvicted")

			for i := range tt.bound {
				pod, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), fmt.Sprintf("a-%d", i), metav1.GetOptions{})
				if err != nil || pod.DeletionTimestamp != nil {
					t.Errorf("gang a's member a-%d was evicted (%v)", i, err)
				}
			}
			events, err := framework.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.Reason == "GangEvicted" && e.Regarding.Name == "a" {
					t.Errorf("gang a, admitted before, was evicted: %s", e.Note)
				}
			}
		})
	}
}
