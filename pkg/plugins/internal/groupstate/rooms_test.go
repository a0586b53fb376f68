package groupstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

var (
	epoch     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mpiGang   = types.NamespacedName{Namespace: "team-a", Name: "mpi"}
	otherGang = types.NamespacedName{Namespace: "team-a", Name: "other"}
)

func cpus(v string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
}

// roomsOf holds the rooms in a new Rooms.
func roomsOf(rooms ...Room) *Rooms {
	l := NewRooms()
	for i := range rooms {
		l.Add(&rooms[i])
	}
	return l
}

func TestRoomsCountAndHold(t *testing.T) {
	launcher := Room{Group: mpiGang, Role: "launcher", Node: "n1", Request: cpus("2")}
	evaluator := Room{Group: mpiGang, Role: "evaluator", Node: "n2", Request: cpus("1")}
	another := Room{Group: otherGang, Role: "launcher", Node: "n1", Request: cpus("1")}
	tests := []struct {
		name      string
		rooms     []Room
		role      string
		wantCount int32
		wantHeld  bool
	}{
		{name: "a group with no room counts none and holds none", role: "launcher"},
		{name: "a role's room is counted and held", rooms: []Room{launcher, another}, role: "launcher", wantCount: 1, wantHeld: true},
		{name: "every role's rooms are counted for no role", rooms: []Room{launcher, evaluator, another}, wantCount: 2},
		{name: "another role's room is not the role's", rooms: []Room{evaluator}, role: "launcher"},
		{name: "another group's room is not the group's", rooms: []Room{another}, role: "launcher"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := roomsOf(tt.rooms...)
			assert.Equal(t, tt.wantCount, l.Count(mpiGang, tt.role))
			if tt.role != "" {
				assert.Equal(t, tt.wantHeld, l.Held(mpiGang, tt.role) != nil)
			}
		})
	}
}

func TestRoomsHeldOnANode(t *testing.T) {
	launcher := Room{Group: mpiGang, Role: "launcher", Node: "n1", Request: cpus("2")}
	evaluator := Room{Group: mpiGang, Role: "evaluator", Node: "n1", Request: cpus("1")}
	another := Room{Group: otherGang, Role: "launcher", Node: "n1", Request: cpus("500m")}
	tests := []struct {
		name       string
		rooms      []Room
		node       string
		exceptRole string
		wantCPU    string
		wantGroups []types.NamespacedName
	}{
		{name: "a node with no room holds nothing", rooms: []Room{launcher}, node: "n2"},
		{name: "every room on the node is summed, naming each group once", rooms: []Room{launcher, evaluator, another}, node: "n1", wantCPU: "3500m", wantGroups: []types.NamespacedName{mpiGang, otherGang}},
		{name: "the room the member itself may use is left out", rooms: []Room{launcher, another}, node: "n1", exceptRole: "launcher", wantCPU: "500m", wantGroups: []types.NamespacedName{otherGang}},
		{name: "the member's own group's other roles still count", rooms: []Room{launcher, evaluator}, node: "n1", exceptRole: "launcher", wantCPU: "1", wantGroups: []types.NamespacedName{mpiGang}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held, groups := roomsOf(tt.rooms...).HeldOn(tt.node, mpiGang, tt.exceptRole)
			if tt.wantCPU == "" {
				assert.Nil(t, held)
			} else {
				assert.True(t, held.Cpu().Equal(resource.MustParse(tt.wantCPU)), "held %v, want %s", held.Cpu(), tt.wantCPU)
			}
			assert.ElementsMatch(t, tt.wantGroups, groups)
		})
	}
}

func TestRoomsTakenAndReleased(t *testing.T) {
	two := []Room{
		{Group: mpiGang, Role: "launcher", Node: "n1"},
		{Group: mpiGang, Role: "launcher", Node: "n2"},
		{Group: otherGang, Role: "launcher", Node: "n1"},
	}
	tests := []struct {
		name string
		// act changes the rooms and returns how many it said it removed.
		act              func(*Rooms) int
		wantRemoved      int
		wantLeft         int32
		wantOtherLeft    int32
		wantNodeN1Groups []types.NamespacedName
	}{
		{
			name: "a member takes one room of its role",
			act: func(l *Rooms) int {
				if l.Take(mpiGang, "launcher") != nil {
					return 1
				}
				return 0
			},
			wantRemoved: 1, wantLeft: 1, wantOtherLeft: 1, wantNodeN1Groups: []types.NamespacedName{otherGang},
		},
		{
			name: "a role with no room gives none to take",
			act: func(l *Rooms) int {
				if l.Take(mpiGang, "evaluator") != nil {
					return 1
				}
				return 0
			},
			wantLeft: 2, wantOtherLeft: 1, wantNodeN1Groups: []types.NamespacedName{mpiGang, otherGang},
		},
		{
			name:        "releasing a group removes all its rooms, on every node, and only its",
			act:         func(l *Rooms) int { return l.Release(mpiGang) },
			wantRemoved: 2, wantOtherLeft: 1, wantNodeN1Groups: []types.NamespacedName{otherGang},
		},
		{
			name:             "releasing a group twice removes nothing the second time",
			act:              func(l *Rooms) int { l.Release(otherGang); return l.Release(otherGang) },
			wantLeft:         2,
			wantNodeN1Groups: []types.NamespacedName{mpiGang},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := roomsOf(two...)
			assert.Equal(t, tt.wantRemoved, tt.act(l))
			assert.Equal(t, tt.wantLeft, l.Count(mpiGang, ""))
			assert.Equal(t, tt.wantOtherLeft, l.Count(otherGang, ""))
			_, groups := l.HeldOn("n1", types.NamespacedName{}, "")
			assert.ElementsMatch(t, tt.wantNodeN1Groups, groups, "the node's index follows the groups'")
		})
	}
}

