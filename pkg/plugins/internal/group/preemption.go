package group

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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

// Promise is room an attempt that holds reservations in a topology domain
// still needs there: the members it has yet to place, and the domain's
// nodes.
type Promise struct {
	Members []*corev1.Pod
	Nodes   sets.Set[string]
}

// Promises returns the room the attempts holding reservations in a domain
// still need, but the group's own: another gang's attempt leaves it to
// them, so that two attempts under way do not both count on it.
func (m *Model) Promises(except types.NamespacedName) []Promise {
	var promises []Promise
	for key, d := range m.attempts.Holding() {
		if key == except {
			continue
		}
		pg := m.PodGroup(key)
		if pg == nil {
			continue
		}
		var unplaced []*corev1.Pod
		var need int
		m.read(key, func(st *State) {
			need = int(topology.QuorumOf(pg).Short(st.census.Bound() + int32(st.attempt.reserved.Len())))
			for uid, pod := range st.unbound {
				if !st.attempt.reserved.Has(uid) {
					unplaced = append(unplaced, pod)
				}
			}
		})
		if need <= 0 || len(unplaced) == 0 {
			continue
		}
		slices.SortFunc(unplaced, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		promises = append(promises, Promise{Members: unplaced[:min(need, len(unplaced))], Nodes: d.Nodes})
	}
	return promises
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
