package localcluster

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestANodesDevicesAreOnePoolOwnedByTheNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-3", UID: types.UID("uid-3")}}
	slice := DeviceSlice(node, 4)

	if slice.Spec.Driver != DeviceDriver || slice.Spec.NodeName == nil || *slice.Spec.NodeName != node.Name {
		t.Errorf("slice of driver %q on node %v, want %q on %s", slice.Spec.Driver, slice.Spec.NodeName, DeviceDriver, node.Name)
	}
	if pool := slice.Spec.Pool; pool.Name != node.Name || pool.ResourceSliceCount != 1 || pool.Generation != 1 {
		t.Errorf("pool %+v, want the node's name, generation 1, in one slice", pool)
	}
	if owners := slice.OwnerReferences; len(owners) != 1 || owners[0].Kind != "Node" || owners[0].UID != node.UID {
		t.Errorf("owners %+v, want the node alone, so that the slice goes with it", owners)
	}
	if len(slice.Spec.Devices) != 4 {
		t.Fatalf("%d devices, want 4", len(slice.Spec.Devices))
	}
	for i, device := range slice.Spec.Devices {
		if want := fmt.Sprintf("gpu-%d", i); device.Name != want {
			t.Errorf("device %d is named %q, want %q", i, device.Name, want)
		}
		index, model := device.Attributes["index"], device.Attributes["model"]
		if index.IntValue == nil || *index.IntValue != int64(i) || model.StringValue == nil || *model.StringValue != DeviceModel {
			t.Errorf("device %s has attributes %+v, want index %d and model %s", device.Name, device.Attributes, i, DeviceModel)
		}
	}
}

func TestTheDeviceClassSelectsTheDriversDevices(t *testing.T) {
	class := DeviceClass()
	if class.Name != DeviceClassName {
		t.Errorf("class %q, want %q", class.Name, DeviceClassName)
	}
	want := []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.muster.dev"`}}}
	if len(class.Spec.Selectors) != 1 || class.Spec.Selectors[0].CEL == nil || class.Spec.Selectors[0].CEL.Expression != want[0].CEL.Expression {
		t.Errorf("selectors %+v, want %+v", class.Spec.Selectors, want)
	}
}
