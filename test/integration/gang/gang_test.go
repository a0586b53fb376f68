package gang

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestGangThatFitsIsBoundWhole: a gang of 8 on nodes with room for 8.
func TestGangThatFitsIsBoundWhole(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	framework.CreatePodGroup(t, ns, "job", 8, nil)
	createGang(t, ns, "job", 8, "1", "")

	waitForBound(t, ns, "job", 8)
	note := framework.WaitForEvent(t, ns, "job", "GangAdmitted")
	if want := "8/8 members placed; all are allowed to bind"; note != want {
		t.Errorf("GangAdmitted says %q, want %q", note, want)
	}
}

// TestGangThatDoesNotFitWaitsWhole: a gang of 8 where only 7 fit binds
// nothing, says why, and is bound whole once a node is added.
func TestGangThatDoesNotFitWaitsWhole(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "7")
	watch := watchGangs(t, ns, map[string]int{"job": 8})
	framework.CreatePodGroup(t, ns, "job", 8, nil)
	createGang(t, ns, "job", 8, "1", "")

	note := framework.WaitForEvent(t, ns, "job", "GangRejected")
	if want := "fits on no node"; !strings.Contains(note, want) {
		t.Errorf("GangRejected says %q, want it to say %q", note, want)
	}
	if n := watch.everBoundCount("job"); n != 0 {
		t.Fatalf("%d of 8 members were bound while only 7 fit", n)
	}

	framework.AddPoolNode(t, ns, ns+"-extra", "2")
	waitForBound(t, ns, "job", 8)
}

// TestCompetingGangsDoNotDeadlock: two gangs each needing 60% of the nodes,
// submitted at the same moment. One is bound whole and the other not at
// all; once the first's pods finish and leave it room, the second is bound
// whole.
func TestCompetingGangsDoNotDeadlock(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "5")
	watch := watchGangs(t, ns, map[string]int{"a": 6, "b": 6})
	framework.CreatePodGroup(t, ns, "a", 6, nil)
	framework.CreatePodGroup(t, ns, "b", 6, nil)
	createInterleaved(t, ns, map[string]int{"a": 6, "b": 6}, "3s")

	// Whichever wins, it wins whole, and the other has nothing bound.
	var winner, loser string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(context.Context) (bool, error) {
		switch {
		case watch.everBoundCount("a") == 6:
			winner, loser = "a", "b"
		case watch.everBoundCount("b") == 6:
			winner, loser = "b", "a"
		}
		return winner != "", nil
	})
	if err != nil {
		t.Fatalf("neither gang was bound whole: a has %d, b has %d", watch.everBoundCount("a"), watch.everBoundCount("b"))
	}
	if n := watch.everBoundCount(loser); n != 0 {
		t.Errorf("gang %s has %d pods bound while %s holds the room", loser, n, winner)
	}

	waitForBound(t, ns, loser, 6)
	// The watch orders the binds and the finishes; it may not have seen
	// the binds the list above saw.
	framework.Eventually(t, "the watch seeing "+loser+" bound", func(context.Context) (bool, error) {
		if n := watch.everBoundCount(loser); n != 6 {
			return false, fmt.Errorf("%d of 6 seen bound", n)
		}
		return true, nil
	})
	// Of the ten CPUs, the loser's six fit only once at least two of the
	// winner's pods have finished; it may be bound as soon as they fit.
	if n := watch.finishedBeforeBound(winner, loser); n < 2 {
		t.Errorf("gang %s was bound while %s held its room (%d/6 finished)", loser, winner, n)
	}
	watch.check(t)
}

