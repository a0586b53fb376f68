// Package sharedclaims implements the SharedClaims scheduler plugin: the
// members of a gang that name one ResourceClaim (spec.resourceClaims[].
// resourceClaimName, or a claim a PodGroup's spec.resourceClaims declares)
// share one allocation of it, made once for the gang.
//
// kube-scheduler's DynamicResources allocates a claim at the Reserve of the
// first pod that needs it, keeps the allocation in flight, and writes it
// only at that pod's PreBind. Until then it refuses every other pod of the
// claim ("is in the process of being allocated"), but within one of its own
// PodGroup scheduling cycles, which muster's Gang replaces. A gang's first
// member is held at Permit until the whole gang is reserved, so the others
// were refused for ever.
//
//   - PreFilter, which the profile runs before DynamicResources', lends the
//     allocation in flight of a gang member still reserved to each member
//     that shares its claim: the claim is assumed allocated in the
//     scheduler's claim cache, so DynamicResources places the member where
//     the allocation is usable and allocates nothing more. Nothing is
//     written: the first member writes the allocation as ever.
//   - PreBind, which the profile also runs before DynamicResources', holds
//     a member that was lent an allocation until the first member has
//     written it: the member would otherwise write it itself, and the first
//     one would then fail with "allocated elsewhere".
//   - A gang whose attempt fails leaves nothing: DynamicResources restores
//     the claim's cached copy as the first member is unreserved, and any
//     copy lent after that is restored at the next PreFilter (loans.go).
//   - A claim holds at most 256 consumers: PreFilter turns away a pod,
//     or a gang, that would be more (consumers.go). A PodGroup's claim is
//     reserved once, for the PodGroup (podgroupdra): the copy lent holds
//     that reservation too, so that the members lent it write nothing.
//   - PreBind then gives any pod that names a claim reserved for each
//     pod, of a gang or of none, the claim's turn to write it: one pod at
//     a time adds itself to a claim's reservations, and gives the turn back
//     once bound or unreserved (writers.go).
package sharedclaims

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = "SharedClaims"

var (
	_ fwk.PreFilterPlugin   = &SharedClaims{}
	_ fwk.PreBindPlugin     = &SharedClaims{}
	_ fwk.ReservePlugin     = &SharedClaims{}
	_ fwk.PostBindPlugin    = &SharedClaims{}
	_ fwk.EnqueueExtensions = &SharedClaims{}
)

// Gangs is what SharedClaims reads of the scheduler's groups: the group
// model, or a table in unit tests.
type Gangs interface {
	// Members are the group's members the scheduler sees.
	Members(key types.NamespacedName) ([]*corev1.Pod, error)
	// IsReserved reports whether the member holds a reservation in its
	// gang's attempt.
	IsReserved(key types.NamespacedName, uid types.UID) bool
}

// SharedClaims lends a gang member's allocation in flight to the members
// sharing its claim, and has one pod at a time write a claim.
type SharedClaims struct {
	gangs   Gangs
	dra     fwk.SharedDRAManager
	loans   *loans
	writers *claimWriters
	// writeTimeout bounds how long a member waits at PreBind for the
	// allocation it was lent to be written.
	writeTimeout time.Duration
}

// writeTimeout: the first member writes the allocation with one or two API
// calls once the gang is admitted.
const writeTimeout = time.Minute

// New builds the plugin over the scheduler's group model; it takes no
// args.
func New(_ context.Context, _ runtime.Object, handle fwk.Handle, groups *group.Model) (fwk.Plugin, error) {
	return NewWithGangs(groups, handle.SharedDRAManager(), writeTimeout), nil
}

// NewWithGangs builds the plugin over the gangs and the scheduler's DRA
// manager (nil when it allocates no devices); unit tests build it this way.
func NewWithGangs(gangs Gangs, dra fwk.SharedDRAManager, timeout time.Duration) *SharedClaims {
	return &SharedClaims{gangs: gangs, dra: dra, loans: newLoans(), writers: newClaimWriters(), writeTimeout: timeout}
}

// Name returns the plugin's name.
func (s *SharedClaims) Name() string { return Name }

// EventsToRegister: a pod turned away from a claim lent to another gang
// waits for the claim's allocation to be written, or given up.
func (s *SharedClaims) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: group.QueueAlways},
	}, nil
}

// borrowedKey is where PreFilter leaves, for PreBind, the claims whose
// allocation the member was lent.
const borrowedKey fwk.StateKey = Name + "/borrowed"

// borrowed are the claims whose allocation the member was lent.
type borrowed []loan

func (b borrowed) Clone() fwk.StateData { return b }

