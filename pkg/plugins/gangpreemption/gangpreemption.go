// Package gangpreemption implements the GangPreemption scheduler plugin,
// muster-scheduler's preemption, on the framework's preemption.Evaluator:
// whether a pod fits once victims go is decided by the profile's own
// Filter plugins, with nominated pods, as in kube-scheduler's
// DefaultPreemption. What muster adds is the unit of a victim and of a
// preemptor:
//
//   - a muster gang is taken whole, never one member alone; a member above
//     an admitted elastic group's min may be taken on its own, before any
//     whole gang;
//   - a gang short of its quorum preempts for all its missing members at
//     once, or takes nothing (gang.go).
//
// A pod of no group, and a member of a gang that has its quorum, preempt
// exactly as DefaultPreemption would, but for that unit.
package gangpreemption

import (
	"context"
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/clock"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = "GangPreemption"

var (
	_ fwk.PostFilterPlugin  = &GangPreemption{}
	_ fwk.PreEnqueuePlugin  = &GangPreemption{}
	_ fwk.EnqueueExtensions = &GangPreemption{}
	_ preemption.Interface  = &GangPreemption{}
)

// Groups is what GangPreemption reads of the scheduler's groups, and asks
// of the group model that owns them (group.Model).
type Groups interface {
	PodGroup(key types.NamespacedName) *v1alpha1.PodGroup
	UpstreamPodGroup(key types.NamespacedName) *schedulingv1beta1.PodGroup
	NotAMember(pod *corev1.Pod, pg *v1alpha1.PodGroup) string
	Members(key types.NamespacedName) ([]*corev1.Pod, error)
	Topology(key types.NamespacedName) (*topology.Topology, error)
	BoundCount(key types.NamespacedName) int32
	BoundNode(key types.NamespacedName) (node string, ok bool)
	LackingMembers(key types.NamespacedName, minMember int32) []*corev1.Pod
	Quorum(key types.NamespacedName, minMember int32, counting groupstate.Counting) (placed int32, reached bool)
	Attempts() *groupstate.Attempts
	ActivatePending(logger klog.Logger, activator fwk.PodActivator, key types.NamespacedName)
}

// GangPreemption is muster-scheduler's PostFilter: preemption by whole
// gangs, decided by the profile's filters.
type GangPreemption struct {
	handle    fwk.Handle
	args      Args
	framework framework.Framework
	groups    Groups
	fts       feature.Features
	executor  *preemption.Executor
	evaluator *preemption.Evaluator
	going     *going
	// preemptors are the pods held for their own preemption.
	preemptors *preemptors
	owners     *owners
	clock      clock.WithDelayedExecution
}

// New returns the plugin's factory: it builds the plugin from its args,
// the framework's handle, the scheduler's group model and an
// OwnerShrinker newShrinker builds on the handle's client configuration.
func New(newShrinker NewOwnerShrinker) func(context.Context, runtime.Object, fwk.Handle, *group.Model) (fwk.Plugin, error) {
	return func(_ context.Context, obj runtime.Object, handle fwk.Handle, groups *group.Model) (fwk.Plugin, error) {
		args, err := decodeArgs(obj)
		if err != nil {
			return nil, err
		}
		register()
		shrinker, err := newShrinker(handle.KubeConfig())
		if err != nil {
			return nil, err
		}
		return newGangPreemption(handle, args, groups, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate), shrinker)
	}
}

func newGangPreemption(handle fwk.Handle, args Args, groups *group.Model, fts feature.Features, shrinker OwnerShrinker) (*GangPreemption, error) {
	// A gang's other members are filtered with the profile's PreFilter
	// state of their own, which only the framework itself can build.
	fw, ok := handle.(framework.Framework)
	if !ok {
		return nil, fmt.Errorf("%s needs the scheduler's framework as its handle, got %T", Name, handle)
	}
	pl := &GangPreemption{handle: handle, args: args, framework: fw, groups: groups, fts: fts, going: newGoing(), preemptors: newPreemptors(), owners: &owners{shrinker: shrinker}, clock: clock.RealClock{}}
	pl.executor = preemption.NewExecutor(handle, fts)
	pl.executor.PreemptPod = pl.preemptPod(pl.executor.PreemptPod)
	pl.evaluator = preemption.NewEvaluator(Name, handle, pl, pl.executor)
	groups.OnPodChange(pl.victimGone)
	return pl, nil
}

// Name returns the plugin's name.
func (pl *GangPreemption) Name() string { return Name }

