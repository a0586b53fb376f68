package gangpreemption

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
)

// Reasons of the events about gang preemption.
const (
	ReasonPreempting = gangview.ReasonPreempting
	ReasonPreempted  = gangview.ReasonPreempted
)

var (
	preemptionsTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "muster",
		Name:           "gang_preemptions_total",
		Help:           "Preemptions for a gang: victims taken so that all its missing members fit at once.",
		StabilityLevel: metrics.ALPHA,
	})
	preemptionVictimsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "muster",
		Name:           "gang_preemption_victims_total",
		Help:           "What preemption for gangs took: victim units (a whole gang, a member above an elastic min, a pod of no group) and their pods.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	victimUnitsTaken = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "muster",
		Name:           "gang_preemption_victim_units_total",
		Help:           "Victim units preemption for gangs took, by what was taken: a whole gang, members above an elastic group's min, or a pod of no group.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"taken"})
	registerMetrics sync.Once
)

// The scheduler serves legacyregistry on its /metrics endpoint.
func register() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(preemptionsTotal, preemptionVictimsTotal, victimUnitsTaken)
		// Each is a series from the start, so that a query reads 0, not
		// nothing, before the first preemption.
		for _, label := range []string{"units", "pods"} {
			preemptionVictimsTotal.WithLabelValues(label)
		}
		for _, taken := range []string{takenWholeGang, takenElasticMembers, takenPod} {
			victimUnitsTaken.WithLabelValues(taken)
		}
	})
}

// What a victim unit is.
const (
	takenWholeGang      = "whole_gang"
	takenElasticMembers = "elastic_members"
	takenPod            = "pod"
)

// reportPreemption counts one preemption for a gang and what it took.
func reportPreemption(taken []*unit, pods int) {
	preemptionsTotal.Inc()
	preemptionVictimsTotal.WithLabelValues("units").Add(float64(len(taken)))
	preemptionVictimsTotal.WithLabelValues("pods").Add(float64(pods))
	for _, u := range taken {
		switch {
		case u.shrink:
			victimUnitsTaken.WithLabelValues(takenElasticMembers).Inc()
		case u.keyType == fwk.PodKeyType:
			victimUnitsTaken.WithLabelValues(takenPod).Inc()
		default:
			victimUnitsTaken.WithLabelValues(takenWholeGang).Inc()
		}
	}
}

func podPriority(pod *corev1.Pod) int32 { return corev1helpers.PodPriority(pod) }

// An event's note may hold at most 1,024 characters, and the API server
// refuses a longer one: a gang preempting 50 pods of no group would be
// told nothing. The note names the first victims, within these bounds, and
// counts the rest; the log line names them all.
const (
	maxNamedVictims     = 5
	victimNamesMaxChars = 600
)

// victimList names the first victims, at least one, and counts the rest.
func victimList(names []string) string {
	named, chars := 0, 0
	for named < len(names) && named < maxNamedVictims {
		chars += len(names[named]) + len(", ")
		if named > 0 && chars > victimNamesMaxChars {
			break
		}
		named++
	}
	list := strings.Join(names[:named], ", ")
	if rest := len(names) - named; rest > 0 {
		list += fmt.Sprintf(" and %d more", rest)
	}
	return list
}

// tellVictimGang records on a gang what was taken of it: the whole gang,
// members above its elastic min, or members of a gang whose
// disruptionMode is single. The event recorder folds the same note about
// one gang into one event.
func (pl *GangPreemption) tellVictimGang(key types.NamespacedName, taken []*corev1.Pod, preemptor preemption.ExecutorPreemptor) {
	shrink, ok := pl.takenFrom(key, taken)
	pg := pl.groups.PodGroup(key)
	if !ok || pg == nil || len(taken) == 0 {
		return
	}
	by := fmt.Sprintf("%s %s/%s (priority %d)", preemptor.Type(), preemptor.GetNamespace(), preemptor.GetName(), preemptor.Priority())
	note := fmt.Sprintf("all %d members preempted by %s: a gang is taken whole, never left below its minMember", len(taken), by)
	if shrink {
		members := "member " + taken[0].Name
		if len(taken) > 1 {
			names := make([]string, len(taken))
			for i, v := range taken {
				names[i] = v.Name
			}
			slices.Sort(names)
			members = "members " + victimList(names)
		}
		note = fmt.Sprintf("%s preempted by %s, one by one as its PodGroup's disruptionMode single allows", members, by)
		if topo, err := pl.groups.Topology(key); err == nil && topo != nil && topo.Elastic != nil {
			note = fmt.Sprintf("%s above the elastic min preempted by %s", members, by)
		}
	}
	pl.recordEvent(pg, corev1.EventTypeWarning, ReasonPreempted, "Preempted", note)
}

// recordEvent records an event on the PodGroup.
func (pl *GangPreemption) recordEvent(pg *v1alpha1.PodGroup, eventType, reason, action, note string) {
	group.RecordEvent(pl.handle, pg, eventType, reason, action, note)
}
