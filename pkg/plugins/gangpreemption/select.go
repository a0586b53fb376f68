package gangpreemption

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// SelectVictimsOnNode finds the fewest, cheapest units whose going lets
// the preemptor pass every Filter plugin of the profile on the node, with
// nominated pods counted, as kube-scheduler's DefaultPreemption does: take
// every eligible unit off, check the preemptor fits, then give back the
// dearest units first while it still fits. A unit is taken whole; its pods
// on other nodes leave those nodes too, through the PreFilter extensions.
func (pl *GangPreemption) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, preemptor *corev1.Pod, nodeInfo fwk.NodeInfo,
	allPossibleVictims []*preemption.DomainVictim, pdbs []*policy.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	units := pl.unitsOf(allPossibleVictims, preemptor)
	if len(units) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod")
	}
	room := newNodeRoom(ctx, pl.handle, state, preemptor, nodeInfo)
	for _, u := range units {
		if err := room.remove(u); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	if status := pl.handle.RunFilterPluginsWithNominatedPods(ctx, state, preemptor, nodeInfo); !status.IsSuccess() {
		return nil, 0, status
	}
	taken, violations, err := reprieve(units, pdbs, room.give, func(*unit) bool {
		return pl.handle.RunFilterPluginsWithNominatedPods(ctx, state, preemptor, nodeInfo).IsSuccess()
	}, room.remove)
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	if logger := klog.FromContext(ctx).V(5); logger.Enabled() {
		logger.Info("Units are potential preemption victims on node", "units", names(taken), "node", nodeInfo.Node().Name)
	}
	return victimPods(taken), violations, nil
}

// reprieve gives back, the dearest first and those whose PDBs would be
// broken before the rest, every unit of units (all taken off) without
// which fits, told the unit just given back, still holds; it returns the units taken, the dearest first,
// and how many of their pods break a PDB. A member above an elastic min
// goes with its gang when the gang is taken.
func reprieve(units []*unit, pdbs []*policy.PodDisruptionBudget, give func(*unit) error, fits func(given *unit) bool, take func(*unit) error) ([]*unit, int, error) {
	slices.SortStableFunc(units, moreImportant)
	violating, nonViolating := preemption.FilterVictimsWithPDBViolation(units, pdbs)
	var taken, kept []*unit
	violations := 0
	try := func(u *unit, violateCount int) error {
		if u.whole != nil && slices.Contains(taken, u.whole) {
			taken = append(taken, u)
			violations += violateCount
			return nil
		}
		if err := give(u); err != nil {
			return err
		}
		if fits(u) {
			kept = append(kept, u)
			return nil
		}
		taken = append(taken, u)
		violations += violateCount
		if err := take(u); err != nil {
			return err
		}
		// A gang is taken whole: members above its min given back
		// before go with it.
		for _, extra := range kept {
			if extra.whole == u {
				taken = append(taken, extra)
				if err := take(extra); err != nil {
					return err
				}
			}
		}
		kept = slices.DeleteFunc(kept, func(k *unit) bool { return k.whole == u })
		return nil
	}
	for _, v := range violating {
		if err := try(v.Victim, v.ViolateCount); err != nil {
			return nil, 0, err
		}
	}
	for _, u := range nonViolating {
		if err := try(u, 0); err != nil {
			return nil, 0, err
		}
	}
	slices.SortStableFunc(taken, moreImportant)
	return taken, violations, nil
}

// nodeRoom takes units off one node, for one preemptor's cycle: the node's
// copy loses their pods on it; every node where they have pods is told
// through the PreFilter extensions, which keep what affinity and spreading
// count.
type nodeRoom struct {
	ctx       context.Context
	handle    fwk.Handle
	state     fwk.CycleState
	preemptor *corev1.Pod
	node      fwk.NodeInfo
}

func newNodeRoom(ctx context.Context, handle fwk.Handle, state fwk.CycleState, preemptor *corev1.Pod, node fwk.NodeInfo) *nodeRoom {
	return &nodeRoom{ctx: ctx, handle: handle, state: state, preemptor: preemptor, node: node}
}

// nodeOf is the node the pod is on: the copy being changed, or the
// snapshot's, which is only read.
func (r *nodeRoom) nodeOf(pod *corev1.Pod) (fwk.NodeInfo, error) {
	if pod.Spec.NodeName == r.node.Node().Name {
		return r.node, nil
	}
	return r.handle.SnapshotSharedLister().NodeInfos().Get(pod.Spec.NodeName)
}

func (r *nodeRoom) remove(u *unit) error {
	for _, pi := range u.pods {
		node, err := r.nodeOf(pi.GetPod())
		if err != nil {
			return err
		}
		if node == r.node {
			if err := r.node.RemovePod(klog.FromContext(r.ctx), pi.GetPod()); err != nil {
				return err
			}
		}
		if status := r.handle.RunPreFilterExtensionRemovePod(r.ctx, r.state, r.preemptor, pi, node); !status.IsSuccess() {
			return status.AsError()
		}
	}
	return nil
}

func (r *nodeRoom) give(u *unit) error {
	for _, pi := range u.pods {
		node, err := r.nodeOf(pi.GetPod())
		if err != nil {
			return err
		}
		if node == r.node {
			r.node.AddPodInfo(pi)
		}
		if status := r.handle.RunPreFilterExtensionAddPod(r.ctx, r.state, r.preemptor, pi, node); !status.IsSuccess() {
			return status.AsError()
		}
	}
	return nil
}

func victimPods(units []*unit) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, u := range units {
		for _, pi := range u.pods {
			pods = append(pods, pi.GetPod())
		}
	}
	return pods
}

func names(units []*unit) []string {
	var out []string
	for _, u := range units {
		out = append(out, u.name)
	}
	return out
}
