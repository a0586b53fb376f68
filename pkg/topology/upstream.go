package topology

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// UpstreamPodGroupVersion is the API of upstream's PodGroups, served when
// the cluster turns on the GenericWorkload gate.
var UpstreamPodGroupVersion = schedulingv1beta1.SchemeGroupVersion

// FromUpstream returns a scheduling.k8s.io PodGroup as the one shape of
// group muster reads, scheduler-plugins' PodGroup: the same name,
// namespace, UID, creation, owners and annotations, so muster's
// annotations mean on it what they mean on scheduler-plugins' own. Its
// quorum is a gang policy's minCount; a basic policy is no gang, a quorum
// of one. The result shares the maps of pg, and says by its TypeMeta which
// API the group lives in. A topology constraint, of which the API keeps
// one, becomes DomainRequiredAnnotation on a copy of the annotations.
func FromUpstream(pg *schedulingv1beta1.PodGroup) *v1alpha1.PodGroup {
	minMember := int32(1)
	if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
		minMember = gang.MinCount
	}
	annotations := pg.Annotations
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		annotations = maps.Clone(annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[DomainRequiredAnnotation] = c.Topology[0].Key
	}
	return &v1alpha1.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: UpstreamPodGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              pg.Name,
			Namespace:         pg.Namespace,
			UID:               pg.UID,
			ResourceVersion:   pg.ResourceVersion,
			Generation:        pg.Generation,
			CreationTimestamp: pg.CreationTimestamp,
			DeletionTimestamp: pg.DeletionTimestamp,
			Labels:            pg.Labels,
			Annotations:       annotations,
			OwnerReferences:   pg.OwnerReferences,
		},
		Spec: v1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// IsUpstream reports whether pg came from FromUpstream.
func IsUpstream(pg *v1alpha1.PodGroup) bool {
	return pg.APIVersion == UpstreamPodGroupVersion.String()
}

// Priority is an upstream PodGroup's priority: spec.priority, resolved
// from its priorityClassName by the API server; 0 when unset, as
// kube-scheduler reads it.
func Priority(pg *schedulingv1beta1.PodGroup) int32 {
	if pg.Spec.Priority == nil {
		return 0
	}
	return *pg.Spec.Priority
}

// PriorityMismatch says why a member of an upstream PodGroup may not run
// with its own priority, or "" when it has its group's. A gang's members
// are scheduled, preempt and are preempted at one priority, the
// PodGroup's, as kube-scheduler requires of them; a pod's priority is
// resolved from its own priorityClassName, so the fix is there.
func PriorityMismatch(pod *corev1.Pod, pg *schedulingv1beta1.PodGroup) string {
	own, group := corev1helpers.PodPriority(pod), Priority(pg)
	if own == group {
		return ""
	}
	fix := fmt.Sprintf("set the pod's spec.priorityClassName to the PodGroup's, %q", pg.Spec.PriorityClassName)
	if pg.Spec.PriorityClassName == "" {
		fix = "remove the pod's spec.priorityClassName, or give the PodGroup the pod's"
	}
	return fmt.Sprintf("the pod's priority %d differs from the priority %d of its PodGroup %s/%s (%s); a gang runs at its PodGroup's priority: %s", own, group, pg.Namespace, pg.Name, UpstreamGroupField, fix)
}

// RefusedMember says why a member of an upstream PodGroup may not run,
// naming the pod's field to fix, or nil when it may: the one rule the
// webhook refuses a member by, Gang's PreEnqueue keeps out one created
// before its PodGroup by, and muster-controller tells such a member by.
func RefusedMember(pod *corev1.Pod, pg *schedulingv1beta1.PodGroup) *field.Error {
	if mismatch := PriorityMismatch(pod, pg); mismatch != "" {
		return field.Invalid(field.NewPath("spec", "priorityClassName"), pod.Spec.PriorityClassName, mismatch)
	}
	return nil
}

// DisruptedOneByOne reports whether an upstream PodGroup's members may be
// preempted one at a time, as its disruptionMode single (the API's
// default) allows. With all, the group goes whole, as every muster gang
// does.
func DisruptedOneByOne(pg *schedulingv1beta1.PodGroup) bool {
	return pg.Spec.DisruptionMode == nil || pg.Spec.DisruptionMode.All == nil
}
