package podgroup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/resources"
)

// A node of three devices, one of them allocated to worker w0's claim,
// made from a template: the node's room has two free, and w0 asks for one.
func TestNodeRoomsCountFreeDevicesAndAPodAsksForItsClaims(t *testing.T) {
	node := st.MakeNode().Name("n1").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourcePods: "110"}).Obj()
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "n1", ResourceSliceCount: 1}, NodeName: ptr.To("n1"),
		Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}, {Name: "gpu-2"}},
	}}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
		CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`},
	}}}}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w0-gpu-x7"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}},
		}}},
	}
	w0 := st.MakePod().Namespace(ns).Name("w0").UID("w0").Node("n1").Obj()
	w0.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	w0.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("w0-gpu-x7")}}

	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&corev1.Pod{}, groupField, podGroupIndex).Build()
	rooms := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, slice, class, claim).Build()
	r := &ElasticScaler{Client: c, Rooms: fakeCache{Reader: rooms}, Reader: c, Groups: &Groups{Client: c}, Recorder: record.NewFakeRecorder(10), Clock: testingclock.NewFakeClock(epoch.Time), Window: 15 * time.Second,
		madeRoom: map[types.NamespacedName]time.Time{}, workers: map[types.NamespacedName]int{}, announced: map[types.NamespacedName]int{}}

	nodes, devices, err := r.nodeRooms(context.Background())
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	free := nodes[0].Free[resources.DeviceResource("gpu")]
	assert.Equal(t, "2", free.String(), "one of n1's three devices is allocated")
	asked, known := devices.of(w0)
	assert.True(t, known)
	gpus := asked[resources.DeviceResource("gpu")]
	assert.Equal(t, "1", gpus.String())
	w1 := w0.DeepCopy()
	w1.Name, w1.Status.ResourceClaimStatuses = "w1", nil
	_, known = devices.of(w1)
	assert.False(t, known, "w1's claim is not made yet")

	g := &elasticGroup{template: w0, workers: []elasticWorker{{index: 0, requests: resources.OfPod(w0), member: w0}}}
	withDevices([]*elasticGroup{g}, devices)
	assert.True(t, resources.Fits(g.perMember(), nodes[0].Free), "another worker's device is free on n1")
	gave := g.workers[0].requests[resources.DeviceResource("gpu")]
	assert.Equal(t, "1", gave.String(), "giving w0 back frees its device")
}
