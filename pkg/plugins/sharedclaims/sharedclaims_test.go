package sharedclaims

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

const ns = "team"

// gangs is a table of gangs: their members, those reserved, and the
// scheduling.k8s.io PodGroups, by name.
type gangs struct {
	members   map[types.NamespacedName][]*corev1.Pod
	reserved  sets.Set[types.UID]
	podGroups map[string]*schedulingv1beta1.PodGroup
}

func (g *gangs) Members(key types.NamespacedName) ([]*corev1.Pod, error) { return g.members[key], nil }
func (g *gangs) IsReserved(_ types.NamespacedName, uid types.UID) bool   { return g.reserved.Has(uid) }

// cycleOf is the record Gang's PreFilter leaves for the pod, a member whose
// gang's attempt it entered, with the scheduling.k8s.io PodGroup it names
// as s's gangs have it.
func cycleOf(s *SharedClaims, pod *corev1.Pod) *groupstate.Cycle {
	key, grouped := topology.GroupOf(pod)
	c := &groupstate.Cycle{Grouped: grouped, Key: key, Entered: grouped}
	if g, ok := s.gangs.(*gangs); ok {
		c.NamedPodGroup = g.podGroups[topology.UpstreamGroupName(pod)]
	}
	return c
}

// recorded is a cycle state holding the pod's record (cycleOf).
func recorded(s *SharedClaims, pod *corev1.Pod) fwk.CycleState {
	state := framework.NewCycleState()
	groupstate.Record(state, cycleOf(s, pod))
	return state
}

// member is a pod of the gang that names the claim.
func member(gang, name, claim string) *corev1.Pod {
	pod := st.MakePod().Namespace(ns).Name(name).UID(name).Label(topology.GroupLabel, gang).Obj()
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	return pod
}

func key(gang string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: gang} }

// allocation is the claim's allocation of gpu-0 on n1.
func allocation() *resourcev1.AllocationResult {
	return devicestest.Held(ns, "shared", "n1", "gpu-0").Status.Allocation
}

// sharing is SharedClaims over the gang "job" of members a, b and c, which
// name the claim "shared", and a's Reserve has allocated it: a is reserved
// and its allocation is in flight.
func sharing(t *testing.T) (*SharedClaims, *gangs, *devicestest.DRA) {
	t.Helper()
	dra := devicestest.On(st.MakeNode().Name("n1").Obj())
	claim := devicestest.Claim(ns, "shared")
	claim.ResourceVersion = "1"
	dra.Claims = append(dra.Claims, claim)
	g := &gangs{members: map[types.NamespacedName][]*corev1.Pod{
		key("job"): {member("job", "a", "shared"), member("job", "b", "shared"), member("job", "c", "shared")},
	}, reserved: sets.New[types.UID]("a")}
	inFlight := claim.DeepCopy()
	inFlight.Status.Allocation = allocation()
	require.NoError(t, dra.ResourceClaims().SignalClaimPendingAllocation(claim.UID, inFlight))
	return NewWithGangs(g, dra, time.Second), g, dra
}

func cached(t *testing.T, dra *devicestest.DRA) *resourcev1.ResourceClaim {
	t.Helper()
	claim, err := dra.ResourceClaims().Get(ns, "shared")
	require.NoError(t, err)
	return claim
}

// preFilter runs PreFilter in a cycle whose record, as Gang's PreFilter
// leaves it first, names the pod's group with no quorum to count: the
// tests of members' consumer entries give one (preFilterInGang).
func preFilter(t *testing.T, s *SharedClaims, pod *corev1.Pod) (fwk.CycleState, *fwk.Status) {
	t.Helper()
	state := recorded(s, pod)
	_, status := s.PreFilter(context.Background(), state, pod, nil)
	return state, status
}

