package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// Reasons of the events about gang preemption.
const (
	ReasonPreempting = "Preempting"
	ReasonPreempted  = "Preempted"
)

// preemptor is what preemption makes room for: the members a gang lacks
// for its quorum (its attempt being torn down, so its reservations are
// room), or one pod, of no group or of a gang already admitted.
type preemptor struct {
	pod *corev1.Pod
	// group is the pod's gang, if any; pg is set when the room is for the
	// gang's missing members.
	group   types.NamespacedName
	pg      *v1alpha1.PodGroup
	members []*corev1.Pod
}

// String names the preemptor in events: the gang, or the pod.
func (p preemptor) String() string {
	if p.pg != nil {
		return "gang " + p.group.String()
	}
	return "pod " + p.pod.Namespace + "/" + p.pod.Name
}

// preemptGang makes room for the members a gang lacks; see preempt.
func (g *Gang) preemptGang(ctx context.Context, pod *corev1.Pod, key types.NamespacedName, pg *v1alpha1.PodGroup) *fwk.PostFilterResult {
	members := g.lackingMembers(key, pg)
	if len(members) == 0 {
		return nil
	}
	return g.preempt(ctx, preemptor{pod: pod, group: key, pg: pg, members: members})
}

// preemptPod makes room for one pod; see preempt. A member above an
// elastic group's min takes only free room and preempts nothing.
func (g *Gang) preemptPod(ctx context.Context, pod *corev1.Pod) *fwk.PostFilterResult {
	if _, extra := g.elasticFulfillment(pod); extra {
		return nil
	}
	key, _ := topology.GroupOf(pod)
	return g.preempt(ctx, preemptor{pod: pod, group: key, members: []*corev1.Pod{pod}})
}

// preempt makes room by taking lower-priority victims, whole gangs or
// members above an elastic group's min or pods of no group, such that every
// member fits at once; it nominates each member onto its room. It returns
// nil when no such victims exist, or the pod may not preempt: then nothing
// is taken.
func (g *Gang) preempt(ctx context.Context, p preemptor) *fwk.PostFilterResult {
	logger := klog.FromContext(ctx)
	if p.pod.Spec.PreemptionPolicy != nil && *p.pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return nil
	}
	nodeInfos, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		logger.Error(err, "Listing nodes for preemption", "preemptor", p.String())
		return nil
	}
	priority := corev1helpers.PodPriority(p.pod)
	nodes, units, terminating := g.victimsOn(nodeInfos, p, priority)
	plan := planPreemption(p.members, priority, nodes, units)
	// With no victims to take, preemption helps only while earlier
	// victims are still going.
	if plan == nil || len(plan.victims) == 0 && !terminating {
		return nil
	}
	var names []string
	for _, victim := range plan.victims {
		for _, v := range victim.pods {
			if err := g.preemptVictim(ctx, v, p, priority); err != nil {
				logger.Error(err, "Preempting a victim", "pod", klog.KObj(v), "preemptor", p.String())
				return nil
			}
		}
		names = append(names, victim.name)
		g.tellVictimGroup(victim, p, priority)
	}
	for _, member := range p.members {
		if member.UID == p.pod.UID || member.Status.NominatedNodeName == plan.nodes[member.Name] {
			continue
		}
		if err := g.nominate(ctx, member, plan.nodes[member.Name]); err != nil {
			logger.Error(err, "Nominating a member onto its room", "pod", klog.KObj(member), "preemptor", p.String())
		}
	}
	if len(plan.victims) > 0 {
		reportPreemption(len(plan.victims), victimPods(plan.victims))
		logger.V(2).Info("Preempting", "preemptor", p.String(), "priority", priority, "victims", names)
		note := fmt.Sprintf("took %s (priority below %d) so that its %d missing members fit at once", victimList(names), priority, len(p.members))
		if p.pg != nil {
			g.attempts.preempted(p.group, g.clock.Now())
			g.recordEvent(p.pg, corev1.EventTypeNormal, ReasonPreempting, "Preempt", note)
		} else {
			note = fmt.Sprintf("took %s (priority below %d) so that it fits", victimList(names), priority)
			g.handle.EventRecorder().Eventf(p.pod, nil, corev1.EventTypeNormal, ReasonPreempting, "Preempt", "%s", note)
		}
	}
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: plan.nodes[p.pod.Name], NominatingMode: fwk.ModeOverride}}
}

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

