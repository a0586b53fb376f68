package gang

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// queuePlaces keeps, for each queued pod, the best place Less has given it
// in its current stay in the queue: a place moves forward at once, never
// back. The active queue is a heap. A pod whose place moves back under it
// (its group fails) stays above pods that now sort before it, and holds
// them there while newer pods keep arriving: members of a gang whose
// attempt held its domain's room were left unpopped for the whole Permit
// timeout that way. A pod whose place moves forward (its group's attempt
// starts holding reservations) only waits for the few pods above it on
// its path to the top, as they are popped, and holds none back. A pod
// takes its group's place, whichever it is, when it is queued again, which
// the queue marks with a new timestamp.
type queuePlaces struct {
	mu     sync.Mutex
	places map[types.UID]keptPlace
}

// keptPlace is a pod's best place in its stay in the queue that began at
// queuedAt.
type keptPlace struct {
	queuedAt time.Time
	place    queuePlace
}

func newQueuePlaces() *queuePlaces {
	return &queuePlaces{places: map[types.UID]keptPlace{}}
}

// of returns the better of the place kept for the pod's stay in the queue
// that began at queuedAt and its current one, which it keeps.
func (q *queuePlaces) of(uid types.UID, queuedAt time.Time, current queuePlace) queuePlace {
	q.mu.Lock()
	defer q.mu.Unlock()
	if kept, ok := q.places[uid]; ok && kept.queuedAt.Equal(queuedAt) && !current.before(kept.place) {
		return kept.place
	}
	q.places[uid] = keptPlace{queuedAt: queuedAt, place: current}
	return current
}

// forget drops the place of a pod that left the queue for good: bound or
// deleted.
func (q *queuePlaces) forget(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.places, uid)
}
