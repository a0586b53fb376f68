package gang

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// queuePlaces keeps the place Less gave each pod for as long as the pod
// stays queued, so that the queue's order holds still while its group's
// state changes. The active queue is a heap: an order that changes under
// it (a group fails, or its attempt starts holding reservations) leaves
// pods below others that now sort after them, and kept there while newer
// pods keep arriving; members of a gang whose attempt holds its domain's
// room were left unpopped for the whole Permit timeout that way. A pod
// takes its group's new place when it is queued again, which the queue
// marks with a new timestamp.
type queuePlaces struct {
	mu     sync.Mutex
	places map[types.UID]keptPlace
}

// keptPlace is a pod's place, kept for its stay in the queue that began at
// queuedAt.
type keptPlace struct {
	queuedAt time.Time
	place    queuePlace
}

func newQueuePlaces() *queuePlaces {
	return &queuePlaces{places: map[types.UID]keptPlace{}}
}

// of returns the place kept for the pod's stay in the queue that began at
// queuedAt, or the one place computes, which is kept for the rest of it.
func (q *queuePlaces) of(uid types.UID, queuedAt time.Time, place func() queuePlace) queuePlace {
	q.mu.Lock()
	defer q.mu.Unlock()
	if kept, ok := q.places[uid]; ok && kept.queuedAt.Equal(queuedAt) {
		return kept.place
	}
	p := place()
	q.places[uid] = keptPlace{queuedAt: queuedAt, place: p}
	return p
}

// forget drops the place of a pod that left the queue for good: bound or
// deleted.
func (q *queuePlaces) forget(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.places, uid)
}
