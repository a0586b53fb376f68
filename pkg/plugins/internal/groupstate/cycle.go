package groupstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// CycleKey is where Gang's PreFilter leaves what the cycle knows of its
// pod's group, once the member entered its gang's attempt; every later
// step of the cycle, in every plugin, reads it from there.
const CycleKey fwk.StateKey = "muster.dev/group"

// Cycle is the pod's group as one scheduling cycle reads it: derived once,
// at PreFilter.
type Cycle struct {
	Key      types.NamespacedName
	PodGroup *v1alpha1.PodGroup
}

// Clone returns the same record: it is never changed.
func (c *Cycle) Clone() fwk.StateData { return c }

// EnterCycle records that the cycle's member entered its gang's attempt.
func EnterCycle(state fwk.CycleState, key types.NamespacedName, pg *v1alpha1.PodGroup) {
	state.Write(CycleKey, &Cycle{Key: key, PodGroup: pg})
}

// CycleOf returns the record Gang's PreFilter left; false when the cycle's
// pod is in no group, or Gang turned it away first.
func CycleOf(state fwk.CycleState) (*Cycle, bool) {
	return fromCycle[*Cycle](state, CycleKey)
}

// fromCycle reads what a plugin left in the cycle state under key; false
// when it left nothing there, or the cycle has no state.
func fromCycle[T fwk.StateData](state fwk.CycleState, key fwk.StateKey) (T, bool) {
	var none T
	if state == nil {
		return none, false
	}
	data, err := state.Read(key)
	if err != nil {
		return none, false
	}
	v, ok := data.(T)
	return v, ok
}

// KeyIn returns the pod's group as the cycle read it, or, in a step with no
// record (the cycle of a pod of no group, or a test's), as the pod's
// labels say; false for a pod of no group.
func KeyIn(state fwk.CycleState, pod *corev1.Pod) (types.NamespacedName, bool) {
	if c, ok := CycleOf(state); ok {
		return c.Key, true
	}
	return topology.GroupOf(pod)
}

// RoomMadeKey is where the preemption plugin tells Gang, in the cycle of a
// gang's failed member, that victims are going for the gang: Gang's
// PostFilter, next in the chain, then ends the attempt with no backoff.
const RoomMadeKey fwk.StateKey = "muster.dev/room-made"

// RoomMade records that room is made for the cycle's gang. At is when
// victims were preempted for it in this cycle, zero when none were.
// Pending is set when the room made earlier is not free yet, its victims
// still going: the member then fails alone, and the siblings that hold
// room already keep it.
type RoomMade struct {
	At      time.Time
	Pending bool
}

// Clone returns the same record: it is never changed.
func (r *RoomMade) Clone() fwk.StateData { return r }

// RoomMadeIn returns the record the preemption plugin left in the cycle.
func RoomMadeIn(state fwk.CycleState) (*RoomMade, bool) {
	return fromCycle[*RoomMade](state, RoomMadeKey)
}

// SearchFailedKey is where the preemption plugin tells Gang, in the cycle
// of a gang's failed member, that its search for victims failed with an
// error rather than finding none: Gang's PostFilter then says so on the
// gang, not that no victims would make room.
const SearchFailedKey fwk.StateKey = "muster.dev/search-failed"

// SearchFailed is the error the preemption plugin's search ended with.
type SearchFailed struct {
	Err error
}

// Clone returns the same record: it is never changed.
func (f *SearchFailed) Clone() fwk.StateData { return f }

// SearchFailedIn returns the record the preemption plugin left in the cycle.
func SearchFailedIn(state fwk.CycleState) (*SearchFailed, bool) {
	return fromCycle[*SearchFailed](state, SearchFailedKey)
}

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
