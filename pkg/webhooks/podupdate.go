package webhooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/muster-dev/muster/pkg/topology"
)

// PodUpdateValidator keeps a pod's place in its group fixed once it is
// created: the pod webhook gave it its hostname and environment for that
// place, and the scheduler counts it there. A pod that is labelled into a
// group later, or moved to another role or index, would bypass both.
type PodUpdateValidator struct{}

var _ admission.CustomValidator = PodUpdateValidator{}

// ValidateCreate allows every pod: the pod webhook handles creation.
func (PodUpdateValidator) ValidateCreate(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete allows every deletion.
func (PodUpdateValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate refuses a change of a pod's group, role or index.
func (PodUpdateValidator) ValidateUpdate(_ context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, okOld := oldObj.(*corev1.Pod)
	pod, okNew := newObj.(*corev1.Pod)
	if !okOld || !okNew {
		return nil, fmt.Errorf("expected two Pods, got %T and %T", oldObj, newObj)
	}
	if errs := placeChanges(old, pod); len(errs) > 0 {
		return nil, invalidPod(pod, errs)
	}
	return nil, nil
}

// placeChanges lists how an update moves a pod within or into a group.
func placeChanges(old, pod *corev1.Pod) field.ErrorList {
	oldGroup, wasGrouped := topology.GroupOf(old)
	group, isGrouped := topology.GroupOf(pod)
	switch {
	case !wasGrouped && !isGrouped:
		return nil
	case !wasGrouped:
		return field.ErrorList{field.Forbidden(labelPath(topology.GroupLabel),
			"a pod joins a group only when it is created, when muster gives it its place and environment; create a new pod with this label instead")}
	case oldGroup != group:
		return field.ErrorList{field.Forbidden(labelPath(topology.GroupLabel),
			fmt.Sprintf("a pod stays in the group it was created in (%s); create a new pod for another group", oldGroup.Name))}
	}
	var errs field.ErrorList
	if was, is := old.Labels[topology.UpstreamMemberLabel], pod.Labels[topology.UpstreamMemberLabel]; was != is {
		errs = append(errs, field.Forbidden(labelPath(topology.UpstreamMemberLabel),
			fmt.Sprintf("muster gave this member the label %s=%s, by which its group's Service selects it; keep it as it was", topology.UpstreamMemberLabel, was)))
	}
	oldRole, _ := topology.RoleOf(old)
	if role, _ := topology.RoleOf(pod); role != oldRole {
		errs = append(errs, field.Forbidden(labelPath(topology.RoleLabel),
			fmt.Sprintf("a member keeps the role it was created with (%q): its hostname and environment were made for it; create a new pod for another role", oldRole)))
	}
	oldIndex, hadIndex, _ := topology.IndexOf(old)
	index, hasIndex, _ := topology.IndexOf(pod)
	if oldIndex != index || hadIndex != hasIndex {
		errs = append(errs, field.Forbidden(labelPath(topology.IndexLabel),
			"a member keeps the index it was created with: its hostname and environment were made for it; create a new pod for another index"))
	}
	return errs
}
