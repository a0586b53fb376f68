package webhooks

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/topology"
)

// PodGroupValidator refuses a PodGroup whose muster annotations do not
// describe a valid topology for a group of its name and size, and a change
// to a valid topology: its members already carry the environment built
// from it.
type PodGroupValidator struct{}

var _ admission.CustomValidator = PodGroupValidator{}

// ValidateCreate refuses an invalid PodGroup.
func (PodGroupValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	pg, ok := obj.(*v1alpha1.PodGroup)
	if !ok {
		return nil, fmt.Errorf("expected a PodGroup, got %T", obj)
	}
	inRequestNamespace(ctx, pg)
	return nil, invalidPodGroup(pg, Validate(pg))
}

// ValidateUpdate refuses an invalid PodGroup, and a change to its valid
// topology.
func (PodGroupValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, okOld := oldObj.(*v1alpha1.PodGroup)
	pg, okNew := newObj.(*v1alpha1.PodGroup)
	if !okOld || !okNew {
		return nil, fmt.Errorf("expected two PodGroups, got %T and %T", oldObj, newObj)
	}
	inRequestNamespace(ctx, pg)
	errs := Validate(pg)
	if len(errs) == 0 {
		errs = topologyChanges(old.Annotations, pg.Annotations)
	}
	return nil, invalidPodGroup(pg, errs)
}

// ValidateDelete allows every deletion.
func (PodGroupValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// Validate lists every problem of a PodGroup: its spec (topology.CheckSpec),
// its topology, the names and sizes of what muster writes for it, and a
// minMember its roles can meet.
// muster-controller reports the same problems of a stored PodGroup.
func Validate(pg *v1alpha1.PodGroup) field.ErrorList {
	if errs := topology.CheckSpec(pg.Spec); len(errs) > 0 {
		return errs
	}
	topo, errs := topology.FromPodGroup(pg)
	// muster writes nothing for a derived group: no size to check.
	if len(errs) > 0 || len(topo.Roles) == 0 || topo.DerivedFrom != "" {
		return errs
	}
	if errs := envinject.CheckSize(envinject.Group{Name: pg.Name, Namespace: pg.Namespace, Topology: topo, WorkerSlots: 1}); len(errs) > 0 {
		return errs
	}
	if members := totalReplicas(topo); !topology.QuorumOf(pg).EnoughMembers(members, 0) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "minMember"), pg.Spec.MinMember,
			fmt.Sprintf("%s names %d pods in all, so a gang of %d would never start; lower minMember or add replicas", topology.RolesAnnotation, members, pg.Spec.MinMember))}
	}
	if topo.Elastic != nil && pg.Spec.MinMember != topo.ElasticMinMember() {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "minMember"), pg.Spec.MinMember, fmt.Sprintf(
			"an elastic group is admitted at its min: %d of role %s and every member of the other roles, %d in all; set minMember to %d",
			topo.Elastic.Min, topology.ElasticRole, topo.ElasticMinMember(), topo.ElasticMinMember()))}
	}
	return nil
}

// inRequestNamespace sets the object's namespace from the request, where a
// created object may lack it: the addresses muster writes contain it.
func inRequestNamespace(ctx context.Context, obj metav1.Object) {
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Namespace != "" {
		obj.SetNamespace(req.Namespace)
	}
}

func invalidPodGroup(pg *v1alpha1.PodGroup, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	countRefusal("PodGroup", errs)
	return apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind("PodGroup").GroupKind(), pg.Name, errs)
}

func totalReplicas(t *topology.Topology) int32 {
	var n int32
	for _, r := range t.Replicas {
		n += r
	}
	return n
}

// topologyChanges lists the topology annotations an update changes. A
// stored topology that is invalid may be changed freely, so that it can be
// fixed; and a PodGroup with none may be given one derived from its owner
// (muster-controller does that), since muster adds nothing to the members
// of a derived group; one with only a required topology domain may too.
func topologyChanges(old, updated map[string]string) field.ErrorList {
	if _, errs := topology.Parse(old); len(errs) > 0 {
		return nil
	}
	// The required domain is no part of what is derived: an operator's job
	// carries it, and its PodGroup has it from the start.
	if _, derived := updated[topology.DerivedFromAnnotation]; derived && !slices.ContainsFunc(topology.Annotations, func(name string) bool {
		_, had := old[name]
		return had && name != topology.DomainRequiredAnnotation
	}) {
		return nil
	}
	var errs field.ErrorList
	for _, name := range topology.Annotations {
		before, hadIt := old[name]
		after, hasIt := updated[name]
		if before == after && hadIt == hasIt {
			continue
		}
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(name),
			fmt.Sprintf("the topology cannot change once set (was %q): the group's pods already carry the environment built from it; create a new PodGroup for a new topology", before)))
	}
	return errs
}
