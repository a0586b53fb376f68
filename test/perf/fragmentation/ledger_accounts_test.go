//go:build bench

package fragmentation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestLedgerCountsWaitWasteAndUtilization plays a short run by hand: a
// gang waits while one rack could hold it, then while none could, and is
// bound over two racks; another never fits.
func TestLedgerCountsWaitWasteAndUtilization(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(seconds int) time.Time { return t0.Add(time.Duration(seconds) * time.Second) }
	// Rack A has 4 slots, rack B 2.
	l := newLedger(map[string]string{"a1": "A", "a2": "A", "b1": "B"}, 2, at(0), at(10))

	l.arrived("x", 2, at(-1)) // before the window: occupies, is not measured
	l.arrived("g", 3, at(1))  // rack A has room: a wait wasted
	l.bound("x-0", "x", "a1", at(2))
	l.bound("x-1", "x", "a2", at(2)) // rack A down to 2: no rack has room for g
	l.bound("x-1", "x", "a2", at(3)) // seen bound again: counted once
	l.gone("x-0", at(5))
	l.gone("x-1", at(5)) // rack A has room again
	l.gone("never-bound", at(5))
	l.bound("g-0", "g", "a1", at(6))
	l.bound("g-1", "g", "a1", at(6))
	l.bound("g-2", "g", "b1", at(6))
	l.arrived("h", 7, at(8)) // larger than any rack: waits, wastes nothing

	r := l.close(at(10))
	assert.Equal(t, 2, r.gangs)
	assert.Equal(t, 1, r.unplaced, "h is still waiting")
	assert.Equal(t, 1, r.spanning, "g is over racks A and B")
	assert.Equal(t, 2*time.Second, r.waste, "g waited 1s to 2s and 5s to 6s while rack A had room")
	assert.Equal(t, 2*time.Second, r.waitP50, "h waited from 8s to the end at 10s")
	assert.Equal(t, 5*time.Second, r.waitP99, "g waited from 1s to 6s")
	// 2 slots over 2s to 5s, 3 over 6s to 10s, of 6 slots over 10s.
	assert.InDelta(t, 18.0/60, r.utilization, 1e-9)
}

func TestPercentileIsTheNearestRank(t *testing.T) {
	var values []time.Duration
	for i := 100; i >= 1; i-- {
		values = append(values, time.Duration(i)*time.Second)
	}
	assert.Equal(t, 50*time.Second, percentile(values, 0.50))
	assert.Equal(t, 99*time.Second, percentile(values, 0.99))
	assert.Equal(t, time.Duration(0), percentile(nil, 0.99))
}

// TestWorkloadOffersTheLoadsItSays: each third of the arrivals offers its
// load, the slot-seconds of the gangs arriving in it over the capacity's,
// within the draw's noise, and every gang fits a rack.
func TestWorkloadOffersTheLoadsItSays(t *testing.T) {
	jobs := workload()
	third := arrivals / time.Duration(len(offeredLoads))
	offered := make([]float64, len(offeredLoads))
	for _, j := range jobs {
		assert.LessOrEqual(t, j.members, nodesPerRack*slotsPerNode, "gang %s fits no rack", j.name)
		offered[int(j.arrive/third)] += float64(j.members) * j.runFor.Seconds()
	}
	capacity := float64(racks*nodesPerRack*slotsPerNode) * third.Seconds()
	for i, load := range offeredLoads {
		assert.InDelta(t, load, offered[i]/capacity, 0.15, "third %d of %d jobs", i+1, len(jobs))
	}
	t.Logf("%d gangs", len(jobs))
}
