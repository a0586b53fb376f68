package sharedclaims

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
)

// claimWithConsumers is SharedClaims over the gangs, with the claim
// "shared" allocated on n1 and reserved for that many pods of no gang,
// and then for the pods named.
func claimWithConsumers(g *gangs, consumers int, pods ...string) *SharedClaims {
	var names []string
	for i := range consumers {
		names = append(names, fmt.Sprintf("other-%d", i))
	}
	dra := devicestest.On(st.MakeNode().Name("n1").Obj())
	dra.Claims = append(dra.Claims, devicestest.Held(ns, "shared", "n1", "gpu-0", append(names, pods...)...))
	return NewWithGangs(g, dra, time.Second)
}

// gangOf is the gang "job" of the members, its PodGroup's minMember as
// given.
func gangOf(minMember int32, members ...*corev1.Pod) (*gangs, *v1alpha1.PodGroup) {
	pg := &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: minMember}}
	pg.Namespace, pg.Name = ns, "job"
	return &gangs{members: map[types.NamespacedName][]*corev1.Pod{key("job"): members}}, pg
}

// membersNaming are count members of the gang "job" naming the claim.
func membersNaming(count int, claim string) []*corev1.Pod {
	var members []*corev1.Pod
	for i := range count {
		members = append(members, member("job", fmt.Sprintf("job-%d", i), claim))
	}
	return members
}

// preFilterInGang runs PreFilter for the member in a cycle its gang's
// attempt entered, as Gang's PreFilter leaves it.
func preFilterInGang(s *SharedClaims, pg *v1alpha1.PodGroup, pod *corev1.Pod) *fwk.Status {
	state := framework.NewCycleState()
	group.EnterCycle(state, key("job"), pg)
	_, status := s.PreFilter(context.Background(), state, pod, nil)
	return status
}

func TestAPodIsTurnedAwayFromAClaimWithNoConsumerEntryLeft(t *testing.T) {
	s := claimWithConsumers(&gangs{}, maxConsumers)
	_, status := preFilter(t, s, naming("late", "shared"))
	require.Equal(t, fwk.Unschedulable, status.Code(), "a pod the claim cannot be reserved for would fail at every PreBind")
	assert.Contains(t, status.Message(), "ResourceClaim team/shared has 256 consumers in status.reservedFor, the most it holds: late waits for one of them to finish")

	s = claimWithConsumers(&gangs{}, maxConsumers-1)
	_, status = preFilter(t, s, naming("late", "shared"))
	assert.True(t, status.IsSuccess(), "the last entry of the claim was refused: %v", status.AsError())
}

func TestAPodAlreadyAConsumerOfAFullClaimIsNotTurnedAway(t *testing.T) {
	s := claimWithConsumers(&gangs{}, maxConsumers-1, "bound")
	_, status := preFilter(t, s, naming("bound", "shared"))
	assert.True(t, status.IsSuccess(), "a consumer of the claim was refused it: %v", status.AsError())
}

func TestAGangNeedingMoreConsumersThanTheClaimHasRoomForIsTurnedAway(t *testing.T) {
	members := membersNaming(3, "shared")
	g, pg := gangOf(3, members...)
	status := preFilterInGang(claimWithConsumers(g, maxConsumers-2), pg, members[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "a gang the claim cannot hold whole would be bound in part")
	assert.Contains(t, status.Message(), "group team/job needs 3 more consumers of ResourceClaim team/shared to bind its minMember of 3, and the claim's status.reservedFor has room for 2 more (at most 256)")
	assert.Contains(t, status.Message(), "name one claim in at most 256 pods, or give each member a claim of its own from a ResourceClaimTemplate")

	status = preFilterInGang(claimWithConsumers(g, maxConsumers-3), pg, members[0])
	assert.True(t, status.IsSuccess(), "a gang the claim has room for was refused: %v", status.AsError())
}

func TestAGangOfMoreThanAClaimEverHoldsIsTurnedAway(t *testing.T) {
	members := membersNaming(maxConsumers+1, "shared")
	g, pg := gangOf(maxConsumers+1, members...)
	status := preFilterInGang(claimWithConsumers(g, 0), pg, members[0])
	require.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "group team/job needs 257 more consumers of ResourceClaim team/shared to bind its minMember of 257, and the claim's status.reservedFor has room for 256 more")
}

func TestOnlyTheMembersTheQuorumNeedsCount(t *testing.T) {
	members := membersNaming(3, "shared")
	members = append(members, st.MakePod().Namespace(ns).Name("launcher").UID("launcher").Obj())
	// A quorum of 3: the launcher and two of the three members naming the
	// claim; the claim has room for two.
	g, pg := gangOf(3, members...)
	status := preFilterInGang(claimWithConsumers(g, maxConsumers-2), pg, members[0])
	assert.True(t, status.IsSuccess(), "members beyond the quorum were counted: %v", status.AsError())

	// Members already consumers need no entry.
	g, pg = gangOf(3, membersNaming(3, "shared")...)
	status = preFilterInGang(claimWithConsumers(g, maxConsumers-3, "job-1"), pg, members[0])
	assert.True(t, status.IsSuccess(), "a member that is a consumer already was counted: %v", status.AsError())
}

func TestAMemberTheModelDoesNotSeeYetCountsItself(t *testing.T) {
	g, pg := gangOf(2, member("job", "seen", "shared"))
	status := preFilterInGang(claimWithConsumers(g, maxConsumers-1), pg, member("job", "new", "shared"))
	require.Equal(t, fwk.Unschedulable, status.Code(), "the member asking was not counted")
	assert.Contains(t, status.Message(), "needs 2 more consumers")
}

// countingGangs counts the reads of a gang's members.
type countingGangs struct {
	*gangs
	reads int
}

func (c *countingGangs) Members(key types.NamespacedName) ([]*corev1.Pod, error) {
	c.reads++
	return c.gangs.Members(key)
}

func TestAGangWhoseQuorumFitsTheClaimIsNotCounted(t *testing.T) {
	members := membersNaming(3, "shared")
	g, pg := gangOf(3, members...)
	counting := &countingGangs{gangs: g}
	s := claimWithConsumers(&gangs{}, maxConsumers-3)
	s.gangs = counting
	status := preFilterInGang(s, pg, members[0])
	require.True(t, status.IsSuccess(), status.AsError())
	assert.Zero(t, counting.reads, "each member of a gang the claim has room for scanned its members")
}
