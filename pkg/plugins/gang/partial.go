package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/topology"
)

// evictTimeout bounds the API calls of one eviction.
const evictTimeout = 30 * time.Second

// expirePartlyBound keeps a gang that was left partly bound (a scheduler
// that crashed between binds, say) from holding its room indefinitely:
// once its schedule timeout has passed since its last bind, if it still
// has members waiting and fewer than minMember placed, its bound members
// are evicted. The decision reads only API objects (the bind times are
// the pods' PodScheduled conditions), so it survives a restart. A gang
// that once had its quorum is not partly bound (Model.HadQuorum): members
// added later, for a raised minMember, wait, and nothing running is taken.
func (g *Gang) expirePartlyBound(logger klog.Logger, key types.NamespacedName, now time.Time) {
	pg := g.podGroup(key)
	if pg == nil || g.groups.HadQuorum(key, pg) {
		return
	}
	bound, lastBind := g.groups.Bound(key)
	if bound == 0 {
		return
	}
	// Off the scheduling cycle, even when the deadline has passed: the
	// eviction is API calls, and this runs in PostFilter and Unreserve.
	deadline := lastBind.Add(g.permitTimeout(pg))
	if g.attempts.ScheduleExpiry(key) {
		g.clock.AfterFunc(max(deadline.Sub(now), 0), func() {
			g.attempts.ExpiryDone(key)
			// The deadline is now; a fake clock, which runs this with
			// its lock held, could not say.
			g.evictIfStranded(logger, key, deadline)
		})
	}
}

// evictIfStranded evicts the gang's bound members when, at now, its
// schedule timeout has passed since its last bind and it still cannot
// complete; a bind since then moves the deadline.
func (g *Gang) evictIfStranded(logger klog.Logger, key types.NamespacedName, now time.Time) {
	pg := g.podGroup(key)
	if pg == nil {
		return
	}
	if _, lastBind := g.groups.Bound(key); now.Before(lastBind.Add(g.permitTimeout(pg))) {
		g.expirePartlyBound(logger, key, now)
		return
	}
	victims, reason := g.strandedMembers(key, pg)
	if len(victims) == 0 {
		return
	}
	g.evict(logger, pg, victims, reason)
}

// strandedMembers returns the bound members of a gang that cannot complete
// (members pending, fewer than minMember bound, reserved or succeeded),
// and why; none when the gang is whole, on its way, or once had its
// quorum.
func (g *Gang) strandedMembers(key types.NamespacedName, pg *v1alpha1.PodGroup) ([]*corev1.Pod, string) {
	if g.groups.HadQuorum(key, pg) {
		return nil, ""
	}
	census := g.groups.Census(key)
	pending := census.Unbound()
	placed, reached := g.groups.Quorum(key, pg.Spec.MinMember, group.Counting{Succeeded: true})
	if pending == 0 || reached || census.Bound() == 0 {
		return nil, ""
	}
	// The victims are listed only now, as the gang is evicted.
	pods, err := g.groups.Members(key)
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
		placed, pg.Spec.MinMember, pending, g.permitTimeout(pg))
}

// evict deletes a stranded gang's bound members, so that they hold no room
// the gang cannot use; their owner, if any, recreates them to try again as
// a gang.
func (g *Gang) evict(logger klog.Logger, pg *v1alpha1.PodGroup, victims []*corev1.Pod, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), evictTimeout)
	defer cancel()
	var names, failed []string
	for _, pod := range victims {
		uid := pod.UID
		err := g.handle.ClientSet().CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			logger.Error(err, "Evicting a member of a partly bound gang", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg))
			failed = append(failed, pod.Name)
			continue
		}
		names = append(names, pod.Name)
	}
	reportEvicted()
	note := fmt.Sprintf("%s; evicted the bound members %s so that they hold no room the gang cannot use", reason, strings.Join(names, ", "))
	if len(failed) > 0 {
		note += fmt.Sprintf("; could not evict %s, will try again", strings.Join(failed, ", "))
	}
	logger.V(2).Info("Gang evicted", "podGroup", klog.KObj(pg), "reason", reason, "evicted", names, "failed", failed)
	g.recordEvent(pg, corev1.EventTypeWarning, "GangEvicted", "Evict", note)
}
