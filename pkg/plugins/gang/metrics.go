package gang

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const subsystem = "muster"

var (
	admissionDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "gang_admission_duration_seconds",
		Help:           "Time from a gang's first member passing PreEnqueue to its quorum being allowed at Permit.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 17),
		StabilityLevel: metrics.ALPHA,
	})
	attemptsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "gang_attempts_total",
		Help:           "Gang scheduling attempts by result: admitted, rejected, or evicted (a partly bound gang that could not complete).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	creationToAdmission = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "gang_creation_to_admission_seconds",
		Help:           "Time from a gang's PodGroup being created to the gang's first admission at Permit.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 20),
		StabilityLevel: metrics.ALPHA,
	})
	preemptionToAdmission = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "gang_preemption_to_admission_seconds",
		Help:           "Time from victims being preempted for a gang to the gang's admission.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 17),
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

const (
	resultAdmitted = "admitted"
	resultRejected = "rejected"
	resultEvicted  = "evicted"
)

func reportAdmitted(latency, sinceCreation time.Duration) {
	attemptsTotal.WithLabelValues(resultAdmitted).Inc()
	admissionDuration.Observe(latency.Seconds())
	creationToAdmission.Observe(sinceCreation.Seconds())
}

func reportRejected() { attemptsTotal.WithLabelValues(resultRejected).Inc() }

// reportEvicted counts a partly bound gang whose bound members were
// evicted.
func reportEvicted() { attemptsTotal.WithLabelValues(resultEvicted).Inc() }

// reportAdmittedAfterPreemption observes how long a gang took to be
// admitted once victims were preempted for it.
func reportAdmittedAfterPreemption(d time.Duration) { preemptionToAdmission.Observe(d.Seconds()) }

// The scheduler serves legacyregistry on its /metrics endpoint.
func register() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(admissionDuration, attemptsTotal, creationToAdmission, preemptionToAdmission)
		for _, result := range []string{resultAdmitted, resultRejected, resultEvicted} {
			attemptsTotal.WithLabelValues(result)
		}
	})
}
