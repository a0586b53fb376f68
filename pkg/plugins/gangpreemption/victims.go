package gangpreemption

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/muster-dev/muster/pkg/topology"
)

// unit is what preemption takes at once: a whole muster gang (its members
// on nodes, across every node), one member above an elastic group's min,
// or what kube-scheduler's own preemption would take (a pod of no group,
// an upstream PodGroup). It is a preemption.Victim, so the framework's PDB
// rules weigh it whole.
type unit struct {
	// name is the gang's or the pod's namespace/name.
	name     string
	priority int32
	pods     []fwk.PodInfo
	start    *metav1.Time
	keyType  fwk.EntityKeyType
	// shrink marks a member above an elastic group's min; whole is then
	// its gang's unit of the members up to the min, index its worker
	// index: the highest goes first.
	shrink bool
	whole  *unit
	index  int32
}

var _ preemption.Victim = &unit{}

func (u *unit) Priority() int32                 { return u.priority }
func (u *unit) Pods() []fwk.PodInfo             { return u.pods }
func (u *unit) EarliestStartTime() *metav1.Time { return u.start }
func (u *unit) IsGroup() bool                   { return u.keyType != fwk.PodKeyType }
func (u *unit) Type() fwk.EntityKeyType         { return u.keyType }

// newUnit is the framework's victim (preemption.NewVictim) of the pods,
// which gangUnits never leaves empty, under name.
func newUnit(name string, pods []*corev1.Pod, priority int32, keyType fwk.EntityKeyType) *unit {
	infos := make([]fwk.PodInfo, 0, len(pods))
	for _, p := range pods {
		info, _ := framework.NewPodInfo(p)
		infos = append(infos, info)
	}
	u := &unit{name: name, priority: priority, keyType: keyType, pods: infos}
	if v, err := preemption.NewVictim(infos, priority, keyType); err == nil {
		u.start = v.EarliestStartTime()
	}
	return u
}

// moreImportant orders units the dearest first, the reverse of the order
// they are taken in: the highest priority; a whole gang before a member
// above an elastic min; then kube-scheduler's own order
// (preemption.MoreImportantVictim: a group before a pod, more pods, the
// longest running); a unit not started yet, such as a gang waiting at
// Permit, after one running; then by name. An elastic group's members
// above its min are ordered by index alone. PodDisruptionBudgets are
// weighed before it, as the framework does.
func moreImportant(a, b *unit) int {
	if c := cmp.Or(cmp.Compare(b.priority, a.priority), compareBool(a.shrink, b.shrink)); c != 0 {
		return c
	}
	// An elastic group's members above its min go the highest index first,
	// whenever each started: its owner is shrunk to a victim's index.
	if a.shrink && b.shrink && a.whole == b.whole {
		return cmp.Compare(a.index, b.index)
	}
	switch {
	case preemption.MoreImportantVictim(a, b):
		return -1
	case preemption.MoreImportantVictim(b, a):
		return 1
	}
	return cmp.Or(
		compareStart(a.start, b.start),
		cmp.Compare(a.name, b.name),
		cmp.Compare(a.index, b.index),
	)
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// compareStart puts the earlier start first; a unit not started yet is
// the youngest.
func compareStart(a, b *metav1.Time) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return a.Time.Compare(b.Time)
}

// gangOf returns the gang a victim goes with, whole: its group, unless the
// model knows no such group, the pod is no member of it (Model.NotAMember:
// it goes alone, as a pod of no group), or it is an upstream PodGroup
// whose members may be preempted one by one (disruptionMode single, the
// API's default), as kube-scheduler takes them.
func (pl *GangPreemption) gangOf(pod *corev1.Pod) (types.NamespacedName, bool) {
	key, grouped := topology.GroupOf(pod)
	if !grouped {
		return key, false
	}
	pg := pl.groups.PodGroup(key)
	if pg == nil || pl.groups.NotAMember(pod, pg) != "" {
		return key, false
	}
	if upstream := pl.groups.UpstreamPodGroup(key); upstream != nil {
		return key, !topology.DisruptedOneByOne(upstream)
	}
	return key, true
}

