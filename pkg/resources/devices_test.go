package resources

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

func request(name, class string, mode resourcev1.DeviceAllocationMode, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count}}
}

func TestOfClaimCountsEachClass(t *testing.T) {
	admin := request("watch", "gpu", resourcev1.DeviceAllocationModeExactCount, 1)
	admin.Exactly.AdminAccess = ptr.To(true)
	spec := &resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
		request("a", "gpu", "", 0),
		request("b", "gpu", resourcev1.DeviceAllocationModeExactCount, 2),
		request("every-nic", "nic", resourcev1.DeviceAllocationModeAll, 0),
		admin,
		{Name: "any", FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "big", DeviceClassName: "big-gpu", Count: 1}, {Name: "small", DeviceClassName: "gpu", Count: 2}}},
	}}}
	assert.Equal(t, map[string]string{"devices.muster.dev/gpu": "3", "devices.muster.dev/big-gpu": "1"}, asStrings(OfClaim(spec)))
	name, class, all := AllOfAClass(spec)
	assert.True(t, all)
	assert.Equal(t, []string{"every-nic", "nic"}, []string{name, class})
	got, ok := DeviceClassOf(DeviceResource("gpu.example.com"))
	assert.True(t, ok)
	assert.Equal(t, "gpu.example.com", got)
	_, ok = DeviceClassOf("cpu")
	assert.False(t, ok)
}

func slice(node, driver string, devices ...string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, Pool: resourcev1.ResourcePool{Name: node}, NodeName: ptr.To(node),
	}}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d})
	}
	return s
}

func class(name, driver string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
		CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`},
	}}}}
}

func TestCountCountsTheDevicesEachClassSelectsFreeOnEachNode(t *testing.T) {
	allocated := sets.New(structured.MakeDeviceID("gpu.example.com", "n1", "gpu-0"), structured.MakeDeviceID("gpu.example.com", "n1", "gpu-1"))
	devices := NewDevices(
		[]*resourcev1.ResourceSlice{slice("n1", "gpu.example.com", "gpu-0", "gpu-1"), slice("n2", "gpu.example.com", "gpu-0", "gpu-1"), slice("n2", "nic.example.com", "nic-0")},
		[]*resourcev1.DeviceClass{class("gpu", "gpu.example.com"), class("nic", "nic.example.com")},
		allocated)
	byNode, free, total := devices.Count(context.Background(), nil)
	assert.Equal(t, map[string]string{"devices.muster.dev/gpu": "2", "devices.muster.dev/nic": "1"}, asStrings(byNode["n2"]))
	assert.Empty(t, byNode["n1"], "both of n1's GPUs are allocated")
	assert.Equal(t, map[string]string{"devices.muster.dev/gpu": "2", "devices.muster.dev/nic": "1"}, asStrings(free))
	assert.Equal(t, map[string]string{"devices.muster.dev/gpu": "4", "devices.muster.dev/nic": "1"}, asStrings(total))

	byNode, _, _ = devices.Count(context.Background(), sets.New(structured.MakeDeviceID("gpu.example.com", "n1", "gpu-0")))
	assert.Equal(t, map[string]string{"devices.muster.dev/gpu": "1"}, asStrings(byNode["n1"]), "a device of its own counts free")
}