// PostFilter makes room for a pod that fits nowhere. A member of a gang
// short of its quorum makes room for all the members its gang lacks, and
// leaves Gang, next in the chain, to end the attempt; any other pod
// preempts for itself, as DefaultPreemption does, by whole units.
func (pl *GangPreemption) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if key := cycle.Key; cycle.Grouped {
		if cycle.PodGroup == nil {
			return nil, fwk.NewStatus(fwk.Unschedulable, topology.WaitingForPodGroupMessage(key, topology.GroupFieldOf(pod)))
		}
		if !cycle.Entered {
			// Gang turned the member away before it got so far (its gang
			// backs off, say): preemption would not help it now.
			return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: not helpful for scheduling")
		}
		if _, reached := pl.groups.Quorum(key, cycle.PodGroup.Spec.MinMember, groupstate.Counting{}); !reached {
			// The gang's search counts its members' devices itself.
			return pl.preemptForGang(ctx, state, pod, devicesResolvable{m}, key, cycle.PodGroup)
		}
	}
	defer metrics.PreemptionAttempts.Inc()
	undo, counted, err := pl.countDevices(state, pod)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("preemption: counting devices: %w", err))
	}
	defer undo()
	if counted {
		m = devicesResolvable{m}
	}
	result, status := pl.evaluator.Preempt(ctx, state, pod, m)
	if msg := status.Message(); msg != "" {
		return result, fwk.NewStatus(status.Code(), "preemption: "+msg)
	}
	return result, status
}

// PreEnqueue keeps a pod out of the queue while the victims of its
// preemption are still going: a pod's while the framework's executor
// deletes them, as DefaultPreemption does with asynchronous preemption; a
// gang member's until the last victim taken for its gang is gone.
func (pl *GangPreemption) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	if status := pl.waitingForVictims(ctx, pod); status != nil {
		return status
	}
	if pl.fts.EnableAsyncPreemption && pl.preemptors.holds(pod, pl.executor.IsPodRunningPreemption) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the preemption for this pod to be finished")
	}
	return nil
}

// EventsToRegister registers no event: what PreEnqueue holds is let in by
// activation alone. A member held for its gang's victims is activated when
// the last of them is gone, or when the wait for them ends (going,
// actuate); a pod held for its own preemption, when a pod deleted finds
// that preemption ended (preemptors). DefaultPreemption registers a
// deleted assigned pod instead, and with it the queue looked at every pod
// held for each victim deleted: a gang of 100 waiting for 1,000 victims
// 100,000 times.
func (pl *GangPreemption) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return nil, nil
}

// GetOffsetAndNumCandidates tries, from a random node on, as many nodes as
// the args say (DefaultPreemption's: 10%, at least 100).
func (pl *GangPreemption) GetOffsetAndNumCandidates(nodes int32) (int32, int32) {
	return rand.Int32N(nodes), pl.args.numCandidates(nodes)
}

// CandidatesToVictimsMap maps each candidate node to its victims.
func (pl *GangPreemption) CandidatesToVictimsMap(candidates []preemption.Candidate) map[string]*extenderv1.Victims {
	m := make(map[string]*extenderv1.Victims, len(candidates))
	for _, c := range candidates {
		m[c.Name()] = c.Victims()
	}
	return m
}

// PodEligibleToPreemptOthers: not with preemptionPolicy Never; not while
// the victims of its last preemption are still going on its nominated
// node; and never a member above an elastic group's min, which takes only
// free room.
func (pl *GangPreemption) PodEligibleToPreemptOthers(_ context.Context, pod *corev1.Pod, nominatedNodeStatus *fwk.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, "not eligible due to preemptionPolicy=Never."
	}
	if pl.isElasticExtra(pod) {
		return false, "a member above an elastic group's min takes only free room."
	}
	if node := pod.Status.NominatedNodeName; node != "" && nominatedNodeStatus.Code() != fwk.UnschedulableAndUnresolvable {
		if pl.victimsGoingOn(node, pod) {
			return false, "not eligible due to a terminating pod on the nominated node."
		}
	}
	return true, ""
}

// OrderedScoreFuncs returns nil: candidate nodes are weighed as
// DefaultPreemption weighs them.
func (pl *GangPreemption) OrderedScoreFuncs(context.Context, map[string]*extenderv1.Victims) []func(string) int64 {
	return nil
}

// victimsGoingOn reports whether a pod of lower priority than the
// preemptor is being deleted by preemption on the node.
func (pl *GangPreemption) victimsGoingOn(node string, preemptor *corev1.Pod) bool {
	info, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(node)
	if err != nil {
		return false
	}
	priority := podPriority(preemptor)
	for _, p := range info.GetPods() {
		if podPriority(p.GetPod()) < priority && preemption.PodTerminatingByPreemption(p.GetPod()) {
			return true
		}
	}
	return false
}

// isElasticExtra reports whether the pod would join an admitted elastic
// group above its min.
func (pl *GangPreemption) isElasticExtra(pod *corev1.Pod) bool {
	key, ok := topology.GroupOf(pod)
	if !ok {
		return false
	}
	pg := pl.groups.PodGroup(key)
	topo, err := pl.groups.Topology(key)
	return pg != nil && err == nil && topo != nil && topo.Elastic != nil && topology.QuorumOf(pg).ReachedBy(pl.groups.BoundCount(key))
}
