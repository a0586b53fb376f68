package gangpreemption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func candidatesOn(nodes ...string) []preemption.Candidate {
	var cs []preemption.Candidate
	for _, n := range nodes {
		cs = append(cs, &gangCandidate{node: n, victims: &extenderv1.Victims{}})
	}
	return cs
}

func namesOf(cs []preemption.Candidate) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name())
	}
	return names
}

func TestAnAlikeMemberReusesResultsOnlyOnNodesUnchangedSince(t *testing.T) {
	a := newAlike()
	worker := a.resultsFor(fwk.PodSignature(`{"cpu":"3"}`))
	worker.fail("n1", fwk.Unschedulable)
	worker.fail("n2", fwk.UnschedulableAndUnresolvable)
	worker.keepCandidates(candidatesOn("n1", "n3"))
	launcher := a.resultsFor(fwk.PodSignature(`{"cpu":"1"}`))
	launcher.fail("n1", fwk.Unschedulable)

	again := a.resultsFor(fwk.PodSignature(`{"cpu":"3"}`))
	code, ok := again.failedOn("n2")
	assert.True(t, ok, "a member signed alike finds the earlier member's result")
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, code)

	a.changed("n1")
	_, ok = again.failedOn("n1")
	assert.False(t, ok, "a node the search changed is filtered again")
	_, ok = launcher.failedOn("n1")
	assert.False(t, ok, "for every signature")
	_, ok = again.failedOn("n2")
	assert.True(t, ok, "a node left unchanged keeps its result")
	assert.Equal(t, []string{"n3"}, namesOf(again.reusableCandidates()), "a candidate on a changed node is dropped")
}

func TestCandidatesAreReusedWhileHalfOfThoseFoundAreLeft(t *testing.T) {
	a := newAlike()
	r := a.resultsFor(fwk.PodSignature("worker"))
	r.keepCandidates(candidatesOn("n1", "n2", "n3", "n4"))

	a.changed("n1")
	a.changed("n2")
	assert.Equal(t, []string{"n3", "n4"}, namesOf(r.reusableCandidates()), "two of four found are left")
	a.changed("n3")
	assert.Empty(t, r.reusableCandidates(), "one of four: a fresh dry run chooses better")
}

func TestForgettingDropsEveryResult(t *testing.T) {
	a := newAlike()
	r := a.resultsFor(fwk.PodSignature("worker"))
	r.fail("n1", fwk.Unschedulable)
	r.keepCandidates(candidatesOn("n2"))

	a.forget()
	again := a.resultsFor(fwk.PodSignature("worker"))
	_, ok := again.failedOn("n1")
	assert.False(t, ok)
	assert.Empty(t, again.reusableCandidates())
}

func TestAPodTheFrameworkCannotSignReusesNothing(t *testing.T) {
	a := newAlike()
	r := a.resultsFor(nil)
	assert.Nil(t, r)
	r.fail("n1", fwk.Unschedulable)
	r.keepCandidates(candidatesOn("n1"))
	_, ok := r.failedOn("n1")
	assert.False(t, ok)
	assert.Empty(t, r.reusableCandidates())
	assert.Empty(t, a.bySignature)
}

// TestACandidateIsDroppedWhenANodeOfItsVictimsChanges: an elastic group's
// candidate on n1 takes the workers above n1's, on n2 too; once the search
// changes n2, reusing it would take a worker already taken there.
func TestACandidateIsDroppedWhenANodeOfItsVictimsChanges(t *testing.T) {
	a := newAlike()
	r := a.resultsFor(fwk.PodSignature("worker"))
	onN1 := &gangCandidate{node: "n1", victims: &extenderv1.Victims{Pods: []*corev1.Pod{
		st.MakePod().Name("el-3").Node("n1").Obj(), st.MakePod().Name("el-5").Node("n2").Obj(),
	}}}
	onN3 := &gangCandidate{node: "n3", victims: &extenderv1.Victims{Pods: []*corev1.Pod{st.MakePod().Name("solo").Node("n3").Obj()}}}
	r.keepCandidates([]preemption.Candidate{onN1, onN3})

	a.changed("n2")
	assert.Equal(t, []string{"n3"}, namesOf(r.candidates), "the candidate with a victim on n2 is dropped")
}
