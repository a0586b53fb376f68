package launchorder

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	releaseDelay = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      "muster",
		Name:           "launch_release_delay_seconds",
		Help:           "Time from the scheduler seeing the last predecessor reach start-after to the held successor being allowed, by the scheduler's clock.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	})
	holdDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      "muster",
		Name:           "launch_hold_duration_seconds",
		Help:           "Time a successor was held at Permit until its predecessors reached start-after.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 17),
		StabilityLevel: metrics.ALPHA,
	})
	heldPods = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "muster",
		Name:           "launch_held_pods",
		Help:           "Successors held at Permit for their predecessors.",
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

// reportHeld moves the gauge of held successors by delta.
func reportHeld(delta float64) { heldPods.Add(delta) }

// reportReleased records a released hold: how long after the scheduler saw
// its predecessors up, and how long it was held.
func reportReleased(delay, held time.Duration) {
	releaseDelay.Observe(delay.Seconds())
	holdDuration.Observe(held.Seconds())
}

// The scheduler serves legacyregistry on its /metrics endpoint.
func register() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(releaseDelay, holdDuration, heldPods)
	})
}
