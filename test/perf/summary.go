package perf

import (
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-dev/muster/pkg/topology"
)

// gpuResource is the accelerator the workloads' idle time is counted in.
const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// podTimes is what the workload simulator saw of one pod, all by the same
// informer's clock. A zero time means the pod never got there.
type podTimes struct {
	group   types.NamespacedName
	role    string
	gpus    int64
	created time.Time
	bound   time.Time
	running time.Time
	ready   time.Time
	// finished is when the simulator ended the pod to free its room.
	finished time.Time
	// node is the node it was bound to.
	node string
}

// groupShape is what the summary needs of a PodGroup.
type groupShape struct {
	minMember int32
	// topology is nil for a gang without roles.
	topology *topology.Topology
	// lateLauncher is set for a job whose launcher is created only once
	// its workers are Ready.
	lateLauncher bool
	// domainOf is, for a gang that must stay in one topology domain, each
	// node's value of the domain's label ("" for a node without it); nil
	// for a gang free to span domains.
	domainOf map[string]string
}

// summary holds the figures the harness has no collector for. They are
// computed the same way for every scheduler profile, from bind times, so
// that a profile's own metrics are not the only witness.
type summary struct {
	gangs int
	// admission is, per gang whose quorum was bound, the time from its
	// minMember-th member being created to its minMember-th member being
	// bound.
	admission []time.Duration
	// partial counts gangs that never ran whole: a member finished before
	// the quorum was bound, or members were bound but never a quorum.
	partial int
	// constrained counts the gangs that must stay in one topology domain,
	// and spanning those whose bound members are in more than one.
	constrained, spanning int
	// completion is from the first member created to the last quorum bound.
	completion time.Duration
	// successors counts pods of a role that has predecessors in its
	// group's launch order.
	successors int
	// early counts successors bound before every pod of their predecessor
	// roles had reached the group's start-after state.
	early int
	// release is, per successor bound in order, the time from the last
	// predecessor reaching start-after to the successor being bound.
	release []time.Duration

	// lateJobs counts the jobs whose launcher is created late.
	lateJobs int
	// launcherWait is, per such job whose launcher was bound, the time
	// from its last worker Ready to its launcher bound.
	launcherWait []time.Duration
	// idleGPUSeconds sums, over those jobs' workers, the GPUs a worker
	// holds times the time from its Ready to its launcher bound, or to the
	// end of the workload when the launcher never was.
	idleGPUSeconds float64
	// neverLaunched counts those jobs whose launcher was never bound.
	neverLaunched int
	// jobStart is, per such job whose launcher was bound, the time from
	// its last worker created to its launcher bound: how long a submitted
	// job waited to run.
	jobStart []time.Duration
}

// summarize computes the figures of a workload that ended at end.
func summarize(pods []podTimes, shapes map[types.NamespacedName]groupShape, end time.Time) summary {
	byGroup := map[types.NamespacedName][]podTimes{}
	for _, p := range pods {
		if p.group.Name != "" {
			byGroup[p.group] = append(byGroup[p.group], p)
		}
	}
	var s summary
	var first, last time.Time
	for group, members := range byGroup {
		shape, ok := shapes[group]
		if !ok || shape.minMember <= 0 {
			continue
		}
		s.gangs++
		quorumCreated := nth(members, shape.minMember, func(p podTimes) time.Time { return p.created })
		quorumBound := nth(members, shape.minMember, func(p podTimes) time.Time { return p.bound })
		if !quorumCreated.IsZero() && !quorumBound.IsZero() {
			s.admission = append(s.admission, quorumBound.Sub(quorumCreated))
			if last.Before(quorumBound) {
				last = quorumBound
			}
		}
		if ranPartially(members, quorumBound) {
			s.partial++
		}
		for _, p := range members {
			if !p.created.IsZero() && (first.IsZero() || p.created.Before(first)) {
				first = p.created
			}
		}
		if shape.topology != nil {
			s.addLaunchOrder(members, shape.topology)
		}
		if shape.lateLauncher {
			s.addLateLauncher(members, end)
		}
		if shape.domainOf != nil {
			s.constrained++
			if spansDomains(members, shape.domainOf) {
				s.spanning++
			}
		}
	}
	if !first.IsZero() && !last.IsZero() {
		s.completion = last.Sub(first)
	}
	return s
}