func TestAMemberSharingAClaimIsLentTheAllocationInFlight(t *testing.T) {
	s, _, dra := sharing(t)
	state, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())

	claim := cached(t, dra)
	require.NotNil(t, claim.Status.Allocation, "the cache does not show the claim allocated: DynamicResources would refuse b")
	assert.Equal(t, allocation().Devices, claim.Status.Allocation.Devices, "the claim is lent another allocation than a's")
	assert.Equal(t, "1", claim.ResourceVersion, "the copy lent is not the claim the API server has")
	require.Len(t, borrowedIn(state), 1, "b's cycle does not record what it was lent, for PreBind")
	assert.Equal(t, "a", borrowedIn(state)[0].allocator)
}

func TestEveryLaterMemberSharingTheClaimRecordsTheLoan(t *testing.T) {
	s, _, _ := sharing(t)
	_, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())
	state, status := preFilter(t, s, member("job", "c", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())
	assert.Len(t, borrowedIn(state), 1, "c, which sees the claim allocated by the loan, would not wait for a to write it")
}

func TestNothingIsLentWhenNoMemberNamingTheClaimIsReserved(t *testing.T) {
	s, g, dra := sharing(t)
	g.reserved = sets.New[types.UID]()
	state, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())
	assert.Nil(t, cached(t, dra).Status.Allocation, "an allocation in flight for a pod of no reserved member was lent")
	assert.Empty(t, borrowedIn(state))
}

func TestAnotherGangsMemberIsNotLentTheAllocation(t *testing.T) {
	s, _, dra := sharing(t)
	_, status := preFilter(t, s, member("other", "x", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())
	assert.Nil(t, cached(t, dra).Status.Allocation, "a member of another gang was lent job's allocation")
}

func TestAPodOfAnotherGangWaitsWhileTheClaimIsLent(t *testing.T) {
	s, _, _ := sharing(t)
	_, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())

	for _, pod := range []*corev1.Pod{member("other", "x", "shared"), st.MakePod().Namespace(ns).Name("y").UID("y").Obj()} {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}
		_, status := preFilter(t, s, pod)
		assert.Equal(t, fwk.Unschedulable, status.Code(), "%s, outside the gang, may take a claim that only looks allocated: %v", pod.Name, status.AsError())
		assert.Contains(t, status.Message(), "in the process of being allocated")
	}
}

func TestAPodOfNoClaimByNameIsSkipped(t *testing.T) {
	s, _, _ := sharing(t)
	pod := st.MakePod().Namespace(ns).Name("t").UID("t").Label(topology.GroupLabel, "job").Obj()
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	_, status := preFilter(t, s, pod)
	assert.Equal(t, fwk.Skip, status.Code())
}

func TestALoanWhoseAllocationEndedIsRestored(t *testing.T) {
	s, _, dra := sharing(t)
	_, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())

	// a was unreserved, but DynamicResources' restore ran before the loan:
	// only the allocation in flight is gone.
	dra.ResourceClaims().MaybeRemoveClaimPendingAllocation("shared", true)
	_, status = preFilter(t, s, st.MakePod().Namespace(ns).Name("any").UID("any").Obj())
	require.Equal(t, fwk.Skip, status.Code())
	assert.Nil(t, cached(t, dra).Status.Allocation, "the copy lent still shows the claim allocated: its device would never be free")
	assert.Empty(t, s.loans.byClaim, "the loan is kept after its allocation ended")
}

func TestAClaimWrittenByItsAllocatorIsNotRestored(t *testing.T) {
	s, _, dra := sharing(t)
	_, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())

	written := cached(t, dra).DeepCopy()
	written.ResourceVersion = "2"
	dra.Inform(written)
	dra.ResourceClaims().MaybeRemoveClaimPendingAllocation("shared", true)
	_, status = preFilter(t, s, st.MakePod().Namespace(ns).Name("any").UID("any").Obj())
	require.Equal(t, fwk.Skip, status.Code())
	assert.Equal(t, "2", cached(t, dra).ResourceVersion, "the claim as written was replaced")
	assert.NotNil(t, cached(t, dra).Status.Allocation)
}

