package gangpreemption

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/topology"
)

// going is, for each gang preempted for, its victims until they are gone.
// Until the last is deleted, the gang's members are kept out of the
// queue, as kube-scheduler keeps a pod whose preemption is running: a
// member tried meanwhile would find no room and back off. When it is,
// they are activated at once, past any backoff. A member's cycle takes
// nothing more while a victim is still in the cycle's snapshot, which may
// lag the deletion.
type going struct {
	mu     sync.Mutex
	byGang map[types.NamespacedName]*pendingVictims
	// gangOf is the gang each victim not yet deleted was taken for.
	gangOf map[types.UID]types.NamespacedName
}

// pendingVictims is what a gang waits for.
type pendingVictims struct {
	victims []*corev1.Pod
	// undeleted are the victims whose deletion was not seen yet.
	undeleted sets.Set[types.UID]
	since     time.Time
}

func newGoing() *going {
	return &going{byGang: map[types.NamespacedName]*pendingVictims{}, gangOf: map[types.UID]types.NamespacedName{}}
}

// start records the victims taken for the gang; exists says whether a
// victim's deletion is still to be seen (the informer's lister, whose
// deletion events come after it changes).
func (g *going) start(key types.NamespacedName, victims []*corev1.Pod, now time.Time, exists func(*corev1.Pod) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.byGang[key]; ok {
		g.forgetUnlocked(old)
	}
	p := &pendingVictims{victims: victims, undeleted: sets.New[types.UID](), since: now}
	for _, v := range victims {
		if exists(v) {
			p.undeleted.Insert(v.UID)
			g.gangOf[v.UID] = key
		}
	}
	g.byGang[key] = p
}

// promised returns the nodes of the victims preempted for other gangs
// that still wait for that room (waits says): the room there is theirs,
// and another gang's search leaves it alone. It stays theirs after the
// victims are gone, until their members hold it: a search that saw the
// freed room as free would take it, and the gang it was made for would
// preempt again. A gang that no longer waits (admitted, bound, or gone) is
// forgotten here, so its room is promised to nobody.
func (g *going) promised(except types.NamespacedName, waits func(types.NamespacedName) bool) sets.Set[string] {
	g.mu.Lock()
	defer g.mu.Unlock()
	nodes := sets.New[string]()
	for key, p := range g.byGang {
		if key == except {
			continue
		}
		if !waits(key) {
			g.forgetUnlocked(p)
			delete(g.byGang, key)
			continue
		}
		for _, v := range p.victims {
			nodes.Insert(v.Spec.NodeName)
		}
	}
	return nodes
}

// any reports whether a victim of some gang's is not deleted yet: whether
// deleting may be true for any gang.
func (g *going) any() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.byGang {
		if p.undeleted.Len() > 0 {
			return true
		}
	}
	return false
}

// deleting reports whether a victim of the gang's is not deleted yet.
func (g *going) deleting(key types.NamespacedName) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.byGang[key]
	return ok && p.undeleted.Len() > 0
}

// waits reports whether the gang waits for its victims: one is not
// deleted yet, or still holds room in the cycle's snapshot (held says).
// A gang that waits for none is forgotten.
func (g *going) waits(key types.NamespacedName, held func(*corev1.Pod) bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.byGang[key]
	if !ok {
		return false
	}
	if p.undeleted.Len() > 0 || slices.ContainsFunc(p.victims, held) {
		return true
	}
	delete(g.byGang, key)
	return false
}

// end forgets the gang's wait that started at since, if it is still the
// gang's, and reports whether victims were still to be deleted: the
// members held at PreEnqueue for them are then to be let in.
func (g *going) end(key types.NamespacedName, since time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.byGang[key]
	if !ok || !p.since.Equal(since) {
		return false
	}
	g.forgetUnlocked(p)
	delete(g.byGang, key)
	return p.undeleted.Len() > 0
}

func (g *going) forgetUnlocked(p *pendingVictims) {
	for uid := range p.undeleted {
		delete(g.gangOf, uid)
	}
}

// deleted records that a victim is deleted, and returns the gang whose
// last victim it was.
func (g *going) deleted(uid types.UID) (types.NamespacedName, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key, ok := g.gangOf[uid]
	if !ok {
		return key, false
	}
	delete(g.gangOf, uid)
	p := g.byGang[key]
	if p == nil {
		return key, false
	}
	p.undeleted.Delete(uid)
	return key, p.undeleted.Len() == 0
}

// gone is told of a victim gone, by its deletion or because it will not
// be deleted; when it was the last of a gang's, the gang's members waiting
// are activated.
func (pl *GangPreemption) gone(uid types.UID) {
	if key, last := pl.going.deleted(uid); last {
		pl.groups.ActivatePending(klog.Background(), pl.handle, key)
	}
}

// victimGone tells gone of every pod deleted, and lets in the pods held
// for their own preemption that it ended.
func (pl *GangPreemption) victimGone(change group.PodChange) {
	if change.Deleted {
		pl.gone(change.Pod.UID)
		pl.letInPreemptors()
	}
}

// waitingForVictims is PreEnqueue's answer for a member of a gang whose
// victims are still going, or nil.
func (pl *GangPreemption) waitingForVictims(_ context.Context, pod *corev1.Pod) *fwk.Status {
	// Most of the time no victims are going: the pod's group is not read.
	if !pl.going.any() {
		return nil
	}
	key, ok := topology.GroupOf(pod)
	if !ok || !pl.going.deleting(key) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the victims preempted for its gang to go")
}

// exists reports whether the pod is still in the scheduler's informer.
func (pl *GangPreemption) exists(pod *corev1.Pod) bool {
	p, err := pl.evaluator.PodLister.Pods(pod.Namespace).Get(pod.Name)
	return err == nil && p.UID == pod.UID
}

// waitsForRoomMade reports whether a gang victims were preempted for still
// waits for that room: its PodGroup exists, it is not admitted, and it
// lacks members for its minMember.
func (pl *GangPreemption) waitsForRoomMade(key types.NamespacedName) bool {
	pg := pl.groups.PodGroup(key)
	return pg != nil && !pl.groups.Attempts().IsAdmitted(key) && len(pl.groups.LackingMembers(key, pg.Spec.MinMember)) > 0
}
