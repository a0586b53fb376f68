// Package podgroup keeps PodGroups' status current, and tells the members of
// a group that cannot be scheduled yet why, in their PodScheduled condition.
package podgroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/topology"
)

// groupField indexes cached pods by the PodGroup they name, so that a
// group's members are read from one namespace's index entry, never by
// listing the cluster.
const groupField = "muster.dev/group"

// WaitingReason is the reason of the PodScheduled condition of a member
// whose group holds it back; kubectl shows it as the pod's status.
const WaitingReason = corev1.PodReasonSchedulingGated

// StatusReconciler keeps a PodGroup's status current from its members, and
// writes why unscheduled members wait while the group is incomplete or its
// PodGroup is missing.
type StatusReconciler struct {
	Client   client.Client
	Groups   *Groups
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	// outsiders is the last set of other schedulers' pods told of, by
	// group: each set is told once.
	outsiders failureReports
	// phases keeps the gauge of gangs by phase.
	phases phases
}

// SetupIndexes registers the cache indexes the reconcilers read through;
// call it once, before setting up any of them.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, groupField, podGroupIndex); err != nil {
		return fmt.Errorf("indexing pods by group: %w", err)
	}
	return nil
}

// podGroupIndex indexes a pod by the name of the group it names.
func podGroupIndex(obj client.Object) []string {
	if key, ok := topology.GroupOf(obj.(*corev1.Pod)); ok {
		return []string{key.Name}
	}
	return nil
}

// SetupWithManager registers the reconciler: it runs for a PodGroup when
// the PodGroup or one of its pods changes.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("podgroup-status").
		For(&v1alpha1.PodGroup{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
				_, ok := topology.GroupOf(obj.(*corev1.Pod))
				return ok
			})))
	return r.Groups.watchUpstream(b).Complete(r)
}

// countPhase keeps the group in the gauge of gangs by phase, as kubectl
// muster reads it from the PodGroup and its members; a group with neither
// is forgotten.
func (r *StatusReconciler) countPhase(key types.NamespacedName, pg *v1alpha1.PodGroup, members []corev1.Pod) {
	if pg == nil && len(members) == 0 {
		r.phases.set(key, "")
		return
	}
	view := gangview.View(gangview.Objects{Key: key, PodGroup: pg, Pods: members, Now: r.Clock.Now()})
	r.phases.set(key, view.Phase)
}

func groupOfPod(_ context.Context, obj client.Object) []reconcile.Request {
	if key, ok := topology.GroupOf(obj.(*corev1.Pod)); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// Reconcile brings one group's status and its waiting members' conditions
// in line with what its pods show.
func (r *StatusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := klog.FromContext(ctx).WithValues("podGroup", req.NamespacedName)
	named, err := r.Groups.named(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	pg, err := r.Groups.PodGroup(ctx, req.NamespacedName)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	members, stale := r.tellStale(ctx, named, pg)
	r.countPhase(req.NamespacedName, pg, members)
	c := countMembers(members)
	// scheduling.k8s.io's PodGroup has no phase or counts: its status is
	// muster-scheduler's PodGroupInitiallyScheduled condition.
	if pg != nil && !topology.IsUpstream(pg) {
		if err := r.updateStatus(ctx, pg, c); err != nil {
			return requeueOnConflict(err)
		}
	}
	message := waitingMessage(pg, members, c, req.NamespacedName)
	upstream, err := r.upstreamPodGroup(ctx, pg)
	if err != nil {
		return reconcile.Result{}, err
	}
	marked := 0
	for i := range members {
		memberMessage := message
		// Gang's PreEnqueue keeps such a member out for good.
		if upstream != nil {
			if refused := topology.RefusedMember(&members[i], upstream); refused != nil {
				memberMessage = refused.Detail
			}
		}
		changed, err := r.markMember(ctx, &members[i], memberMessage)
		if err != nil {
			return requeueOnConflict(err)
		}
		if changed && message != "" && memberMessage == message {
			marked++
		}
	}
	if pg != nil && marked > 0 {
		r.Recorder.Eventf(pg, corev1.EventTypeNormal, gangview.ReasonWaitingForMembers, "%s; told %d pending members", message, marked)
	}
	if stale != nil {
		return requeueOnConflict(stale)
	}
	logger.V(4).Info("Reconciled", "active", c.Active(), "scheduled", c.Bound(), "waiting", message)
	return reconcile.Result{}, nil
}

// tellStale returns the pods that name the group and are its members
// (topology.NotAMember); a pod of muster-scheduler's that is not, built
// for an earlier PodGroup of the name, is told why on its PodScheduled
// condition, which is its user's to read. A pod of another scheduler is
// left alone, and told of once in a Warning event on the PodGroup.
func (r *StatusReconciler) tellStale(ctx context.Context, named []corev1.Pod, pg *v1alpha1.PodGroup) ([]corev1.Pod, error) {
	members := make([]corev1.Pod, 0, len(named))
	var outsiders []string
	var errs []error
	for i := range named {
		pod := &named[i]
		why := topology.NotAMember(pod, pg, r.Groups.Ours)
		switch {
		case why == "":
			members = append(members, *pod)
		case r.Groups.Ours(pod.Spec.SchedulerName):
			if _, err := r.markMember(ctx, pod, why); err != nil {
				errs = append(errs, err)
			}
		case topology.IsActiveMember(pod):
			outsiders = append(outsiders, pod.Name+" ("+pod.Spec.SchedulerName+")")
		}
	}
	if pg != nil && len(outsiders) > 0 {
		slices.Sort(outsiders)
		note := fmt.Sprintf("pods %s name this group but are for another scheduler (spec.schedulerName), so they are not counted toward its minMember; a group's pods are all %s's",
			strings.Join(outsiders, ", "), r.Groups.Scheduler())
		if r.outsiders.isNew(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, note) {
			r.Recorder.Event(pg, corev1.EventTypeWarning, ReasonOtherSchedulersPods, note)
		}
	}
	return members, errors.Join(errs...)
}

// ReasonOtherSchedulersPods is the event that tells a group of the pods of
// other schedulers that name it.
const ReasonOtherSchedulersPods = "OtherSchedulersPods"

// upstreamPodGroup reads the scheduling.k8s.io PodGroup that pg, the
// group in the one shape, was read from; nil for scheduler-plugins' own.
func (r *StatusReconciler) upstreamPodGroup(ctx context.Context, pg *v1alpha1.PodGroup) (*schedulingv1beta1.PodGroup, error) {
	if pg == nil || !topology.IsUpstream(pg) {
		return nil, nil
	}
	upstream := &schedulingv1beta1.PodGroup{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(pg), upstream); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return upstream, nil
}

// requeueOnConflict retries a reconcile whose write lost to a newer one
// quietly, since it is routine; any other error is returned.
func requeueOnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil
	}
	return reconcile.Result{}, err
}

