package group

import (
	"context"
	"encoding/json"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/util"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// RecordInitiallyScheduled writes an upstream PodGroup's
// PodGroupInitiallyScheduled condition as kube-scheduler's PodGroup cycle
// writes it, so that the PodGroup reads the same whichever scheduler
// placed it: True, reason Scheduled, once the gang is admitted; False,
// reason Unschedulable, when an attempt fails. A scheduler-plugins
// PodGroup's status is muster-controller's: the model records on it, in
// an annotation, only that its quorum was bound (recordQuorumReached).
// The patch is sent off the scheduling cycle.
func (m *Model) RecordInitiallyScheduled(logger klog.Logger, pg *v1alpha1.PodGroup, scheduled bool, message string) {
	if !topology.IsUpstream(pg) || m.upstream == nil || m.clientSet == nil {
		return
	}
	current, err := m.upstream.PodGroups(pg.Namespace).Get(pg.Name)
	if err != nil {
		return
	}
	updated, changed := initiallyScheduled(current, scheduled, message)
	if !changed {
		return
	}
	go func() {
		if err := util.PatchPodGroupStatus(context.Background(), m.clientSet, current.Name, current.Namespace, &current.Status, updated); err != nil {
			logger.Error(err, "Writing the PodGroup's condition", "podGroup", klog.KObj(current), "condition", schedulingv1beta1.PodGroupInitiallyScheduled)
		}
	}()
}

// recordQuorumReached writes topology.QuorumReachedAnnotation, the time
// at, on a scheduler-plugins PodGroup that lacks it, with its UID as a
// precondition, so that a PodGroup deleted and made again under its name
// is never given the old one's record. It is written from the pod
// informer's handler, off every scheduling cycle, by each replica that
// sees it lack the record: the patch is the same fact, whoever sends it.
func (m *Model) recordQuorumReached(pg *v1alpha1.PodGroup, at time.Time) {
	if m.podGroupClient == nil || pg == nil || topology.IsUpstream(pg) || topology.ReachedQuorum(pg) {
		return
	}
	logger := klog.Background()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pg.UID,
		"annotations": map[string]string{topology.QuorumReachedAnnotation: at.UTC().Format(time.RFC3339)},
	}})
	if err != nil {
		logger.Error(err, "Recording that the gang's quorum was bound", "podGroup", klog.KObj(pg))
		return
	}
	go func() {
		_, err := m.podGroupClient.SchedulingV1alpha1().PodGroups(pg.Namespace).Patch(context.Background(), pg.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			logger.Error(err, "Recording that the gang's quorum was bound", "podGroup", klog.KObj(pg), "annotation", topology.QuorumReachedAnnotation)
		}
	}()
}

// initiallyScheduled is pg's status with its PodGroupInitiallyScheduled
// condition set, and whether that changed it. Once True it is never
// written again, as in kube-scheduler: a later attempt, for members beyond
// the quorum or after a restart, neither undoes nor restates the group's
// first placement.
func initiallyScheduled(pg *schedulingv1beta1.PodGroup, scheduled bool, message string) (*schedulingv1beta1.PodGroupStatus, bool) {
	condition := metav1.Condition{
		Type:               schedulingv1beta1.PodGroupInitiallyScheduled,
		Status:             metav1.ConditionTrue,
		Reason:             "Scheduled",
		Message:            message,
		ObservedGeneration: pg.Generation,
	}
	if !scheduled {
		condition.Status, condition.Reason = metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable
	}
	if existing := apimeta.FindStatusCondition(pg.Status.Conditions, condition.Type); existing != nil && existing.Status == metav1.ConditionTrue {
		return nil, false
	}
	status := pg.Status.DeepCopy()
	return status, apimeta.SetStatusCondition(&status.Conditions, condition)
}
