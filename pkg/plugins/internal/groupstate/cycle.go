package groupstate

import (
	"errors"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// CycleKey is where Gang's PreFilter, first in the PreFilter order, leaves
// what the cycle knows of its pod's group, for every pod; every later step
// of the cycle, in every plugin, reads it from there and derives nothing
// again.
const CycleKey fwk.StateKey = "muster.dev/group"

// ErrNoCycleRecord is a read of the cycle record in a cycle that has none:
// the profile runs a muster plugin without Gang's PreFilter before it.
var ErrNoCycleRecord = errors.New("the scheduling cycle has no record of the pod's group: " +
	"Gang's PreFilter writes it and must run first among PreFilter plugins (manifests/scheduler-config.yaml)")

// Cycle is the pod's group as one scheduling cycle reads it: derived once,
// at Gang's PreFilter. It is never changed once written.
type Cycle struct {
	// Grouped is false for a pod of no group; nothing else is set then.
	Grouped bool
	Key     types.NamespacedName
	// PodGroup is the group's PodGroup in muster's shape; nil while the
	// group has none.
	PodGroup *v1alpha1.PodGroup
	// NamedPodGroup is the scheduling.k8s.io PodGroup the pod names in
	// spec.schedulingGroup, as the API serves it, whose claims are
	// reserved for it rather than for each pod (podgroupdra,
	// SharedClaims); nil when the pod names none, or it does not exist.
	NamedPodGroup *schedulingv1beta1.PodGroup
	// Topology is what the PodGroup declares of the group; nil when it
	// declares nothing, or has no PodGroup, or TopologyErr says what is
	// wrong with it.
	Topology    *topology.Topology
	TopologyErr error
	// Entered is set once the member entered its gang's attempt: Gang did
	// not turn it away (its gang backing off, its place held by a twin).
	Entered bool
}

// Clone returns the same record: it is never changed.
func (c *Cycle) Clone() fwk.StateData { return c }

// Quorum is the group's quorum; the cycle's pod must be grouped and its
// PodGroup exist.
func (c *Cycle) Quorum() topology.Quorum { return topology.QuorumOf(c.PodGroup) }

// Record leaves the cycle's record for the steps after.
func Record(state fwk.CycleState, c *Cycle) {
	state.Write(CycleKey, c)
}

// CycleOf returns the record Gang's PreFilter left: ErrNoCycleRecord in a
// cycle with none, which is a profile's mistake, never a pod's.
func CycleOf(state fwk.CycleState) (*Cycle, error) {
	if c, ok := fromCycle[*Cycle](state, CycleKey); ok {
		return c, nil
	}
	return nil, ErrNoCycleRecord
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

// KeyIn returns the cycle's group: grouped is false for a pod of no group.
func KeyIn(state fwk.CycleState) (key types.NamespacedName, grouped bool, err error) {
	c, err := CycleOf(state)
	if err != nil {
		return key, false, err
	}
	return c.Key, c.Grouped, nil
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