func (r *StatusReconciler) updateStatus(ctx context.Context, pg *v1alpha1.PodGroup, c census) error {
	status := desiredStatus(pg, c, metav1.NewTime(r.Clock.Now()))
	if equality.Semantic.DeepEqual(status, pg.Status) {
		return nil
	}
	previous := pg.Status.Phase
	pg.Status = status
	if err := r.Client.Status().Update(ctx, pg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("updating the status of PodGroup %s/%s: %w", pg.Namespace, pg.Name, err)
	}
	// A new group starts Pending; only a change from a phase is news.
	if previous != status.Phase && previous != "" {
		r.Recorder.Eventf(pg, corev1.EventTypeNormal, "Phase", "%s: %d scheduled, %d running, %d succeeded, %d failed of minMember %d",
			status.Phase, c.Bound(), c.Running(), c.Succeeded(), c.Failed(), pg.Spec.MinMember)
	}
	return nil
}

// markMember writes, on an unscheduled member, the PodScheduled condition
// that says why it waits; and takes it away again once nothing in the group
// holds the member back, so that it never tells a stale story. The update
// carries the pod's resourceVersion: it fails, and is retried, rather than
// overwrite a newer status such as the scheduler's binding.
func (r *StatusReconciler) markMember(ctx context.Context, pod *corev1.Pod, message string) (changed bool, err error) {
	if pod.Spec.NodeName != "" || !topology.IsActiveMember(pod) {
		return false, nil
	}
	current := podScheduledCondition(pod)
	ours := current != nil && current.Reason == WaitingReason && current.Status == corev1.ConditionFalse
	switch {
	case message != "" && ours && current.Message == message:
		return false, nil
	case message != "":
		setPodScheduledCondition(pod, corev1.PodCondition{
			Type:               corev1.PodScheduled,
			Status:             corev1.ConditionFalse,
			Reason:             WaitingReason,
			Message:            message,
			LastTransitionTime: metav1.NewTime(r.Clock.Now()),
		})
	case ours:
		removePodScheduledCondition(pod)
	default:
		return false, nil
	}
	if err := r.Client.Status().Update(ctx, pod); err != nil {
		// A member deleted since it was listed needs no condition; its
		// deletion reconciles the group again.
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("updating the PodScheduled condition of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if message != "" {
		r.Recorder.Event(pod, corev1.EventTypeNormal, "WaitingForGroup", message)
	}
	return true, nil
}

func podScheduledCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func setPodScheduledCondition(pod *corev1.Pod, condition corev1.PodCondition) {
	if current := podScheduledCondition(pod); current != nil {
		if current.Status == condition.Status {
			condition.LastTransitionTime = current.LastTransitionTime
		}
		*current = condition
		return
	}
	pod.Status.Conditions = append(pod.Status.Conditions, condition)
}

func removePodScheduledCondition(pod *corev1.Pod) {
	kept := pod.Status.Conditions[:0]
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled {
			kept = append(kept, c)
		}
	}
	pod.Status.Conditions = kept
}
