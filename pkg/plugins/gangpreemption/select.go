package gangpreemption

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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
	if fit, err := devicesFit(ctx, state, nodeInfo.Node(), room.gone); err != nil || !fit {
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, "the preemptor's device claims do not fit on the node even with every lower-priority pod gone").WithError(err)
	}
	taken, violations, err := reprieve(units, pdbs, room.give, func(*unit) bool {
		if !pl.handle.RunFilterPluginsWithNominatedPods(ctx, state, preemptor, nodeInfo).IsSuccess() {
			return false
		}
		fit, err := devicesFit(ctx, state, nodeInfo.Node(), room.gone)
		return err == nil && fit
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
// which fits, told the unit just given back, still holds; it returns the
// units taken, the dearest first, and how many of their pods break a PDB.
// A member above an elastic min goes with its gang when the gang is taken,
// and with a member of a lower index: the owner is shrunk to the index of
// the victim, so every index above it goes too.
func reprieve(units []*unit, pdbs []*policy.PodDisruptionBudget, give func(*unit) error, fits func(given *unit) bool, take func(*unit) error) ([]*unit, int, error) {
	slices.SortStableFunc(units, moreImportant)
	violating, nonViolating := preemption.FilterVictimsWithPDBViolation(units, pdbs)
	breaks := map[*unit]int{}
	for _, v := range violating {
		breaks[v.Victim] = v.ViolateCount
	}
	var taken, kept []*unit
	violations := 0
	try := func(u *unit) error {
		if goesWithTaken(u, taken) {
			taken = append(taken, u)
			violations += breaks[u]
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
		violations += breaks[u]
		if err := take(u); err != nil {
			return err
		}
		// Members above an elastic min given back before go with their
		// gang, or with a member of a lower index, taken now.
		for _, k := range kept {
			if goesWithTaken(k, taken) {
				taken = append(taken, k)
				violations += breaks[k]
				if err := take(k); err != nil {
					return err
				}
			}
		}
		kept = slices.DeleteFunc(kept, func(k *unit) bool { return goesWithTaken(k, taken) })
		return nil
	}
	for _, v := range violating {
		if err := try(v.Victim); err != nil {
			return nil, 0, err
		}
	}
	for _, u := range nonViolating {
		if err := try(u); err != nil {
			return nil, 0, err
		}
	}
	slices.SortStableFunc(taken, moreImportant)
	return taken, violations, nil
}

// goesWithTaken reports whether taking what is taken takes u too: it is a
// member above an elastic min whose gang, or a member of its gang of a
// lower index, is taken.
func goesWithTaken(u *unit, taken []*unit) bool {
	return u.whole != nil && slices.ContainsFunc(taken, func(t *unit) bool {
		return t == u.whole || t.whole == u.whole && t.index < u.index
	})
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
	// gone are the pods taken off, whose devices a dry run counts freed.
	gone sets.Set[types.UID]
}

func newNodeRoom(ctx context.Context, handle fwk.Handle, state fwk.CycleState, preemptor *corev1.Pod, node fwk.NodeInfo) *nodeRoom {
	return &nodeRoom{ctx: ctx, handle: handle, state: state, preemptor: preemptor, node: node, gone: sets.New[types.UID]()}
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
		r.gone.Insert(pi.GetPod().UID)
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
		r.gone.Delete(pi.GetPod().UID)
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