// lackingMembers are the gang's unbound active members it needs to reach
// minMember, by name; none when it has too few.
func (g *Gang) lackingMembers(key types.NamespacedName, pg *v1alpha1.PodGroup) []*corev1.Pod {
	pods, err := g.groups.Members(key)
	if err != nil {
		return nil
	}
	var bound int32
	var unbound []*corev1.Pod
	for _, p := range pods {
		switch {
		case !topology.IsActiveMember(p):
		case p.Spec.NodeName != "":
			bound++
		default:
			unbound = append(unbound, p)
		}
	}
	lacking := pg.Spec.MinMember - bound
	if lacking <= 0 || int32(len(unbound)) < lacking {
		return nil
	}
	slices.SortFunc(unbound, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return unbound[:lacking]
}

// victimsOn is each node's room, and the units preemption may take from
// the pods on it of priority below priority, never of the preemptor's own
// gang. Pods already terminating are room: they go whatever is decided,
// and counting them again would take more victims than needed.
func (g *Gang) victimsOn(nodeInfos []fwk.NodeInfo, preempting preemptor, priority int32) (nodes []nodeRoom, units []*victimUnit, terminating bool) {
	// The reservations of a gang whose attempt is torn down are room.
	reserved := map[types.UID]bool{}
	if preempting.pg != nil {
		if pods, err := g.groups.Members(preempting.group); err == nil {
			for _, p := range pods {
				reserved[p.UID] = p.Spec.NodeName == ""
			}
		}
	}
	gangs := map[types.NamespacedName]bool{}
	for _, info := range nodeInfos {
		node := info.Node()
		if node == nil {
			continue
		}
		free := node.Status.Allocatable.DeepCopy()
		for _, podInfo := range info.GetPods() {
			p := podInfo.GetPod()
			key, grouped := topology.GroupOf(p)
			if p.DeletionTimestamp != nil {
				terminating = terminating || corev1helpers.PodPriority(p) < priority
				continue
			}
			if reserved[p.UID] {
				continue
			}
			free = topology.AddRequests(free, podRequest(p), -1)
			if corev1helpers.PodPriority(p) >= priority || grouped && key == preempting.group {
				continue
			}
			switch {
			case !grouped:
				units = append(units, &victimUnit{name: p.Namespace + "/" + p.Name, priority: corev1helpers.PodPriority(p), pods: []*corev1.Pod{p}, created: p.CreationTimestamp.Time})
			case !gangs[key]:
				gangs[key] = true
				units = append(units, g.gangVictims(key)...)
			}
		}
		nodes = append(nodes, nodeRoom{node: node, free: free})
	}
	for _, u := range units {
		u.pdbViolations = g.pdbViolations(u.pods)
	}
	return nodes, units, terminating
}

// gangVictims is what preemption may take of a gang: each of an admitted
// elastic group's bound workers above its min, the highest index first,
// and the whole gang, every active member, bound or not.
func (g *Gang) gangVictims(key types.NamespacedName) []*victimUnit {
	pg := g.podGroup(key)
	pods, err := g.groups.Members(key)
	if pg == nil || err != nil {
		return nil
	}
	whole := &victimUnit{name: key.String(), created: pg.CreationTimestamp.Time}
	for _, p := range pods {
		if topology.IsActiveMember(p) {
			// A gang is as dear as its dearest member.
			if len(whole.pods) == 0 || corev1helpers.PodPriority(p) > whole.priority {
				whole.priority = corev1helpers.PodPriority(p)
			}
			whole.pods = append(whole.pods, p)
		}
	}
	units := []*victimUnit{whole}
	topo, err := g.groups.Topology(key)
	if err != nil || topo == nil || topo.Elastic == nil {
		return units
	}
	var workers []*corev1.Pod
	var indices []int32
	bound := g.groups.BoundCount(key)
	for _, p := range whole.pods {
		member, errs := topo.Identify(p)
		if len(errs) == 0 && member.Role == topology.ElasticRole && p.Spec.NodeName != "" {
			workers = append(workers, p)
			indices = append(indices, member.Index)
		}
	}
	// Members above the min are those bound beyond minMember.
	extra := int(bound - pg.Spec.MinMember)
	order := make([]int, len(workers))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(indices[b] - indices[a]) })
	for _, i := range order[:max(0, min(extra, len(order)))] {
		units = append(units, &victimUnit{
			name: key.String(), priority: whole.priority, shrink: true, index: indices[i],
			pods: []*corev1.Pod{workers[i]}, created: whole.created,
		})
	}
	return units
}

// pdbViolations counts the pods whose PodDisruptionBudget allows no more
// disruptions once the pods before them are gone.
func (g *Gang) pdbViolations(pods []*corev1.Pod) int {
	if g.pdbs == nil {
		return 0
	}
	used := map[types.UID]int32{}
	violations := 0
	for _, p := range pods {
		budgets, err := g.pdbs.PodDisruptionBudgets(p.Namespace).List(labels.Everything())
		if err != nil {
			continue
		}
		for _, pdb := range budgets {
			selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || selector.Empty() || !selector.Matches(labels.Set(p.Labels)) {
				continue
			}
			used[pdb.UID]++
			if used[pdb.UID] > pdb.Status.DisruptionsAllowed {
				violations++
				break
			}
		}
	}
	return violations
}

// preemptVictim deletes a victim and tells the pod why.
func (g *Gang) preemptVictim(ctx context.Context, victim *corev1.Pod, p preemptor, priority int32) error {
	message := fmt.Sprintf("preempted by %s (priority %d)", p, priority)
	g.handle.EventRecorder().Eventf(victim, nil, corev1.EventTypeNormal, ReasonPreempted, "Preempting", "%s", message)
	err := g.handle.ClientSet().CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &victim.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// tellVictimGroup records on a victim gang's PodGroup what was taken.
func (g *Gang) tellVictimGroup(victim *victimUnit, p preemptor, priority int32) {
	key, grouped := topology.GroupOf(victim.pods[0])
	if !grouped {
		return
	}
	pg := g.podGroup(key)
	if pg == nil {
		return
	}
	note := fmt.Sprintf("all %d members preempted by %s (priority %d): a gang is taken whole, never left below its minMember", len(victim.pods), p, priority)
	if victim.shrink {
		note = fmt.Sprintf("member %s above the elastic min preempted by %s (priority %d)", victim.pods[0].Name, p, priority)
	}
	g.recordEvent(pg, corev1.EventTypeWarning, ReasonPreempted, "Preempted", note)
}

// nominate records the node a member's room was made on, so that no pod
// of its priority or lower takes it while the victims go.
func (g *Gang) nominate(ctx context.Context, member *corev1.Pod, node string) error {
	patch := fmt.Appendf(nil, `{"status":{"nominatedNodeName":%q}}`, node)
	_, err := g.handle.ClientSet().CoreV1().Pods(member.Namespace).Patch(ctx, member.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func victimPods(units []*victimUnit) int {
	n := 0
	for _, u := range units {
		n += len(u.pods)
	}
	return n
}
