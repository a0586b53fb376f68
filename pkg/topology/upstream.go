package topology

import (
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// API the group lives in.
func FromUpstream(pg *schedulingv1beta1.PodGroup) *v1alpha1.PodGroup {
	minMember := int32(1)
	if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
		minMember = gang.MinCount
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
			Annotations:       pg.Annotations,
			OwnerReferences:   pg.OwnerReferences,
		},
		Spec: v1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// IsUpstream reports whether pg came from FromUpstream.
func IsUpstream(pg *v1alpha1.PodGroup) bool {
	return pg.APIVersion == UpstreamPodGroupVersion.String()
}
