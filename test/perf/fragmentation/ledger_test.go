//go:build bench

package fragmentation

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ledger keeps the accounts of one run, from the pods' events as they
// come: each rack's free slots, each gang's wait, and the two integrals
// the figures are made of. Between two events nothing it counts changes,
// so each event first accrues the time since the one before.
type ledger struct {
	mu     sync.Mutex        // the driver and the pod informer both write
	rackOf map[string]string // node → rack
	free   map[string]int    // rack → free slots
	// from and to bound the measured window: the gangs arriving in it,
	// and the utilization over it.
	from, to time.Time
	gangs    map[string]*gangAccount
	pods     map[types.UID]string // a bound pod → its rack
	last     time.Time
	// slotSeconds is the bound slots integrated over the window.
	slotSeconds float64
	capacity    int
}

// gangAccount is one gang's: when it arrived and was bound whole, and
// how long it waited while some rack had room for it.
type gangAccount struct {
	size           int
	arrived, bound time.Time
	members        int
	racks          sets.Set[string]
	// wasted is its wait while some single rack had room for all of it.
	wasted time.Duration
}

func newLedger(rackOf map[string]string, slotsPerNode int, from, to time.Time) *ledger {
	l := &ledger{rackOf: rackOf, free: map[string]int{}, from: from, to: to,
		gangs: map[string]*gangAccount{}, pods: map[types.UID]string{}, last: from}
	for _, rack := range rackOf {
		l.free[rack] += slotsPerNode
		l.capacity += slotsPerNode
	}
	return l
}

// arrived records a gang's arrival, at its PodGroup's creation.
func (l *ledger) arrived(gang string, size int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accrue(at)
	l.gangs[gang] = &gangAccount{size: size, arrived: at, racks: sets.New[string]()}
}

// bound records a member of gang bound to node; a pod seen bound again
// counts once.
func (l *ledger) bound(uid types.UID, gang, node string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.pods[uid]; seen {
		return
	}
	l.accrue(at)
	rack := l.rackOf[node]
	l.pods[uid] = rack
	l.free[rack]--
	g := l.gangs[gang]
	if g == nil {
		return
	}
	g.members++
	g.racks.Insert(rack)
	if g.members == g.size {
		g.bound = at
	}
}

// gone records a bound pod deleted, its slot free again.
func (l *ledger) gone(uid types.UID, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rack, seen := l.pods[uid]
	if !seen {
		return
	}
	l.accrue(at)
	delete(l.pods, uid)
	l.free[rack]++
}

// boundWhole reports whether every member of gang has been bound.
func (l *ledger) boundWhole(gang string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gangs[gang]
	return g != nil && !g.bound.IsZero()
}

// allMeasuredBound reports whether every gang of the window that has
// arrived has been bound whole.
func (l *ledger) allMeasuredBound() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.gangs {
		if l.measured(g) && g.bound.IsZero() {
			return false
		}
	}
	return true
}

// accrue adds the time from the last event to now, in the state that held
// over it.
func (l *ledger) accrue(now time.Time) {
	if !now.After(l.last) {
		return
	}
	span := now.Sub(l.last)
	if from, to := later(l.last, l.from), earlier(now, l.to); to.After(from) {
		l.slotSeconds += float64(l.capacity-l.freeSlots()) * to.Sub(from).Seconds()
	}
	roomiest := 0
	for _, free := range l.free {
		roomiest = max(roomiest, free)
	}
	for _, g := range l.gangs {
		if l.measured(g) && g.bound.IsZero() && g.size <= roomiest {
			g.wasted += span
		}
	}
	l.last = now
}

func (l *ledger) freeSlots() int {
	total := 0
	for _, free := range l.free {
		total += free
	}
	return total
}

func (l *ledger) measured(g *gangAccount) bool {
	return !g.arrived.Before(l.from) && g.arrived.Before(l.to)
}

// result is what one run measured.
type result struct {
	// gangs is how many arrived in the window; unplaced how many of them
	// were still waiting at the end, their wait counted up to it; spanning
	// how many were bound over more than one rack.
	gangs, unplaced, spanning int
	waitP50, waitP99          time.Duration
	// waits is each measured gang's wait, for the page's figure.
	waits []time.Duration
	// waste is the gang-seconds spent waiting while some single rack had
	// room for the gang: a placement's failure, not capacity's.
	waste time.Duration
	// utilization is the bound slots over the capacity, over the window.
	utilization float64
}

// close accrues up to end and sums the measured gangs up.
func (l *ledger) close(end time.Time) result {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accrue(end)
	var r result
	var waits []time.Duration
	for _, g := range l.gangs {
		if !l.measured(g) {
			continue
		}
		r.gangs++
		r.waste += g.wasted
		if g.bound.IsZero() {
			r.unplaced++
			waits = append(waits, end.Sub(g.arrived))
			continue
		}
		waits = append(waits, g.bound.Sub(g.arrived))
		if g.racks.Len() > 1 {
			r.spanning++
		}
	}
	r.waitP50, r.waitP99 = percentile(waits, 0.50), percentile(waits, 0.99)
	r.waits = waits
	if window := l.to.Sub(l.from).Seconds(); window > 0 {
		r.utilization = l.slotSeconds / (float64(l.capacity) * window)
	}
	return r
}

// mostWasted describes the n measured gangs that wasted the most, for the
// log: where a run's waste comes from.
func (l *ledger) mostWasted(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for name, g := range l.gangs {
		if l.measured(g) && g.wasted > 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(l.gangs[b].wasted, l.gangs[a].wasted) })
	var out []string
	for _, name := range names[:min(n, len(names))] {
		g := l.gangs[name]
		waited := "still waiting"
		if !g.bound.IsZero() {
			waited = "waited " + g.bound.Sub(g.arrived).Round(time.Second).String()
		}
		out = append(out, fmt.Sprintf("%s (%d members, arrived at %s): wasted %s, %s",
			name, g.size, g.arrived.Sub(l.from.Add(-warmup)).Round(time.Second), g.wasted.Round(time.Second), waited))
	}
	return out
}

// percentile is the nearest-rank p-th of values.
func percentile(values []time.Duration, p float64) time.Duration {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(values))
	rank := int(p*float64(len(sorted)) + 0.5)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