// unitsOf regroups the framework's victims on a node into muster's units:
// a pod of a gang taken whole (gangOf) stands for its whole gang, and for
// each of its members above an elastic min. Only units of priority below the
// preemptor's, never of its own gang, are returned.
func (pl *GangPreemption) unitsOf(victims []*preemption.DomainVictim, preemptor *corev1.Pod) []*unit {
	priority := corev1helpers.PodPriority(preemptor)
	own, _ := topology.GroupOf(preemptor)
	seen := map[types.NamespacedName]bool{}
	var units []*unit
	for _, v := range victims {
		pod := v.Pods()[0].GetPod()
		key, whole := pl.gangOf(pod)
		if !whole || len(v.Pods()) > 1 {
			if v.Priority() < priority {
				u := &unit{name: pod.Namespace + "/" + pod.Name, priority: v.Priority(), pods: v.Pods(), start: v.EarliestStartTime(), keyType: v.Type()}
				units = append(units, u)
			}
			continue
		}
		if key == own || seen[key] {
			continue
		}
		seen[key] = true
		for _, u := range pl.gangUnits(key) {
			if u.priority < priority {
				units = append(units, u)
			}
		}
	}
	return units
}

// gangUnits is what preemption may take of a gang: the whole gang, as a
// unit of its members up to its min, and, for an admitted elastic group,
// each of its workers above its min, the highest index first. Members
// count where they hold room: bound, or reserved and waiting at Permit.
func (pl *GangPreemption) gangUnits(key types.NamespacedName) []*unit {
	pg := pl.groups.PodGroup(key)
	members, err := pl.groups.Members(key)
	if pg == nil || err != nil {
		return nil
	}
	var placed []*corev1.Pod
	var priority int32
	for _, p := range members {
		if !topology.IsActiveMember(p) {
			continue
		}
		if p.Spec.NodeName == "" {
			wp := pl.handle.GetWaitingPod(p.UID)
			if wp == nil {
				continue
			}
			p = wp.GetPod()
		}
		// A gang's search may have taken some members off already.
		if !pl.inSnapshot(p) {
			continue
		}
		// A gang is as dear as its dearest member.
		if len(placed) == 0 || corev1helpers.PodPriority(p) > priority {
			priority = corev1helpers.PodPriority(p)
		}
		placed = append(placed, p)
	}
	if len(placed) == 0 {
		return nil
	}
	extras := pl.elasticExtras(key, pg.Spec.MinMember, placed)
	core := slices.DeleteFunc(slices.Clone(placed), func(p *corev1.Pod) bool {
		return slices.ContainsFunc(extras, func(e extra) bool { return e.pod.UID == p.UID })
	})
	whole := newUnit(key.String(), core, priority, fwk.PodGroupKeyType)
	units := []*unit{whole}
	for _, e := range extras {
		u := newUnit(key.String(), []*corev1.Pod{e.pod}, priority, fwk.PodGroupKeyType)
		u.shrink, u.whole, u.index = true, whole, e.index
		units = append(units, u)
	}
	return units
}

// extra is a worker above an elastic group's min and its index.
type extra struct {
	pod   *corev1.Pod
	index int32
}

// elasticExtras are an admitted elastic group's bound workers above its
// min, the highest index first; none for any other gang.
func (pl *GangPreemption) elasticExtras(key types.NamespacedName, minMember int32, placed []*corev1.Pod) []extra {
	topo, err := pl.groups.Topology(key)
	if err != nil || topo == nil || topo.Elastic == nil {
		return nil
	}
	var workers []extra
	var bound int32
	for _, p := range placed {
		if p.Spec.NodeName == "" {
			continue
		}
		bound++
		if member, errs := topo.Identify(p); len(errs) == 0 && member.Role == topology.ElasticRole {
			workers = append(workers, extra{pod: p, index: member.Index})
		}
	}
	above := int(bound - minMember)
	if above <= 0 {
		return nil
	}
	slices.SortFunc(workers, func(a, b extra) int { return cmp.Compare(b.index, a.index) })
	return workers[:min(above, len(workers))]
}

// inSnapshot reports whether the pod holds room in the cycle's snapshot.
func (pl *GangPreemption) inSnapshot(pod *corev1.Pod) bool {
	info, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(pod.Spec.NodeName)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(info.GetPods(), func(p fwk.PodInfo) bool { return p.GetPod().UID == pod.UID })
}
