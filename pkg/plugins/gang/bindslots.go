package gang

import (
	"context"
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"
)

// A gang is admitted whole: the members Gang held at Permit are allowed in
// one step, and each then makes its Bind call. Thousands of calls at once
// overflow the streams of the client's HTTP/2 connection to the API server,
// and Go's HTTP client then dials another connection, with its TLS
// handshake, for nearly every call that waits: a gang of 5,000 took 34 s to
// bind instead of 20 s (docs/benchmarks-gangsize.md). So the members
// released together bind a bounded number at a time. A pod Gang did not
// hold binds as soon as it is placed, one at a time, and takes no slot.

// bindSlots are the Bind calls of members released together at Permit that
// may be in flight at once.
type bindSlots chan struct{}

func newBindSlots(n int32) bindSlots { return make(bindSlots, n) }

// releasedTogetherKey marks, in the cycle state of a member held at Permit,
// that it binds with the rest of its gang.
const releasedTogetherKey fwk.StateKey = Name + "/releasedTogether"

// releasedTogether says whether the member holds one of the bind slots.
type releasedTogether struct{ holdsSlot bool }

func (r releasedTogether) Clone() fwk.StateData { return r }

// heldAtPermit marks the member as one that will be released with others.
func heldAtPermit(state fwk.CycleState) {
	state.Write(releasedTogetherKey, releasedTogether{})
}

// releasedTogetherIn reads the member's mark.
func releasedTogetherIn(state fwk.CycleState) (releasedTogether, bool) {
	data, err := state.Read(releasedTogetherKey)
	if err != nil {
		return releasedTogether{}, false
	}
	r, ok := data.(releasedTogether)
	return r, ok
}

// take waits for a slot for a member released together with others; any
// other pod passes at once.
func (s bindSlots) take(ctx context.Context, state fwk.CycleState) *fwk.Status {
	if r, ok := releasedTogetherIn(state); !ok || r.holdsSlot {
		return nil
	}
	select {
	case s <- struct{}{}:
		state.Write(releasedTogetherKey, releasedTogether{holdsSlot: true})
		return nil
	case <-ctx.Done():
		return fwk.AsStatus(fmt.Errorf("waiting for one of %d bind slots: %w", cap(s), context.Cause(ctx)))
	}
}

// giveBack frees the member's slot once its Bind call has ended, bound or
// not.
func (s bindSlots) giveBack(state fwk.CycleState) {
	if r, ok := releasedTogetherIn(state); ok && r.holdsSlot {
		state.Write(releasedTogetherKey, releasedTogether{})
		<-s
	}
}
