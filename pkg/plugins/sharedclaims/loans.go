package sharedclaims

import (
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// loan is a gang member's allocation in flight of a claim it shares, lent
// to its gang's other members: the scheduler's claim cache holds a copy of
// the claim, as the API server has it, with that allocation.
type loan struct {
	gang  types.NamespacedName
	claim klog.ObjectRef
	uid   types.UID
	// resourceVersion is the claim's as lent, unallocated; the copy keeps
	// it until the informer, or the allocating member's own write, brings
	// a newer one.
	resourceVersion string
	allocation      *resourcev1.AllocationResult
	// allocator names the member whose Reserve allocated the claim.
	allocator string
}

// loans are the claims lent, by UID. They are read and changed in
// PreFilter only, one scheduling cycle at a time.
type loans struct {
	byClaim map[types.UID]loan
}

func newLoans() *loans { return &loans{byClaim: map[types.UID]loan{}} }

// lend puts in the claim cache a copy of the claim with the allocation in
// flight and, for a claim reserved for the PodGroup (forGroup), that
// reservation, which the allocating member writes with the allocation: a
// member lent the copy then writes nothing to the claim. Were it to add the
// PodGroup itself, from a copy without it, its write would conflict, and
// the write it retried would name the PodGroup twice.
func (ls *loans) lend(claims fwk.ResourceClaimTracker, gang types.NamespacedName, claim *resourcev1.ResourceClaim, allocation *resourcev1.AllocationResult, forGroup *resourcev1.ResourceClaimConsumerReference, allocator string) (loan, error) {
	lent := claim.DeepCopy()
	lent.Status.Allocation = allocation.DeepCopy()
	if forGroup != nil && !slices.Contains(lent.Status.ReservedFor, *forGroup) {
		lent.Status.ReservedFor = append(lent.Status.ReservedFor, *forGroup)
	}
	if err := claims.AssumeClaimAfterAPICall(lent); err != nil {
		return loan{}, fmt.Errorf("assuming the claim allocated: %w", err)
	}
	l := loan{gang: gang, claim: klog.KObj(claim), uid: claim.UID, resourceVersion: claim.ResourceVersion, allocation: lent.Status.Allocation, allocator: allocator}
	ls.byClaim[claim.UID] = l
	return l, nil
}

// current returns the loan of the claim, as the cache has it, if its
// allocation is still in flight and the cache still holds the copy lent.
func (ls *loans) current(claims fwk.ResourceClaimTracker, claim *resourcev1.ResourceClaim) (loan, bool) {
	l, ok := ls.byClaim[claim.UID]
	if !ok || !l.isCopy(claim) || claims.GetPendingAllocation(l.uid) == nil {
		return loan{}, false
	}
	return l, true
}

// restoreEnded forgets the loans whose allocation is no longer in flight:
// the allocating member wrote it, or was unreserved, and DynamicResources
// restored the cache's copy of the claim then. A copy lent after that, by a
// cycle that read the allocation in flight just before it ended, is still
// in the cache, and is restored here: otherwise its devices would look
// allocated until the claim next changes.
func (ls *loans) restoreEnded(logger klog.Logger, claims fwk.ResourceClaimTracker) {
	for uid, l := range ls.byClaim {
		if claims.GetPendingAllocation(uid) != nil {
			continue
		}
		delete(ls.byClaim, uid)
		if cached, err := claims.Get(l.claim.Namespace, l.claim.Name); err == nil && l.isCopy(cached) {
			claims.AssumedClaimRestore(l.claim.Namespace, l.claim.Name)
			logger.V(4).Info("Restored a claim lent to a gang whose attempt ended", "resourceClaim", l.claim, "podGroup", l.gang)
		}
	}
}

// isCopy reports whether the claim, as the cache has it, is the copy lent.
func (l loan) isCopy(claim *resourcev1.ResourceClaim) bool {
	return claim.UID == l.uid && claim.ResourceVersion == l.resourceVersion && claim.Status.Allocation != nil
}
