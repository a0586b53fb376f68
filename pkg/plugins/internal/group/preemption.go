package group

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/topology"
)

// LackingMembers are the unbound active members a gang needs to reach its
// minMember: what preemption makes room for (topology.LackingMembers).
func (m *Model) LackingMembers(key types.NamespacedName, minMember int32) []*corev1.Pod {
	pods, err := m.Members(key)
	if err != nil {
		return nil
	}
	return topology.LackingMembers(minMember, pods)
}

// WaitingForRoom lists the gangs waiting for room (topology.WaitingForRoom)
// with the members they lack: those whose last attempt failed and that
// the scheduler has marked so.
func (m *Model) WaitingForRoom() map[types.NamespacedName]topology.WaitingGang {
	waiting := map[types.NamespacedName]topology.WaitingGang{}
	for _, key := range m.attempts.Failed() {
		pg := m.PodGroup(key)
		if pg == nil {
			continue
		}
		members, err := m.Members(key)
		if err != nil {
			continue
		}
		if lacking, waits := topology.WaitingForRoom(pg.Spec.MinMember, members); waits {
			waiting[key] = topology.WaitingGang{Lacking: lacking}
		}
	}
	return waiting
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
