package group

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	waitingGangs = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "muster",
		Name:           "gangs_waiting",
		Help:           "Gangs with members reserved and waiting at Permit for the rest of their quorum.",
		StabilityLevel: metrics.ALPHA,
	})
	publishedWrites = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "muster",
		Name:           "published_writes_total",
		Help:           "Writes of the record of held rooms, domain and last attempt muster-scheduler publishes on PodGroups (scheduling.muster.dev/state).",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// reportWaitingGangs moves the gauge of gangs waiting at Permit.
func reportWaitingGangs(delta float64) { waitingGangs.Add(delta) }

// reportPublished counts one write of a published record.
func reportPublished() { publishedWrites.Inc() }

// registerMetrics registers the model's metrics with legacyregistry, which
// the scheduler serves on its /metrics endpoint.
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(waitingGangs, publishedWrites) })
}
