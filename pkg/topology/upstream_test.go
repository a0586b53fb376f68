package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPriorityMismatch: a member of an upstream PodGroup runs at its
// group's priority; otherwise the message names both priorities, the
// group and the field to fix.
func TestPriorityMismatch(t *testing.T) {
	group := func(priority *int32, class string) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"},
			Spec:       schedulingv1beta1.PodGroupSpec{Priority: priority, PriorityClassName: class},
		}
	}
	member := func(priority *int32) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Priority: priority}} }

	assert.Empty(t, PriorityMismatch(member(ptr.To[int32](1000)), group(ptr.To[int32](1000), "high")))
	assert.Empty(t, PriorityMismatch(member(nil), group(nil, "")), "neither has a priority: both are 0")
	assert.Equal(t, `the pod's priority 0 differs from the priority 1000 of its PodGroup ns/train (spec.schedulingGroup.podGroupName); a gang runs at its PodGroup's priority: set the pod's spec.priorityClassName to the PodGroup's, "high"`,
		PriorityMismatch(member(nil), group(ptr.To[int32](1000), "high")))
	assert.Contains(t, PriorityMismatch(member(ptr.To[int32](5)), group(nil, "")), "remove the pod's spec.priorityClassName, or give the PodGroup the pod's")
}

// TestAMemberDeclaringItsPodGroupsClaimIsNotRefused: a member at its
// PodGroup's priority that declares the PodGroup's claim made from a
// template, as upstream's members do, may run: muster-scheduler reserves
// such a claim for the PodGroup (docs/dra.md).
func TestAMemberDeclaringItsPodGroupsClaimIsNotRefused(t *testing.T) {
	group := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"},
		Spec: schedulingv1beta1.PodGroupSpec{Priority: ptr.To[int32](10), ResourceClaims: []schedulingv1beta1.PodGroupResourceClaim{
			{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")},
		}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")},
			ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")}},
		},
	}
	refused := RefusedMember(pod, group)
	require.NotNil(t, refused, "a member off its PodGroup's priority was let run")
	assert.Equal(t, "spec.priorityClassName", refused.Field)
	pod.Spec.Priority = ptr.To[int32](10)
	assert.Nil(t, RefusedMember(pod, group), "a member declaring its PodGroup's claim was refused")
}

// TestDisruptedOneByOne: disruptionMode single, or none (the API's
// default), lets members go one by one; all keeps them together.
func TestDisruptedOneByOne(t *testing.T) {
	mode := func(m *schedulingv1beta1.DisruptionMode) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{DisruptionMode: m}}
	}
	assert.True(t, DisruptedOneByOne(mode(nil)))
	assert.True(t, DisruptedOneByOne(mode(&schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}})))
	assert.False(t, DisruptedOneByOne(mode(&schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}})))
}

func TestAnUpstreamTopologyConstraintIsTheRequiredDomain(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", Annotations: map[string]string{"note": "kept"}}}
	assert.NotContains(t, FromUpstream(pg).Annotations, DomainRequiredAnnotation, "no constraint, no domain")

	pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: "topology.kubernetes.io/rack"}}}
	got := FromUpstream(pg)
	topo, errs := Parse(got.Annotations)
	require.Empty(t, errs)
	assert.Equal(t, "topology.kubernetes.io/rack", topo.DomainKey)
	assert.Equal(t, "kept", got.Annotations["note"])
	assert.NotContains(t, pg.Annotations, DomainRequiredAnnotation, "the upstream PodGroup's own annotations are left as they are")
}
