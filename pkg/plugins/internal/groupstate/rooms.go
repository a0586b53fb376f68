package groupstate

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/muster-dev/muster/pkg/resources"
)

// Room is room held on a node for a member of a gang that its owner
// creates only after others are Ready, such as mpi-operator's launcher
// under WaitForWorkersReady. HeldRooms owns its life: it holds the room as
// the gang is admitted with it, binds the member into it when it comes,
// keeps every other pod out, and releases it when the member does not
// come.
type Room struct {
	Group   types.NamespacedName
	Role    string
	Node    string
	Request corev1.ResourceList
	// Devices are the devices held on Node for the member's claims
	// (topology.LateDevices); none when it claims none.
	Devices []resourcev1.DeviceRequestAllocationResult
	// Expires is when the room is released if its member has not come;
	// zero until HeldRooms arms the release.
	Expires time.Time
	// HeldSince is when the room was first held.
	HeldSince time.Time
}

// Rooms holds the rooms of every gang. The Filter of every pod reads it,
// so an empty one costs a map lookup.
type Rooms struct {
	mu      sync.RWMutex
	byNode  map[string][]*Room
	byGroup map[types.NamespacedName][]*Room
	// changed is told of each group whose rooms changed, outside the
	// lock; nil for none.
	changed func(types.NamespacedName)
	// unchecked holds groups whose bound members the scheduler found
	// without having bound them, as after a restart: their rooms, held in
	// memory, may have to be held again.
	unchecked sets.Set[types.NamespacedName]
	// releasers are told when a group's rooms are no longer needed
	// (OnEnd): HeldRooms, once per profile that runs it.
	releasers []func(types.NamespacedName, RoomsEnd)
	// held and ended are told as a room is held and as it ends, and how
	// (taken or released), for the model's metrics; nil for none.
	held  func()
	ended func(r *Room, how string)
}

// Observe has held and ended told as each room is held and as it ends,
// and how: taken by its member, or released.
func (l *Rooms) Observe(held func(), ended func(r *Room, how string)) {
	l.held, l.ended = held, ended
}

// RoomsEnd is why a group's rooms are no longer needed. HeldRooms alone
// releases rooms; what else ends them tells it why (End).
type RoomsEnd string

const (
	// AttemptEnded: the gang's attempt failed, and gave up its
	// reservations and the rooms with them.
	AttemptEnded RoomsEnd = "its attempt failed"
	// PodGroupDeleted: the gang's PodGroup is gone.
	PodGroupDeleted RoomsEnd = "its PodGroup was deleted"
	// LateMembersMissing: the late members were not created within the
	// gang's schedule timeout.
	LateMembersMissing RoomsEnd = "its late members did not come in time"
	// GangGone: the gang's last bound member has gone.
	GangGone RoomsEnd = "its last bound member has gone"
)

// OnEnd registers release, which releases a group's rooms when told they
// are no longer needed, and why.
func (l *Rooms) OnEnd(release func(types.NamespacedName, RoomsEnd)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releasers = append(l.releasers, release)
}

// End tells the rooms' releaser that the group's rooms are no longer
// needed, and why. With no releaser registered, no profile holds rooms.
func (l *Rooms) End(key types.NamespacedName, why RoomsEnd) {
	l.mu.RLock()
	releasers := slices.Clone(l.releasers)
	l.mu.RUnlock()
	for _, release := range releasers {
		release(key, why)
	}
}

// NewRooms returns an empty set of rooms.
func NewRooms() *Rooms {
	return &Rooms{byNode: map[string][]*Room{}, byGroup: map[types.NamespacedName][]*Room{}, unchecked: sets.New[types.NamespacedName]()}
}

// Check marks a group whose rooms may have to be held again.
func (l *Rooms) Check(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unchecked.Insert(key)
}

