package group

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
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
	creationToBound = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      "muster",
		Name:           "gang_creation_to_bound_seconds",
		Help:           "Time from a gang's PodGroup being created to its quorum of members being bound, the first time.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 20),
		StabilityLevel: metrics.ALPHA,
	})
	partlyBound = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      "muster",
		Name:           "gang_partly_bound_seconds",
		Help:           "Time a gang spent with some members bound and fewer than its quorum: until its quorum was bound, or its bound members went.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 22),
		StabilityLevel: metrics.ALPHA,
	})
	heldRooms = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "muster",
		Name:           "held_rooms",
		Help:           "groupstate.Rooms held for gang members their owner creates later.",
		StabilityLevel: metrics.ALPHA,
	})
	heldRoomAge = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "muster",
		Name:           "held_room_age_seconds",
		Help:           "How long a room was held for a late member, by how it ended: taken by its member, or released.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 20),
		StabilityLevel: metrics.ALPHA,
	}, []string{"end"})
	domainChoices = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "muster",
		Name:           "domain_choices_total",
		Help:           "Topology domains chosen for a gang's attempt, by result: a domain that fits, none that fits, or none yet because its ResourceClaims are not made.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	deviceShortfalls = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "muster",
		Name:           "gang_device_shortfalls_total",
		Help:           "Gang attempts that found fewer free devices than the members claim, by where they looked: every node, or the closest topology domain.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"scope"})
	registerOnce sync.Once
)

// reportRoomHeld counts a room held.
func reportRoomHeld() { heldRooms.Inc() }

// reportRoomEnded counts a room no longer held, and how long it was, by
// how it ended.
func reportRoomEnded(r *groupstate.Room, how string) {
	heldRooms.Dec()
	heldRoomAge.WithLabelValues(how).Observe(time.Since(r.HeldSince).Seconds())
}

// reportWaitingGangs moves the gauge of gangs waiting at Permit.
func reportWaitingGangs(delta float64) { waitingGangs.Add(delta) }

// ReportDomainChoice counts a topology domain chosen for an attempt.
func ReportDomainChoice(d groupstate.Domain) {
	switch {
	case d.WaitsForClaims:
		domainChoices.WithLabelValues("waits_for_claims").Inc()
	case d.Unplaceable != "":
		domainChoices.WithLabelValues("none_fits").Inc()
	default:
		domainChoices.WithLabelValues("fits").Inc()
	}
}

// The scopes of a device shortfall.
const (
	ShortOnNodes  = "nodes"
	ShortInDomain = "domain"
)

// ReportDeviceShortfall counts an attempt that found the gang's devices
// short in scope.
func ReportDeviceShortfall(scope string) { deviceShortfalls.WithLabelValues(scope).Inc() }

// reportPublished counts one write of a published record.
func reportPublished() { publishedWrites.Inc() }

// registerMetrics registers the model's metrics with legacyregistry, which
// the scheduler serves on its /metrics endpoint.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(waitingGangs, publishedWrites, creationToBound, partlyBound, heldRooms, heldRoomAge, domainChoices, deviceShortfalls)
		// Each is a series from the start, so that a query reads 0, not
		// nothing, before the first of its kind.
		for _, end := range []string{"taken", "released"} {
			heldRoomAge.WithLabelValues(end)
		}
		for _, result := range []string{"fits", "none_fits", "waits_for_claims"} {
			domainChoices.WithLabelValues(result)
		}
		for _, scope := range []string{ShortOnNodes, ShortInDomain} {
			deviceShortfalls.WithLabelValues(scope)
		}
	})
}
