// Package stranded evicts the bound members of a gang left partly bound,
// off the scheduling path. A scheduler that crashed between binds, say,
// leaves a gang with some members bound and fewer than its minMember; if
// it cannot complete within its schedule timeout of its last bind, its
// bound members are deleted, so that they hold no room the gang cannot
// use, and their owner recreates them to try again whole.
//
// It lives in the scheduler, not the controller, because whether a gang
// is on its way reads what only the scheduler knows: the members holding
// a reservation. It hears of binds from the group model, arms one timer
// per gang, and never runs in a scheduling cycle.
package stranded

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// evictTimeout bounds the API calls of one eviction.
const evictTimeout = 30 * time.Second

// Groups is what the evictor reads of the scheduler's groups (group.Model).
type Groups interface {
	PodGroup(key types.NamespacedName) *v1alpha1.PodGroup
	Members(key types.NamespacedName) ([]*corev1.Pod, error)
	Census(key types.NamespacedName) topology.Census
	Bound(key types.NamespacedName) (count int32, last time.Time)
	Quorum(key types.NamespacedName, minMember int32, counting groupstate.Counting) (placed int32, reached bool)
	HadQuorum(key types.NamespacedName, pg *v1alpha1.PodGroup) bool
	IsAdmitted(key types.NamespacedName) bool
	ScheduleTimeout(pg *v1alpha1.PodGroup) time.Duration
}

// Evictor evicts the bound members of gangs left partly bound.
type Evictor struct {
	handle fwk.Handle
	groups Groups
	clock  clock.WithDelayedExecution
	// evicted is told of each gang evicted, for the plugin's metrics.
	evicted func()
	logger  klog.Logger

	mu sync.Mutex
	// armed holds the gangs whose deadline a timer will check.
	armed sets.Set[types.NamespacedName]
}

// New returns an evictor that hears of binds from the model.
func New(logger klog.Logger, handle fwk.Handle, groups *group.Model, clk clock.WithDelayedExecution, evicted func()) *Evictor {
	e := &Evictor{handle: handle, groups: groups, clock: clk, evicted: evicted, logger: logger, armed: sets.New[types.NamespacedName]()}
	groups.OnPodChange(e.podChanged)
	return e
}

// podChanged arms a gang's deadline when a member is seen bound: bound
// now, or found bound, as by a restarted scheduler.
func (e *Evictor) podChanged(change group.PodChange) {
	if !change.Grouped || change.Deleted || change.Pod.Spec.NodeName == "" || change.Old != nil && change.Old.Spec.NodeName != "" {
		return
	}
	e.arm(change.Key)
}

// arm sets a timer for the gang's deadline, its schedule timeout past its
// last bind, unless one is set or the gang once had its quorum
// (Model.HadQuorum): a gang admitted for good is never partly bound.
func (e *Evictor) arm(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.armed.Has(key) {
		return
	}
	pg := e.groups.PodGroup(key)
	if pg == nil || e.groups.HadQuorum(key, pg) {
		return
	}
	bound, lastBind := e.groups.Bound(key)
	if bound == 0 {
		return
	}
	e.armed.Insert(key)
	deadline := lastBind.Add(e.groups.ScheduleTimeout(pg))
	e.clock.AfterFunc(max(deadline.Sub(e.clock.Now()), 0), func() {
		e.mu.Lock()
		e.armed.Delete(key)
		e.mu.Unlock()
		// The deadline is now; a fake clock, which runs this with its
		// lock held, could not say.
		e.evictIfStranded(key, deadline)
	})
}

// evictIfStranded evicts the gang's bound members when, at now, its
// schedule timeout has passed since its last bind and it still cannot
// complete; a bind since then moves the deadline.
func (e *Evictor) evictIfStranded(key types.NamespacedName, now time.Time) {
	pg := e.groups.PodGroup(key)
	if pg == nil {
		return
	}
	if _, lastBind := e.groups.Bound(key); now.Before(lastBind.Add(e.groups.ScheduleTimeout(pg))) {
		e.arm(key)
		return
	}
	if victims, reason := e.strandedMembers(key, pg); len(victims) > 0 {
		e.evict(pg, victims, reason)
	}
}

// strandedMembers returns the bound members of a gang that cannot complete
// (members pending, fewer than minMember bound, reserved or succeeded),
// and why; none when the gang is whole, on its way (admitted in its
// attempt), or once had its quorum.
func (e *Evictor) strandedMembers(key types.NamespacedName, pg *v1alpha1.PodGroup) ([]*corev1.Pod, string) {
	if e.groups.HadQuorum(key, pg) || e.groups.IsAdmitted(key) {
		return nil, ""
	}
	census := e.groups.Census(key)
	pending := census.Unbound()
	placed, reached := e.groups.Quorum(key, pg.Spec.MinMember, groupstate.Counting{})
	if pending == 0 || reached || census.Bound() == 0 {
		return nil, ""
	}
	// The victims are listed only now, as the gang is evicted.
	pods, err := e.groups.Members(key)
	if err != nil {
		return nil, ""
	}
	var bound []*corev1.Pod
	for _, pod := range pods {
		if topology.IsActiveMember(pod) && pod.Spec.NodeName != "" {
			bound = append(bound, pod)
		}
	}
	slices.SortFunc(bound, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return bound, fmt.Sprintf("%d/%d members placed and %d more could not be placed within %s of the last bind",
		placed, pg.Spec.MinMember, pending, e.groups.ScheduleTimeout(pg))
}

// evict deletes a stranded gang's bound members, so that they hold no room
// the gang cannot use; their owner, if any, recreates them to try again as
// a gang.
func (e *Evictor) evict(pg *v1alpha1.PodGroup, victims []*corev1.Pod, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), evictTimeout)
	defer cancel()
	var names, failed []string
	for _, pod := range victims {
		uid := pod.UID
		err := e.handle.ClientSet().CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			e.logger.Error(err, "Evicting a member of a partly bound gang", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg))
			failed = append(failed, pod.Name)
			continue
		}
		names = append(names, pod.Name)
	}
	e.evicted()
	note := fmt.Sprintf("%s; evicted the bound members %s so that they hold no room the gang cannot use", reason, strings.Join(names, ", "))
	if len(failed) > 0 {
		note += fmt.Sprintf("; could not evict %s, will try again", strings.Join(failed, ", "))
	}
	e.logger.V(2).Info("Gang evicted", "podGroup", klog.KObj(pg), "reason", reason, "evicted", names, "failed", failed)
	group.RecordEvent(e.handle, pg, corev1.EventTypeWarning, gangview.ReasonGangEvicted, "Evict", note)
}