func TestPreBindWaitsForTheAllocatorToWriteTheClaim(t *testing.T) {
	s, _, dra := sharing(t)
	state, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())
	_, status = s.PreBindPreFlight(context.Background(), state, member("job", "b", "shared"), "n1")
	require.True(t, status.IsSuccess(), "b, lent an allocation, would not wait at PreBind: %v", status.AsError())

	done := make(chan *fwk.Status)
	go func() { done <- s.PreBind(context.Background(), state, member("job", "b", "shared"), "n1") }()
	select {
	case status := <-done:
		t.Fatalf("PreBind returned %v before the allocation was written", status)
	default:
	}
	written := cached(t, dra).DeepCopy()
	written.ResourceVersion = "2"
	s.dra.(*devicestest.DRA).Inform(written)
	dra.ResourceClaims().MaybeRemoveClaimPendingAllocation("shared", true)
	status = <-done
	assert.True(t, status.IsSuccess(), "b failed once a wrote the allocation: %v", status.AsError())
}

func TestPreBindFailsWhenTheAllocatorDidNotWriteTheClaim(t *testing.T) {
	s, _, dra := sharing(t)
	state, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())

	// a was unreserved: DynamicResources ends the allocation in flight and
	// restores the claim.
	dra.ResourceClaims().MaybeRemoveClaimPendingAllocation("shared", true)
	dra.ResourceClaims().AssumedClaimRestore(ns, "shared")
	status = s.PreBind(context.Background(), state, member("job", "b", "shared"), "n1")
	require.False(t, status.IsSuccess(), "b would bind with a claim no one allocated")
	assert.Contains(t, status.AsError().Error(), "member a did not bind with the allocation of ResourceClaim team/shared")
}

func TestPreBindFailsWhenTheCopyLentOutlivedTheAllocation(t *testing.T) {
	s, _, dra := sharing(t)
	state, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())

	dra.ResourceClaims().MaybeRemoveClaimPendingAllocation("shared", true)
	status = s.PreBind(context.Background(), state, member("job", "b", "shared"), "n1")
	assert.False(t, status.IsSuccess(), "b took the copy lent, which no one wrote, for the claim written")
}

func TestPreBindGivesUpAfterItsTimeout(t *testing.T) {
	s, _, _ := sharing(t)
	s.writeTimeout = 50 * time.Millisecond
	state, status := preFilter(t, s, member("job", "b", "shared"))
	require.True(t, status.IsSuccess(), status.AsError())
	status = s.PreBind(context.Background(), state, member("job", "b", "shared"), "n1")
	require.False(t, status.IsSuccess(), "b waits for ever for an allocation never written")
	assert.Contains(t, status.AsError().Error(), "waiting for member a to write the allocation of ResourceClaim team/shared")
}

func TestAStepWithNoCycleRecordIsAnErrorNamingTheFix(t *testing.T) {
	s, _, _ := sharing(t)
	pod := member("job", "b", "shared")
	for step, run := range map[string]func(fwk.CycleState) *fwk.Status{
		"PreFilter": func(state fwk.CycleState) *fwk.Status {
			_, status := s.PreFilter(context.Background(), state, pod, nil)
			return status
		},
		"PreBindPreFlight": func(state fwk.CycleState) *fwk.Status {
			_, status := s.PreBindPreFlight(context.Background(), state, pod, "n1")
			return status
		},
		"PreBind": func(state fwk.CycleState) *fwk.Status { return s.PreBind(context.Background(), state, pod, "n1") },
	} {
		status := run(framework.NewCycleState())
		require.Equal(t, fwk.Error, status.Code(), "%s read the pod's PodGroup again instead of the record", step)
		assert.ErrorIs(t, status.AsError(), groupstate.ErrNoCycleRecord, step)
	}
}

func TestWithoutDevicesThePluginSkips(t *testing.T) {
	s := NewWithGangs(&gangs{}, nil, time.Second)
	_, status := s.PreFilter(context.Background(), framework.NewCycleState(), member("job", "b", "shared"), nil)
	assert.Equal(t, fwk.Skip, status.Code())
}

func TestSharedClaimsLeavesBatchingOn(t *testing.T) {
	s, _, _ := sharing(t)
	fragments, status := s.SignPod(context.Background(), member("job", "b", "shared"))
	assert.True(t, status.IsSuccess(), "a pod SharedClaims cannot sign is never batched: %v", status.AsError())
	assert.Empty(t, fragments)
}
