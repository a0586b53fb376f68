package podgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

func TestTheRoomCacheKeepsWhatRoomIsCountedFrom(t *testing.T) {
	pod := st.MakePod().Namespace(ns).Name("p").UID("p").Node("n").Phase(corev1.PodRunning).
		Label(topology.GroupLabel, "job").Annotation("big", "x").
		Container("trainer").Req(map[corev1.ResourceName]string{"cpu": "2", "memory": "1Gi"}).Obj()
	sidecar := corev1.Container{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}
	setup := corev1.Container{Name: "setup",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	pod.Spec.InitContainers = []corev1.Container{sidecar, setup}
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.DeletionTimestamp = &metav1.Time{}

	obj, err := roomOfPod(pod)
	require.NoError(t, err)
	kept := obj.(*corev1.Pod)
	assert.Equal(t, resources.OfPod(pod), resources.OfPod(kept), "the same requests: sidecar, init peak and overhead")
	assert.Equal(t, "n", kept.Spec.NodeName)
	assert.Equal(t, topology.IsActiveMember(pod), topology.IsActiveMember(kept))
	assert.Empty(t, kept.Annotations, "nothing else is kept")

	node := st.MakeNode().Name("n").Label("pool", "gpu").Capacity(map[corev1.ResourceName]string{"cpu": "8"}).Obj()
	node.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"trainer"}, SizeBytes: 1 << 30}}
	obj, err = roomOfNode(node)
	require.NoError(t, err)
	keptNode := obj.(*corev1.Node)
	assert.Equal(t, node.Status.Allocatable, keptNode.Status.Allocatable)
	assert.Equal(t, topology.MayRunOn(pod, node), topology.MayRunOn(pod, keptNode))
	assert.Equal(t, node.Spec.Taints, keptNode.Spec.Taints)
	assert.Equal(t, node.Labels, keptNode.Labels)
	assert.Empty(t, keptNode.Status.Images)
}
