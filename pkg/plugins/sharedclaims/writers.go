package sharedclaims

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// Each pod that names a ResourceClaim adds itself to the claim's
// status.reservedFor at DynamicResources' PreBind: a write of the whole
// claim, from the copy the pod's PreFilter read. Pods binding at once that
// name one claim overwrite each other: DynamicResources reads the claim
// again and retries a conflict five times, then fails the binding, which
// is retried after a backoff. The writes and the retries feed one another:
// in upstream's SharedPodGroupResourceClaim (5,000 pods naming 100 claims)
// 6,500 bindings failed so and 33,000 writes conflicted. One pod at a
// time writes each claim instead: SharedClaims' PreBind, which the profile
// runs before DynamicResources', waits for the claims' turn, and the pod
// gives it back once it is bound or unreserved.

// claimWriters gives each ResourceClaim to one writer at a time.
type claimWriters struct {
	mu sync.Mutex
	// turns are the claims being written; a turn's channel is closed when
	// its writer gives it back.
	turns map[types.NamespacedName]chan struct{}
}

func newClaimWriters() *claimWriters {
	return &claimWriters{turns: map[types.NamespacedName]chan struct{}{}}
}

// writing is the turns one pod holds.
type writing map[types.NamespacedName]chan struct{}

func (w writing) Clone() fwk.StateData { return w }

// writingKey is where PreBind leaves the turns the pod holds, for PostBind
// or Unreserve to give back.
const writingKey fwk.StateKey = Name + "/writing"

// take waits for the turn of each claim, in the order of their names, so
// that two pods naming the same claims never hold one each and wait for
// the other. If the context ends first, it gives back what it took.
func (cw *claimWriters) take(ctx context.Context, claims []types.NamespacedName) (writing, error) {
	held := writing{}
	for _, claim := range claims {
		for {
			cw.mu.Lock()
			busy, taken := cw.turns[claim]
			if !taken {
				turn := make(chan struct{})
				cw.turns[claim], held[claim] = turn, turn
				cw.mu.Unlock()
				break
			}
			cw.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				cw.giveBack(held)
				return nil, context.Cause(ctx)
			}
		}
	}
	return held, nil
}

// giveBack ends the turns held. A turn given back already is not given
// twice: PostBind and Unreserve may both see it.
func (cw *claimWriters) giveBack(held writing) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for claim, turn := range held {
		if cw.turns[claim] == turn {
			delete(cw.turns, claim)
			close(turn)
		}
	}
}

// writingIn reads the turns PreBind took.
func writingIn(state fwk.CycleState) writing {
	data, err := state.Read(writingKey)
	if err != nil {
		return nil
	}
	w, _ := data.(writing)
	return w
}