// nth returns the n-th earliest non-zero time among the members, or zero
// if fewer than n members have one.
func nth(members []podTimes, n int32, at func(podTimes) time.Time) time.Time {
	var times []time.Time
	for _, p := range members {
		if t := at(p); !t.IsZero() {
			times = append(times, t)
		}
	}
	if int32(len(times)) < n {
		return time.Time{}
	}
	slices.SortFunc(times, time.Time.Compare)
	return times[n-1]
}

// spansDomains reports whether the bound members are on nodes of more than
// one domain; a node without the label is a domain of its own.
func spansDomains(members []podTimes, domainOf map[string]string) bool {
	domains := map[string]bool{}
	for _, p := range members {
		if p.node == "" {
			continue
		}
		domain, labeled := domainOf[p.node]
		if !labeled {
			domain = "node/" + p.node
		}
		domains[domain] = true
	}
	return len(domains) > 1
}

func ranPartially(members []podTimes, quorumBound time.Time) bool {
	for _, p := range members {
		if p.bound.IsZero() {
			continue
		}
		if quorumBound.IsZero() {
			return true
		}
		if !p.finished.IsZero() && p.finished.Before(quorumBound) {
			return true
		}
	}
	return false
}

func (s *summary) addLaunchOrder(members []podTimes, t *topology.Topology) {
	reached := func(p podTimes) time.Time {
		switch t.StartAfter {
		case topology.StartAfterScheduled:
			return p.bound
		case topology.StartAfterRunning:
			return p.running
		default:
			return p.ready
		}
	}
	for _, successor := range members {
		predecessors := t.Predecessors(successor.role)
		if len(predecessors) == 0 || successor.bound.IsZero() {
			continue
		}
		s.successors++
		var want int32
		for _, role := range predecessors {
			want += t.Replicas[role]
		}
		var reachedBefore int32
		var lastReached time.Time
		for _, p := range members {
			if !slices.Contains(predecessors, p.role) {
				continue
			}
			at := reached(p)
			if at.IsZero() || at.After(successor.bound) {
				continue
			}
			reachedBefore++
			if lastReached.Before(at) {
				lastReached = at
			}
		}
		if reachedBefore < want {
			s.early++
			continue
		}
		s.release = append(s.release, successor.bound.Sub(lastReached))
	}
}

func (s *summary) addLateLauncher(members []podTimes, end time.Time) {
	s.lateJobs++
	var launched, lastReady, lastCreated time.Time
	for _, p := range members {
		if p.role == "launcher" && !p.bound.IsZero() {
			launched = p.bound
		}
	}
	idleUntil := launched
	if launched.IsZero() {
		s.neverLaunched++
		idleUntil = end
	}
	for _, p := range members {
		if p.role == "launcher" || p.ready.IsZero() {
			continue
		}
		if lastReady.Before(p.ready) {
			lastReady = p.ready
		}
		if lastCreated.Before(p.created) {
			lastCreated = p.created
		}
		if idleUntil.After(p.ready) {
			s.idleGPUSeconds += float64(p.gpus) * idleUntil.Sub(p.ready).Seconds()
		}
	}
	if !launched.IsZero() && !lastReady.IsZero() {
		s.launcherWait = append(s.launcherWait, launched.Sub(lastReady))
		s.jobStart = append(s.jobStart, launched.Sub(lastCreated))
	}
}

// percentile is the nearest-rank percentile, as the harness computes its
// throughput percentiles; -1 when there are no values.
func percentile(values []time.Duration, p float64) time.Duration {
	if len(values) == 0 {
		return -1
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[max(rank, 0)]
}