// TestManyGangsNeverHalfBound: 20 gangs of random sizes compete for room
// for about half of them. No gang is ever left partially bound, and every
// gang runs once earlier ones finish.
func TestManyGangsNeverHalfBound(t *testing.T) {
	ns := framework.NewNamespace(t)
	random := rand.New(rand.NewPCG(20, 26))
	sizes := map[string]int{}
	total := 0
	for i := range 20 {
		size := 2 + random.IntN(5)
		sizes[fmt.Sprintf("g%02d", i)] = size
		total += size
	}
	// Room for about half of the pods at once, and for the largest gang,
	// on 3 nodes that the gangs do not fill exactly: some gang always meets
	// a full cluster with part of its members placed.
	perNode := total/6 + 1
	framework.NodePool(t, ns, 3, fmt.Sprint(perNode))
	t.Logf("20 gangs, %d pods, %d CPUs", total, 3*perNode)

	watch := watchGangs(t, ns, sizes)
	for group, size := range sizes {
		framework.CreatePodGroup(t, ns, group, int32(size), nil)
	}
	createInterleaved(t, ns, sizes, "2s")

	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*framework.Timeout, true, func(context.Context) (bool, error) {
		for group, size := range sizes {
			if watch.finishedCount(group) < size {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for group, size := range sizes {
			t.Logf("gang %s: %d/%d bound, %d finished", group, watch.everBoundCount(group), size, watch.finishedCount(group))
		}
		watch.check(t)
		t.Fatalf("not every gang ran: %v", err)
	}
	watch.check(t)
}

// TestSameNamedGroupsInTwoNamespacesAreApart: a group never counts pods of
// another namespace, even under the same name.
func TestSameNamedGroupsInTwoNamespacesAreApart(t *testing.T) {
	complete := framework.NewNamespace(t)
	incomplete := framework.NewNamespace(t)
	framework.NodePool(t, complete, 1, "8")
	framework.NodePool(t, incomplete, 1, "8")
	framework.CreatePodGroup(t, complete, "job", 3, nil)
	framework.CreatePodGroup(t, incomplete, "job", 3, nil)
	createGang(t, incomplete, "job", 2, "1", "")
	createGang(t, complete, "job", 3, "1", "")

	waitForBound(t, complete, "job", 3)
	// Had the incomplete group counted the other namespace's pods, it would
	// have been released together with them.
	if n := boundCount(t, incomplete, "job"); n != 0 {
		t.Errorf("the incomplete group in %s has %d pods bound", incomplete, n)
	}
	done := waitForPodGroup(t, complete, "job", "Running with 3 running", func(pg *v1alpha1.PodGroup) bool {
		return pg.Status.Phase == v1alpha1.PodGroupRunning && pg.Status.Running == 3
	})
	if done.Status.ScheduleStartTime.IsZero() {
		t.Errorf("the complete group has no scheduleStartTime")
	}
	waiting := waitForPodGroup(t, incomplete, "job", "Pending", func(pg *v1alpha1.PodGroup) bool {
		return pg.Status.Phase == v1alpha1.PodGroupPending
	})
	if waiting.Status.Running != 0 || !waiting.Status.ScheduleStartTime.IsZero() {
		t.Errorf("the incomplete group's status counts another namespace's pods: %+v", waiting.Status)
	}
	waitForCondition(t, incomplete, "job-0", "waiting for 1 more pods of group "+incomplete+"/job (2/3)")
	framework.CreatePods(t, framework.InPool(framework.MemberPod(incomplete, "job", 2, "1").Obj(), incomplete))
	waitForBound(t, incomplete, "job", 3)
}

// TestPodsWithoutAGroupAndWithAMissingGroup: a pod without the group label
// is scheduled as usual by the same profile; a pod naming a PodGroup that
// does not exist waits, and is scheduled once the PodGroup is created.
func TestPodsWithoutAGroupAndWithAMissingGroup(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "8")
	orphan := framework.InPool(framework.MemberPod(ns, "later", 0, "1").Obj(), ns)
	plain := plainPod(ns, "plain-0", "1")
	framework.CreatePods(t, orphan, plain)

	framework.WaitForPod(t, ns, plain.Name, "bound", framework.IsBound)
	if n := boundCount(t, ns, "later"); n != 0 {
		t.Fatalf("a pod whose PodGroup does not exist was bound")
	}
	waitForCondition(t, ns, orphan.Name, topology.WaitingForPodGroupMessage(types.NamespacedName{Namespace: ns, Name: "later"}, topology.GroupLabelField))
	framework.CreatePodGroup(t, ns, "later", 1, nil)
	framework.WaitForPod(t, ns, orphan.Name, "bound", framework.IsBound)
}

// TestMinMemberAbovePodCountWaitsForTheMissingPods: a gang with fewer pods
// than minMember waits, and is admitted once the missing pods exist.
func TestMinMemberAbovePodCountWaitsForTheMissingPods(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "8")
	framework.CreatePodGroup(t, ns, "job", 4, nil)
	createGang(t, ns, "job", 3, "1", "")
	// Proof that the scheduler has been at work in this namespace: a pod
	// of the same pool without a group is bound meanwhile.
	plain := plainPod(ns, "plain-0", "1")
	framework.CreatePods(t, plain)
	framework.WaitForPod(t, ns, plain.Name, "bound", framework.IsBound)
	if n := boundCount(t, ns, "job"); n != 0 {
		t.Fatalf("%d members of a gang short of its minMember were bound", n)
	}
	waitForCondition(t, ns, "job-0", "waiting for 1 more pods of group "+ns+"/job (3/4)")

	framework.CreatePods(t, framework.InPool(framework.MemberPod(ns, "job", 3, "1").Obj(), ns))
	waitForBound(t, ns, "job", 4)
}

// TestGangMetricsAreServed: the scheduler's /metrics carries the gang
// admission latency, the attempts by result and the waiting gangs.
func TestGangMetricsAreServed(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	framework.CreatePodGroup(t, ns, "job", 2, nil)
	createGang(t, ns, "job", 2, "1", "")
	waitForBound(t, ns, "job", 2)

	metrics := framework.SchedulerMetrics(t)
	for _, want := range []string{
		"muster_gang_admission_duration_seconds_count",
		`muster_gang_attempts_total{result="admitted"}`,
		"muster_gangs_waiting",
	} {
		if value, ok := metrics[want]; !ok {
			t.Errorf("/metrics has no %s", want)
		} else if strings.HasPrefix(want, "muster_gang_") && value < 1 {
			t.Errorf("%s = %v after a gang was admitted, want at least 1", want, value)
		}
	}
}

// TestAGangsMembersShareOneSchedulingResult: muster's profile keeps 1.37's
// opportunistic batching. A gang's members are popped back to back with
// one signature, each filling a node, so each after the first is placed
// on the node its predecessor's cycle ranked next, without filtering and
// scoring every node again.
func TestAGangsMembersShareOneSchedulingResult(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 4, "4")
	hintsUsed := `scheduler_batch_attempts_total{profile="muster-scheduler",result="hint_used"}`
	before := framework.SchedulerMetrics(t)[hintsUsed]
	framework.CreatePodGroup(t, ns, "job", 4, nil)
	createGang(t, ns, "job", 4, "3", "")
	waitForBound(t, ns, "job", 4)

	if used := framework.SchedulerMetrics(t)[hintsUsed] - before; used < 1 {
		t.Errorf("no member of the gang was placed on a batch's hint (%s rose by %v); batching is off for muster's profile", hintsUsed, used)
	}
}
