package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The simulated nodes' devices, handed out by Dynamic Resource Allocation.
// No kubelet plugin runs: kwok starts a pod whatever it claims, so a device
// is exactly what the scheduler allocates. DeviceDriver publishes them and
// DeviceClassName selects every one of them.
const (
	DeviceDriver    = "gpu.muster.dev"
	DeviceClassName = "gpu.muster.dev"
	// DeviceModel is every simulated device's "model" attribute.
	DeviceModel = "sim-gpu"
)

// DeviceClass is the class a ResourceClaim names to get one of the
// simulated devices.
func DeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: DeviceClassName},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", DeviceDriver)},
			}},
		},
	}
}

// DeviceSlice publishes count devices on the node, named gpu-0, gpu-1, …,
// as one pool named after the node. The node owns it, as the kubelet makes
// a node's slices, so that it goes with the node.
func DeviceSlice(node *corev1.Node, count int) *resourcev1.ResourceSlice {
	devices := make([]resourcev1.Device, count)
	for i := range devices {
		devices[i] = resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To(DeviceModel)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		}
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name + "-" + DeviceDriver,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   DeviceDriver,
			Pool:     resourcev1.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node.Name),
			Devices:  devices,
		},
	}
}

// CheckDeviceCount refuses a count of devices per node that one
// ResourceSlice cannot hold, naming the flag.
func CheckDeviceCount(flag string, count int) error {
	if count < 0 || count > resourcev1.ResourceSliceMaxDevices {
		return fmt.Errorf("%s=%d: must be 0 to %d, the devices one ResourceSlice holds", flag, count, resourcev1.ResourceSliceMaxDevices)
	}
	return nil
}

// PublishDevices creates the device class, unless it exists, and the
// node's slice of count devices.
func PublishDevices(ctx context.Context, client kubernetes.Interface, node *corev1.Node, count int) error {
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, DeviceClass(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating DeviceClass %s: %w", DeviceClassName, err)
	}
	slice := DeviceSlice(node, count)
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("publishing the devices of node %s (ResourceSlice %s): %w", node.Name, slice.Name, err)
	}
	return nil
}
