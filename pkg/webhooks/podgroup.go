package webhooks

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// PodGroupValidator refuses a PodGroup whose muster annotations do not
// describe a valid topology, and a change to a valid topology: its members
// already carry the environment built from it.
type PodGroupValidator struct {
	Decoder admission.Decoder
}

var _ admission.Handler = &PodGroupValidator{}

// Handle validates a PodGroup on create and update.
func (v *PodGroupValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	pg := &v1alpha1.PodGroup{}
	if err := v.Decoder.Decode(req, pg); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the PodGroup: %w", err))
	}
	key := types.NamespacedName{Namespace: req.Namespace, Name: pg.Name}
	topo, errs := topology.Parse(pg.Annotations)
	if len(errs) > 0 {
		return admission.Denied(topology.InvalidMessage(key, errs))
	}
	if members := totalReplicas(topo); members > 0 && pg.Spec.MinMember > members {
		return denied(field.ErrorList{field.Invalid(field.NewPath("spec", "minMember"), pg.Spec.MinMember,
			fmt.Sprintf("%s names %d pods in all, so a gang of %d would never start; lower minMember or add replicas", topology.RolesAnnotation, members, pg.Spec.MinMember))})
	}
	if req.Operation == admissionv1.Update {
		old := &v1alpha1.PodGroup{}
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored PodGroup: %w", err))
		}
		if errs := topologyChanges(old.Annotations, pg.Annotations); len(errs) > 0 {
			return denied(errs)
		}
	}
	return admission.Allowed("")
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
// fixed.
func topologyChanges(old, updated map[string]string) field.ErrorList {
	if _, errs := topology.Parse(old); len(errs) > 0 {
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
