package group

import fwk "k8s.io/kube-scheduler/framework"

// AttemptFailedKey is where a plugin that fails a member's Reserve for a
// reason the whole gang must hear, such as HeldRooms when its late
// members' room cannot be held, leaves that reason: Gang's Unreserve ends
// the attempt with it rather than with the member's lost reservation.
const AttemptFailedKey fwk.StateKey = "muster.dev/attempt-failed"

// AttemptFailed is why the gang's attempt cannot go on.
type AttemptFailed struct {
	Reason string
}

// Clone returns the same record: it is never changed.
func (f *AttemptFailed) Clone() fwk.StateData { return f }

// AttemptFailedIn returns the record a plugin left in the cycle.
func AttemptFailedIn(state fwk.CycleState) (*AttemptFailed, bool) {
	return fromCycle[*AttemptFailed](state, AttemptFailedKey)
}
