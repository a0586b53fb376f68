package gangpreemption

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/muster-dev/muster/pkg/topology"
)

// OwnerShrinker lowers the workers an elastic member's owner runs.
// muster-scheduler wires pkg/ownerscale's (cmd/scheduler), so that the
// plugin holds no client of its own.
type OwnerShrinker interface {
	// ShrinkTo has the owner run at most n workers; an owner that runs
	// no more, or cannot be scaled, is left as it is.
	ShrinkTo(ctx context.Context, namespace string, owner *metav1.OwnerReference, n int32) error
}

// NewOwnerShrinker builds a scheduler's OwnerShrinker on its client
// configuration.
type NewOwnerShrinker func(*rest.Config) (OwnerShrinker, error)

// owners shrinks the owner of a member above an elastic min before the
// member is preempted, as muster-controller's elastic scaler does, so that
// the owner does not create again what preemption took. Scalings are one
// at a time: two victims of one owner each take one replica.
type owners struct {
	mu       sync.Mutex
	shrinker OwnerShrinker
}

// shrink has the victim's owner run no more workers than the victim's
// index: preemption takes a group's highest indices first, so the owner
// keeps those below. Setting it so, rather than one fewer, makes the
// scaling of each victim the same whatever the order, and whatever
// muster-controller's elastic scaler did meanwhile. An owner that cannot
// be scaled, or a pod with none, is left as it is, and the member is only
// evicted.
func (o *owners) shrink(ctx context.Context, victim *corev1.Pod, index int32) error {
	ref := metav1.GetControllerOf(victim)
	if ref == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.shrinker.ShrinkTo(ctx, victim.Namespace, ref, index)
}

// victimsByGang sorts the victims by their gang; pods of no group are left
// out.
func victimsByGang(victims []*corev1.Pod) map[types.NamespacedName][]*corev1.Pod {
	byGang := map[types.NamespacedName][]*corev1.Pod{}
	for _, v := range victims {
		if key, grouped := topology.GroupOf(v); grouped {
			byGang[key] = append(byGang[key], v)
		}
	}
	return byGang
}

// shrinks says whether the candidate's victims leave placed members of the
// gang: decided once for a gang's preemption, whose victims may be a
// thousand of one gang, before any of them goes.
func (pl *GangPreemption) shrinks(c preemption.Candidate, key types.NamespacedName) bool {
	if gc, ok := c.(*gangCandidate); ok {
		return gc.shrinks[key]
	}
	shrink, _ := pl.takenFrom(key, victimsByGang(c.Victims().Pods)[key])
	return shrink
}

// takenFrom says whether some of the gang's placed members stay when the
// victims taken of it go, which makes those members above an elastic min
// rather than part of a gang taken whole. Victims already deleted are not
// asked about, so the answer holds while they go. A gang gone is neither.
func (pl *GangPreemption) takenFrom(key types.NamespacedName, taken []*corev1.Pod) (shrink bool, ok bool) {
	if pl.groups.PodGroup(key) == nil {
		return false, false
	}
	taking := sets.New[types.UID]()
	for _, v := range taken {
		taking.Insert(v.UID)
	}
	members, err := pl.groups.Members(key)
	if err != nil {
		return false, false
	}
	for _, m := range members {
		if topology.IsActiveMember(m) && !taking.Has(m.UID) && (m.Spec.NodeName != "" || pl.handle.GetWaitingPod(m.UID) != nil) {
			shrink = true
		}
	}
	return shrink, true
}

// preemptPodFunc is the type of the framework executor's PreemptPod.
type preemptPodFunc = func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *corev1.Pod, pluginName string) (bool, error)

// preemptPod is the framework executor's PreemptPod with muster's
// additions: the owner of a member above an elastic min is shrunk first,
// and the victim's gang is told what it lost.
func (pl *GangPreemption) preemptPod(evict preemptPodFunc) preemptPodFunc {
	return func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *corev1.Pod, pluginName string) (bool, error) {
		key, grouped := topology.GroupOf(victim)
		if grouped && pl.shrinks(c, key) {
			if err := pl.shrinkOwner(ctx, key, victim); err != nil {
				return false, fmt.Errorf("shrinking the owner of %s/%s, a member above its elastic min: %w", victim.Namespace, victim.Name, err)
			}
		}
		inMemory, err := evict(ctx, c, preemptor, victim, pluginName)
		// A gang's preemption tells each victim gang once, when its
		// victims have gone (gang.go).
		if _, forGang := c.(*gangCandidate); err == nil && grouped && !forGang {
			pl.tellVictimGang(key, victimsByGang(c.Victims().Pods)[key], preemptor)
		}
		return inMemory, err
	}
}

// shrinkOwner shrinks the owner of a member above an elastic min to the
// member's index.
func (pl *GangPreemption) shrinkOwner(ctx context.Context, key types.NamespacedName, victim *corev1.Pod) error {
	topo, err := pl.groups.Topology(key)
	if err != nil || topo == nil {
		return err
	}
	member, errs := topo.Identify(victim)
	if len(errs) > 0 || member.Role != topology.ElasticRole {
		return nil
	}
	return pl.owners.shrink(ctx, victim, member.Index)
}
