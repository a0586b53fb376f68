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
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
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
	c := cycleOf(s, pod)
	c.Key, c.PodGroup = key("job"), pg
	groupstate.Record(state, c)
	_, status := s.PreFilter(context.Background(), state, pod, nil)
	return status
}

func TestAClaimTurnsAwayWhatItsConsumerEntriesCannotHold(t *testing.T) {
	withLauncher := append(membersNaming(3, "shared"), st.MakePod().Namespace(ns).Name("launcher").UID("launcher").Obj())
	tests := []struct {
		name string
		// members and minMember are the gang "job" the pod asks in; no
		// members for a pod of no gang.
		members   []*corev1.Pod
		minMember int32
		// others are the claim's consumers of no gang, consumers the
		// pods named among them.
		others    int
		consumers []string
		pod       *corev1.Pod
		// want are the parts of the status's message; none for success.
		want []string
	}{
		{
			name:   "a pod is turned away from a claim with no consumer entry left",
			others: maxConsumers, pod: naming("late", "shared"),
			want: []string{"ResourceClaim team/shared has 256 consumers in status.reservedFor, the most it holds: late waits for one of them to finish"},
		},
		{name: "a pod takes the claim's last entry", others: maxConsumers - 1, pod: naming("late", "shared")},
		{name: "a pod already a consumer of a full claim is not turned away", others: maxConsumers - 1, consumers: []string{"bound"}, pod: naming("bound", "shared")},
		{
			name:    "a gang needing more consumers than the claim has room for is turned away",
			members: membersNaming(3, "shared"), minMember: 3, others: maxConsumers - 2, pod: membersNaming(1, "shared")[0],
			want: []string{
				"group team/job needs 3 more consumers of ResourceClaim team/shared to bind its minMember of 3, and the claim's status.reservedFor has room for 2 more (at most 256)",
				"name one claim in at most 256 pods, or give each member a claim of its own from a ResourceClaimTemplate",
			},
		},
		{name: "a gang the claim has room for is not turned away", members: membersNaming(3, "shared"), minMember: 3, others: maxConsumers - 3, pod: membersNaming(1, "shared")[0]},
		{
			name:    "a gang of more than a claim ever holds is turned away",
			members: membersNaming(maxConsumers+1, "shared"), minMember: maxConsumers + 1, pod: membersNaming(1, "shared")[0],
			want: []string{"group team/job needs 257 more consumers of ResourceClaim team/shared to bind its minMember of 257, and the claim's status.reservedFor has room for 256 more"},
		},
		{
			// A quorum of 3: the launcher and two of the three members
			// naming the claim; the claim has room for two.
			name:    "only the members the quorum needs count",
			members: withLauncher, minMember: 3, others: maxConsumers - 2, pod: withLauncher[0],
		},
		{name: "members already consumers need no entry", members: membersNaming(3, "shared"), minMember: 3, others: maxConsumers - 3, consumers: []string{"job-1"}, pod: membersNaming(1, "shared")[0]},
		{
			name:    "a member the model does not see yet counts itself",
			members: []*corev1.Pod{member("job", "seen", "shared")}, minMember: 2, others: maxConsumers - 1, pod: member("job", "new", "shared"),
			want: []string{"needs 2 more consumers"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var status *fwk.Status
			if tt.members == nil {
				_, status = preFilter(t, claimWithConsumers(&gangs{}, tt.others, tt.consumers...), tt.pod)
			} else {
				g, pg := gangOf(tt.minMember, tt.members...)
				status = preFilterInGang(claimWithConsumers(g, tt.others, tt.consumers...), pg, tt.pod)
			}
			if len(tt.want) == 0 {
				assert.True(t, status.IsSuccess(), "turned away: %v", status.AsError())
				return
			}
			require.Equal(t, fwk.Unschedulable, status.Code(), "a pod or gang the claim cannot be reserved for would fail at PreBind, or bind in part")
			for _, part := range tt.want {
				assert.Contains(t, status.Message(), part)
			}
		})
	}
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
