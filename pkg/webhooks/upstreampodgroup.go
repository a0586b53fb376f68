package webhooks

import (
	"context"
	"fmt"
	"strings"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/muster-dev/muster/pkg/topology"
)

// UpstreamPodGroupValidator refuses a scheduling.k8s.io PodGroup whose
// muster annotations PodGroupValidator would refuse on scheduler-plugins'
// PodGroup, read as muster reads it (topology.FromUpstream), and muster
// annotations that need a gang on a basic policy.
type UpstreamPodGroupValidator struct{}

var _ admission.CustomValidator = UpstreamPodGroupValidator{}

// ValidateCreate refuses an invalid PodGroup.
func (UpstreamPodGroupValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		return nil, fmt.Errorf("expected a PodGroup, got %T", obj)
	}
	inRequestNamespace(ctx, pg)
	return nil, invalidUpstreamPodGroup(pg, validateUpstream(pg))
}

// ValidateUpdate refuses an invalid PodGroup, and a change to its valid
// topology.
func (UpstreamPodGroupValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, okOld := oldObj.(*schedulingv1beta1.PodGroup)
	pg, okNew := newObj.(*schedulingv1beta1.PodGroup)
	if !okOld || !okNew {
		return nil, fmt.Errorf("expected two PodGroups, got %T and %T", oldObj, newObj)
	}
	inRequestNamespace(ctx, pg)
	errs := validateUpstream(pg)
	if len(errs) == 0 {
		errs = topologyChanges(old.Annotations, pg.Annotations)
	}
	return nil, invalidUpstreamPodGroup(pg, errs)
}

// ValidateDelete allows every deletion.
func (UpstreamPodGroupValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// gangAnnotations are muster's annotations that mean something only for a
// gang: an elastic group is admitted at its min, and room is held for late
// members within a gang's quorum.
var gangAnnotations = []string{topology.ElasticAnnotation, topology.LateMembersAnnotation}

func validateUpstream(pg *schedulingv1beta1.PodGroup) field.ErrorList {
	if pg.Spec.SchedulingPolicy.Gang == nil {
		var errs field.ErrorList
		for _, name := range gangAnnotations {
			if _, ok := pg.Annotations[name]; ok {
				errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(name),
					"needs a gang, and this PodGroup's policy is basic; set spec.schedulingPolicy.gang, or remove the annotation"))
			}
		}
		if len(errs) > 0 {
			return errs
		}
	}
	if errs := domainAnnotationAgrees(pg); len(errs) > 0 {
		return errs
	}
	// Validate names scheduler-plugins' minMember, which is minCount here.
	errs := Validate(topology.FromUpstream(pg))
	for _, err := range errs {
		if err.Field == "spec.minMember" {
			err.Field = "spec.schedulingPolicy.gang.minCount"
			err.Detail = strings.ReplaceAll(err.Detail, "minMember", "minCount")
		}
	}
	return errs
}

func invalidUpstreamPodGroup(pg *schedulingv1beta1.PodGroup, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	countRefusal("PodGroup", errs)
	return apierrors.NewInvalid(schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup").GroupKind(), pg.Name, errs)
}

// domainAnnotationAgrees refuses muster.dev/topology-required on a
// PodGroup whose spec.schedulingConstraints names the topology too, unless
// both name the same key: the spec is what muster reads
// (topology.FromUpstream), and an annotation saying otherwise would be
// ignored without a word.
func domainAnnotationAgrees(pg *schedulingv1beta1.PodGroup) field.ErrorList {
	annotated, ok := pg.Annotations[topology.DomainRequiredAnnotation]
	c := pg.Spec.SchedulingConstraints
	if !ok || c == nil || len(c.Topology) == 0 || annotated == c.Topology[0].Key {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(topology.DomainRequiredAnnotation), annotated, fmt.Sprintf(
		"disagrees with spec.schedulingConstraints.topology[0].key, %s, which muster reads; remove the annotation", c.Topology[0].Key))}
}
