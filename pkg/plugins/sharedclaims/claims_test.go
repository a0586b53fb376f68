package sharedclaims

import (
	"context"
	"fmt"
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
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
)

// The claims a scheduling.k8s.io PodGroup declares in spec.resourceClaims
// are reserved once, for the PodGroup (podgroupdra): "train" declares
// "gpu", made from the template "gpus" as "train-gpu-x1" for the PodGroup,
// and "data", the claim "dataset" by name.

func trainingGroup() *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{ResourceClaims: []schedulingv1beta1.PodGroupResourceClaim{
		{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpus")},
		{Name: "data", ResourceClaimName: ptr.To("dataset")},
	}}}
	pg.Namespace, pg.Name, pg.UID = ns, "train", "train-uid"
	return pg
}

// trainee is a member of "train" that declares its PodGroup's claim "gpu",
// made already.
func trainee(name string) *corev1.Pod {
	pod := st.MakePod().Namespace(ns).Name(name).UID(name).Obj()
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpus")}}
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("train-gpu-x1")}}
	return pod
}

var trainReservation = resourcev1.ResourceClaimConsumerReference{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "train", UID: "train-uid"}

func TestAPodGroupsClaimsAreSharedAndReservedForIt(t *testing.T) {
	pod := trainee("a")
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims,
		corev1.PodResourceClaim{Name: "data", ResourceClaimName: ptr.To("dataset")},
		corev1.PodResourceClaim{Name: "own", ResourceClaimTemplateName: ptr.To("gpus")},
		corev1.PodResourceClaim{Name: "scratch", ResourceClaimName: ptr.To("scratch")})
	pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "own", ResourceClaimName: ptr.To("a-own-x2")})

	assert.Equal(t, []sharedClaim{
		{name: "dataset", forGroup: &trainReservation},
		{name: "scratch"},
		{name: "train-gpu-x1", forGroup: &trainReservation},
	}, sharedClaimsOf(pod, trainingGroup()), "a claim the PodGroup declares is not its, or the pod's own claim from a template is counted shared")
	assert.Equal(t, []types.NamespacedName{{Namespace: ns, Name: "scratch"}}, reservedForEachPod(pod, trainingGroup()),
		"a pod would wait for the turn of a claim it does not write")
}

func TestAPodGroupsClaimNotMadeYetIsNotShared(t *testing.T) {
	pod := trainee("a")
	pod.Status.ResourceClaimStatuses = nil
	assert.Empty(t, sharedClaimsOf(pod, trainingGroup()), "a claim kube-controller-manager has not made yet was named")
}

func TestWithoutItsPodGroupAClaimDeclaredAlikeIsThePods(t *testing.T) {
	pod := trainee("a")
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "data", ResourceClaimName: ptr.To("dataset")}}
	assert.Equal(t, []sharedClaim{{name: "dataset"}}, sharedClaimsOf(pod, nil))
}

// trainingClaim is SharedClaims over "train", members a and b, a reserved
// and its allocation of train-gpu-x1 in flight.
func trainingClaim(t *testing.T) (*SharedClaims, *devicestest.DRA) {
	t.Helper()
	dra := devicestest.On(st.MakeNode().Name("n1").Obj())
	claim := devicestest.Claim(ns, "train-gpu-x1")
	claim.ResourceVersion = "1"
	dra.Claims = append(dra.Claims, claim)
	g := &gangs{
		members:   map[types.NamespacedName][]*corev1.Pod{{Namespace: ns, Name: "train"}: {trainee("a"), trainee("b")}},
		reserved:  sets.New[types.UID]("a"),
		podGroups: map[string]*schedulingv1beta1.PodGroup{"train": trainingGroup()},
	}
	inFlight := claim.DeepCopy()
	inFlight.Status.Allocation = devicestest.Held(ns, "train-gpu-x1", "n1", "gpu-0").Status.Allocation
	require.NoError(t, dra.ResourceClaims().SignalClaimPendingAllocation(claim.UID, inFlight))
	return NewWithGangs(g, dra, time.Second), dra
}

func TestAMemberIsLentThePodGroupsReservationWithTheAllocation(t *testing.T) {
	s, dra := trainingClaim(t)
	state, status := preFilter(t, s, trainee("b"))
	require.True(t, status.IsSuccess(), status.AsError())

	lent, err := dra.ResourceClaims().Get(ns, "train-gpu-x1")
	require.NoError(t, err)
	require.NotNil(t, lent.Status.Allocation, "b was not lent a's allocation of its PodGroup's claim")
	assert.Equal(t, []resourcev1.ResourceClaimConsumerReference{trainReservation}, lent.Status.ReservedFor,
		"the copy lent lacks the PodGroup's reservation: b would write it again, from a stale copy, and name the PodGroup twice")
	assert.Len(t, borrowedIn(state), 1, "b would not wait for a to write the allocation")
}

func TestAMemberOfAPodGroupsClaimTakesNoTurn(t *testing.T) {
	s, _ := trainingClaim(t)
	status := s.PreBind(context.Background(), recorded(s, trainee("a")), trainee("a"), "n1")
	require.True(t, status.IsSuccess(), status.AsError())
	assert.True(t, turnIsFree(t, s, "train-gpu-x1"), "a member took the turn of its PodGroup's claim, which the others would wait for")
}

func TestAPodGroupTakesOneConsumerEntryWhateverItsSize(t *testing.T) {
	members := []*corev1.Pod{trainee("a"), trainee("b"), trainee("c")}
	g := &gangs{
		members:   map[types.NamespacedName][]*corev1.Pod{{Namespace: ns, Name: "train"}: members},
		podGroups: map[string]*schedulingv1beta1.PodGroup{"train": trainingGroup()},
	}
	_, pg := gangOf(3)
	pg.Name = "train"
	withRoomFor := func(free int) *SharedClaims {
		var consumers []string
		for i := range maxConsumers - free {
			consumers = append(consumers, fmt.Sprintf("other-%d", i))
		}
		dra := devicestest.On(st.MakeNode().Name("n1").Obj())
		dra.Claims = append(dra.Claims, devicestest.Held(ns, "train-gpu-x1", "n1", "gpu-0", consumers...))
		return NewWithGangs(g, dra, time.Second)
	}
	status := preFilterInGang(withRoomFor(1), pg, members[0])
	assert.True(t, status.IsSuccess(), "a gang of 3 reserving its PodGroup's claim once was counted as 3 consumers: %v", status.AsError())

	status = preFilterInGang(withRoomFor(0), pg, members[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "the PodGroup's reservation would not fit")
	assert.Contains(t, status.Message(), "ResourceClaim team/train-gpu-x1 has 256 consumers")
}