// PreFilter restores the claims lent to an attempt that has failed, then
// lends the member the allocations in flight of the claims it shares with
// a reserved member of its gang. A pod of another gang, or of none, that
// names a claim lent waits until its allocation is written. A pod that
// the claim has no room to reserve for, or whose gang would need more of
// its consumers than it holds, is turned away (consumers.go).
func (s *SharedClaims) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if s.dra == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	logger := klog.FromContext(ctx)
	claims := s.dra.ResourceClaims()
	s.loans.restoreEnded(logger, claims)
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	podGroup := cycle.NamedPodGroup
	shared := sharedClaimsOf(pod, podGroup)
	if len(shared) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	key, grouped := cycle.Key, cycle.Grouped
	var lent borrowed
	for _, sc := range shared {
		claim, err := claims.Get(pod.Namespace, sc.name)
		if err != nil {
			continue // DynamicResources says that the claim is missing
		}
		if shortfall := s.consumerShortfall(cycle, pod, podGroup, claim, sc); shortfall != "" {
			return nil, fwk.NewStatus(fwk.Unschedulable, shortfall)
		}
		if l, ok := s.loans.current(claims, claim); ok {
			if !grouped || l.gang != key {
				// The claim only looks allocated: its allocation is in
				// flight, as DynamicResources would say of it.
				return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("resource claim %s is in the process of being allocated", klog.KObj(claim)))
			}
			lent = append(lent, l)
			continue
		}
		allocation := claims.GetPendingAllocation(claim.UID)
		if !grouped || claim.Status.Allocation != nil || allocation == nil {
			continue
		}
		allocator, ok := s.reservedSharer(key, pod, podGroup, claim.Name)
		if !ok {
			continue // in flight for a pod of another gang, or of none
		}
		l, err := s.loans.lend(claims, key, claim, allocation, sc.forGroup, allocator)
		if err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("lending member %s's allocation of ResourceClaim %s: %w", allocator, klog.KObj(claim), err))
		}
		logger.V(4).Info("Lent a gang member's allocation in flight", "pod", klog.KObj(pod), "resourceClaim", klog.KObj(claim), "allocatedBy", allocator)
		lent = append(lent, l)
	}
	if len(lent) > 0 {
		state.Write(borrowedKey, lent)
	}
	return nil, nil
}

// PreFilterExtensions returns nil: nothing the cycle keeps depends on other
// pods.
func (s *SharedClaims) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// reservedSharer returns the name of a member of the gang, other than the
// pod, that shares the claim and holds a reservation: the one whose
// Reserve allocated it.
func (s *SharedClaims) reservedSharer(key types.NamespacedName, pod *corev1.Pod, podGroup *schedulingv1beta1.PodGroup, claimName string) (string, bool) {
	members, err := s.gangs.Members(key)
	if err != nil {
		return "", false
	}
	for _, member := range members {
		if member.UID == pod.UID || !s.gangs.IsReserved(key, member.UID) {
			continue
		}
		if _, shares := sharedClaimNamed(member, podGroup, claimName); shares {
			return member.Name, true
		}
	}
	return "", false
}

// PreBindPreFlight takes part in the binding of a pod that shares a claim
// only.
func (s *SharedClaims) PreBindPreFlight(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if s.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if len(sharedClaimsOf(pod, cycle.NamedPodGroup)) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreBind waits until the member that allocated each claim lent to this
// one has written the allocation, then for the turn of each claim the pod
// names that is reserved for each pod. If that member failed to bind, this
// one fails too, and is scheduled again.
func (s *SharedClaims) PreBind(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	if status := s.awaitLoans(ctx, state, pod); !status.IsSuccess() {
		return status
	}
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	held, err := s.writers.take(ctx, reservedForEachPod(pod, cycle.NamedPodGroup))
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("waiting for another pod to finish writing a ResourceClaim %s names: %w", pod.Name, err))
	}
	state.Write(writingKey, held)
	return nil
}

// Reserve does nothing: SharedClaims takes part in Reserve for its
// Unreserve.
func (s *SharedClaims) Reserve(context.Context, fwk.CycleState, *corev1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve gives back the claims' turns of a pod whose binding failed.
func (s *SharedClaims) Unreserve(_ context.Context, state fwk.CycleState, _ *corev1.Pod, _ string) {
	s.writers.giveBack(writingIn(state))
}

// PostBind gives back the claims' turns of a bound pod: its reservations
// are written.
func (s *SharedClaims) PostBind(_ context.Context, state fwk.CycleState, _ *corev1.Pod, _ string) {
	s.writers.giveBack(writingIn(state))
}

// awaitLoans waits until the member that allocated each claim lent to the
// pod has written the allocation.
func (s *SharedClaims) awaitLoans(ctx context.Context, state fwk.CycleState, pod *corev1.Pod) *fwk.Status {
	claims := s.dra.ResourceClaims()
	for _, l := range borrowedIn(state) {
		var written *resourcev1.ResourceClaim
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, s.writeTimeout, true, func(context.Context) (bool, error) {
			if claims.GetPendingAllocation(l.uid) != nil {
				return false, nil
			}
			claim, err := claims.Get(l.claim.Namespace, l.claim.Name)
			if err != nil {
				return false, err
			}
			written = claim
			return true, nil
		})
		if err != nil {
			return fwk.AsStatus(fmt.Errorf("waiting for member %s to write the allocation of ResourceClaim %s it shares: %w", l.allocator, l.claim, err))
		}
		if written.UID != l.uid || written.ResourceVersion == l.resourceVersion || written.Status.Allocation == nil || !apiequality.Semantic.DeepEqual(written.Status.Allocation.Devices, l.allocation.Devices) {
			return fwk.AsStatus(fmt.Errorf("member %s did not bind with the allocation of ResourceClaim %s it shares with %s; %s is scheduled again", l.allocator, l.claim, pod.Name, pod.Name))
		}
	}
	return nil
}

// borrowedIn reads the claims PreFilter lent the member.
func borrowedIn(state fwk.CycleState) borrowed {
	data, err := state.Read(borrowedKey)
	if err != nil {
		return nil
	}
	b, _ := data.(borrowed)
	return b
}
