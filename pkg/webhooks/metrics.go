package webhooks

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muster_webhook_refusals_total",
		Help: "Objects muster-controller's webhooks refused, by kind and the field each refusal names, without its keys or indexes.",
	}, []string{"kind", "field"})
	injectionFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "muster_injection_failures_total",
		Help: "Pods the pod webhook could not give their group's environment for a reason other than a refusal, such as an API read that failed.",
	})
)

func init() {
	metrics.Registry.MustRegister(refusals, injectionFailures)
}

// countRefusal counts one refused object under each field its errors
// name. A field's keys and indexes, which users choose, are cut off, so
// that the label's values stay few: metadata.labels[muster.dev/role]
// counts as metadata.labels.
func countRefusal(kind string, errs field.ErrorList) {
	seen := map[string]bool{}
	for _, err := range errs {
		name, _, _ := strings.Cut(err.Field, "[")
		if !seen[name] {
			seen[name] = true
			refusals.WithLabelValues(kind, name).Inc()
		}
	}
}