// ToCheck returns, and forgets, the groups marked by Check. Every
// PreFilter asks, so the common answer, none, takes only a read lock.
func (l *Rooms) ToCheck() []types.NamespacedName {
	l.mu.RLock()
	none := l.unchecked.Len() == 0
	l.mu.RUnlock()
	if none {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := l.unchecked.UnsortedList()
	l.unchecked.Clear()
	return keys
}

// Add holds a room; its holder sets HeldSince.
func (l *Rooms) Add(r *Room) {
	l.mu.Lock()
	l.byNode[r.Node] = append(l.byNode[r.Node], r)
	l.byGroup[r.Group] = append(l.byGroup[r.Group], r)
	l.mu.Unlock()
	if l.held != nil {
		l.held()
	}
	l.tell(r.Group)
}

// tell tells the listener that the group's rooms changed.
func (l *Rooms) tell(key types.NamespacedName) {
	if l.changed != nil {
		l.changed(key)
	}
}

// Of returns copies of the rooms the group holds.
func (l *Rooms) Of(key types.NamespacedName) []Room {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var rooms []Room
	for _, r := range l.byGroup[key] {
		rooms = append(rooms, *r)
	}
	return rooms
}

// Expire records when the group's rooms are released if their members
// have not come.
func (l *Rooms) Expire(key types.NamespacedName, at time.Time) {
	l.mu.Lock()
	for _, r := range l.byGroup[key] {
		r.Expires = at
	}
	l.mu.Unlock()
	l.tell(key)
}

// Count returns how many rooms the group holds for role, or for every role
// when role is "".
func (l *Rooms) Count(key types.NamespacedName, role string) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int32
	for _, r := range l.byGroup[key] {
		if role == "" || r.Role == role {
			n++
		}
	}
	return n
}

// Held returns a room the group holds for role, which stays held; nil
// when it holds none.
func (l *Rooms) Held(key types.NamespacedName, role string) *Room {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, r := range l.byGroup[key] {
		if r.Role == role {
			return r
		}
	}
	return nil
}

// WithDevices returns the rooms that hold devices.
func (l *Rooms) WithDevices() []*Room {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var rooms []*Room
	for _, group := range l.byGroup {
		for _, r := range group {
			if len(r.Devices) > 0 {
				rooms = append(rooms, r)
			}
		}
	}
	return rooms
}

// Take removes one room the group holds for role, as its member is
// placed, and returns it; nil when the group holds none for role.
func (l *Rooms) Take(key types.NamespacedName, role string) *Room {
	l.mu.Lock()
	i := slices.IndexFunc(l.byGroup[key], func(r *Room) bool { return r.Role == role })
	if i < 0 {
		l.mu.Unlock()
		return nil
	}
	r := l.byGroup[key][i]
	l.removeUnlocked(r)
	l.mu.Unlock()
	l.end(r, "taken")
	l.tell(key)
	return r
}

// Release removes every room of the group and returns how many there were.
// Only HeldRooms calls it; others End the rooms.
func (l *Rooms) Release(key types.NamespacedName) int {
	l.mu.Lock()
	rooms := slices.Clone(l.byGroup[key])
	for _, r := range rooms {
		l.removeUnlocked(r)
	}
	l.mu.Unlock()
	for _, r := range rooms {
		l.end(r, "released")
	}
	if len(rooms) > 0 {
		l.tell(key)
	}
	return len(rooms)
}

// end tells the observer a room is no longer held, and how it ended.
func (l *Rooms) end(r *Room, how string) {
	if l.ended != nil {
		l.ended(r, how)
	}
}

func (l *Rooms) removeUnlocked(r *Room) {
	remove := func(rooms []*Room) []*Room {
		return slices.DeleteFunc(rooms, func(other *Room) bool { return other == r })
	}
	if l.byNode[r.Node] = remove(l.byNode[r.Node]); len(l.byNode[r.Node]) == 0 {
		delete(l.byNode, r.Node)
	}
	if l.byGroup[r.Group] = remove(l.byGroup[r.Group]); len(l.byGroup[r.Group]) == 0 {
		delete(l.byGroup, r.Group)
	}
}

// HeldOn sums the rooms held on a node, but those of the given group and
// role, which its own member may use, and names the groups holding them;
// nil when the node holds none.
func (l *Rooms) HeldOn(node string, except types.NamespacedName, exceptRole string) (corev1.ResourceList, []types.NamespacedName) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	rooms := l.byNode[node]
	if len(rooms) == 0 {
		return nil, nil
	}
	held := corev1.ResourceList{}
	var groups []types.NamespacedName
	for _, r := range rooms {
		if r.Group == except && r.Role == exceptRole {
			continue
		}
		held = resources.Add(held, r.Request, 1)
		if !slices.Contains(groups, r.Group) {
			groups = append(groups, r.Group)
		}
	}
	return held, groups
}