func TestRoomsTellWhatChanged(t *testing.T) {
	tests := []struct {
		name string
		act  func(*Rooms)
		want []types.NamespacedName
	}{
		{name: "holding a room", act: func(l *Rooms) { l.Add(&Room{Group: otherGang, Role: "launcher", Node: "n1"}) }, want: []types.NamespacedName{otherGang}},
		{name: "taking a room", act: func(l *Rooms) { l.Take(mpiGang, "launcher") }, want: []types.NamespacedName{mpiGang}},
		{name: "taking none tells nothing", act: func(l *Rooms) { l.Take(mpiGang, "evaluator") }},
		{name: "releasing rooms", act: func(l *Rooms) { l.Release(mpiGang) }, want: []types.NamespacedName{mpiGang}},
		{name: "releasing none tells nothing", act: func(l *Rooms) { l.Release(otherGang) }},
		{name: "arming the rooms' expiry", act: func(l *Rooms) { l.Expire(mpiGang, epoch) }, want: []types.NamespacedName{mpiGang}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := roomsOf(Room{Group: mpiGang, Role: "launcher", Node: "n1"})
			var told []types.NamespacedName
			l.changed = func(key types.NamespacedName) { told = append(told, key) }
			tt.act(l)
			assert.Equal(t, tt.want, told)
		})
	}
}

func TestRoomsExpireAndCheck(t *testing.T) {
	l := roomsOf(Room{Group: mpiGang, Role: "launcher", Node: "n1"}, Room{Group: otherGang, Role: "launcher", Node: "n1"})
	l.Expire(mpiGang, epoch)
	for _, r := range l.Of(mpiGang) {
		assert.Equal(t, epoch, r.Expires, "the group's rooms carry their expiry")
	}
	for _, r := range l.Of(otherGang) {
		assert.True(t, r.Expires.IsZero(), "another group's do not")
	}

	assert.Empty(t, l.ToCheck(), "no group is marked")
	l.Check(mpiGang)
	l.Check(mpiGang)
	assert.Equal(t, []types.NamespacedName{mpiGang}, l.ToCheck(), "a group marked twice is checked once")
	assert.Empty(t, l.ToCheck(), "the marks are forgotten once read")
}

func TestEndingRoomsTellsEachReleaserWhy(t *testing.T) {
	tests := []struct {
		name      string
		releasers int
		want      int
	}{
		{name: "no releaser: no profile holds rooms, and nothing is told"},
		{name: "one releaser, HeldRooms of the one profile", releasers: 1, want: 1},
		{name: "a releaser per profile that runs HeldRooms", releasers: 2, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := roomsOf(Room{Group: mpiGang, Role: "launcher", Node: "n1"})
			told := 0
			for range tt.releasers {
				l.OnEnd(func(key types.NamespacedName, why RoomsEnd) {
					assert.Equal(t, mpiGang, key)
					assert.Equal(t, PodGroupDeleted, why)
					told++
				})
			}
			l.End(mpiGang, PodGroupDeleted)
			assert.Equal(t, tt.want, told)
			assert.Equal(t, int32(1), l.Count(mpiGang, ""), "ending tells; only the releaser releases")
		})
	}
}

// TestTheObserverHearsEachRoomHeldAndHowItEnded: the model keeps the held
// rooms' gauge and ages from what Rooms tells it.
func TestTheObserverHearsEachRoomHeldAndHowItEnded(t *testing.T) {
	l := NewRooms()
	held := 0
	var ended []string
	l.Observe(func() { held++ }, func(r *Room, how string) { ended = append(ended, r.Node+" "+how) })
	l.Add(&Room{Group: mpiGang, Role: "launcher", Node: "n1"})
	l.Add(&Room{Group: mpiGang, Role: "launcher", Node: "n2"})
	l.Add(&Room{Group: otherGang, Role: "launcher", Node: "n3"})
	l.Take(otherGang, "launcher")
	l.Release(mpiGang)
	assert.Equal(t, 3, held)
	assert.ElementsMatch(t, []string{"n3 taken", "n1 released", "n2 released"}, ended)
}

func TestRoomsWithDevices(t *testing.T) {
	withDevices := Room{Group: mpiGang, Role: "launcher", Node: "n1", Devices: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}}}
	l := roomsOf(withDevices, Room{Group: otherGang, Role: "launcher", Node: "n1"})
	rooms := l.WithDevices()
	if assert.Len(t, rooms, 1) {
		assert.Equal(t, mpiGang, rooms[0].Group)
	}
}
