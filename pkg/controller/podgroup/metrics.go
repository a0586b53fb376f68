package podgroup

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/muster-dev/muster/pkg/gangview"
)

var gangsByPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "muster_gangs",
	Help: "Gangs by the phase kubectl muster shows, as the leading muster-controller reads them from their PodGroups and pods.",
}, []string{"phase"})

func init() {
	metrics.Registry.MustRegister(gangsByPhase)
	// Every phase is a series from the start, so that a query of one
	// with no gang in it reads 0, not nothing.
	for _, phase := range gangview.Phases {
		gangsByPhase.WithLabelValues(string(phase))
	}
}

// phases is the phase of each group the status reconciler has seen,
// behind the gauge of gangs by phase.
type phases struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName]gangview.Phase
}

// set records the group's phase; "" forgets the group.
func (p *phases) set(key types.NamespacedName, phase gangview.Phase) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byKey == nil {
		p.byKey = map[types.NamespacedName]gangview.Phase{}
	}
	old, had := p.byKey[key]
	if had && old == phase {
		return
	}
	if had {
		gangsByPhase.WithLabelValues(string(old)).Dec()
		delete(p.byKey, key)
	}
	if phase != "" {
		p.byKey[key] = phase
		gangsByPhase.WithLabelValues(string(phase)).Inc()
	}
}
