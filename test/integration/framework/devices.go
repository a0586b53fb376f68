package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
)

// DeviceClaimTemplate names the ResourceClaimTemplate of one simulated
// device that CreateDeviceClaimTemplate makes.
const DeviceClaimTemplate = "one-gpu"

// CreateDeviceClaimTemplate makes, in the namespace, the
// ResourceClaimTemplate of one device of the class DevicePool's nodes
// publish.
func CreateDeviceClaimTemplate(t testing.TB, namespace string) {
	t.Helper()
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: DeviceClaimTemplate},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			Spec: resourcev1.ResourceClaimSpec{
				Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{{
						Name:    "gpu",
						Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: localcluster.DeviceClassName},
					}},
				},
			},
		},
	}
	if _, err := Client.ResourceV1().ResourceClaimTemplates(namespace).Create(context.Background(), template, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceClaimTemplate %s: %v", DeviceClaimTemplate, err)
	}
}

// CreateDeviceClaim makes, in the namespace, a ResourceClaim of one device
// of the class DevicePool's nodes publish, for pods to name.
func CreateDeviceClaim(t testing.TB, namespace, name string) {
	t.Helper()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: localcluster.DeviceClassName}}}},
	}}
	if _, err := Client.ResourceV1().ResourceClaims(namespace).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ClaimOneDevice makes the pod's first container claim one device through
// DeviceClaimTemplate, and returns the pod.
func ClaimOneDevice(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(DeviceClaimTemplate)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return pod
}

// PublishNetworkDevice publishes one device reachable from every node of
// the namespace's pool, as a network-attached device is: for more pods
// sharing it than one node's 110.
func PublishNetworkDevice(t testing.TB, namespace string) {
	t.Helper()
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-network"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: localcluster.DeviceDriver,
			Pool:   resourcev1.ResourcePool{Name: namespace + "-network", Generation: 1, ResourceSliceCount: 1},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: PoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{namespace}},
			}}}},
			Devices: []resourcev1.Device{{Name: "gpu-0"}},
		},
	}
	if _, err := Client.ResourceV1().ResourceSlices().Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Client.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting ResourceSlice %s: %v", slice.Name, err)
		}
	})
}
