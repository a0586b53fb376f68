package topology

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/muster-dev/muster/pkg/resources"
)

// LateDevices is a count of devices of one DeviceClass that one pod of a
// late member claims through Dynamic Resource Allocation. The room held
// for the member holds that many devices of the class on its node, and no
// other pod muster-scheduler places is allocated them until the member
// comes. A class is all a held device is chosen by: selectors of the
// member's claim beyond its class are not held.
type LateDevices struct {
	DeviceClassName string `json:"deviceClassName"`
	Count           int64  `json:"count"`
}

// Claim is the claim a pod of a late member claiming the devices will
// have, as kube-scheduler's allocator reads it: one request of each class,
// of its count. None when it claims none.
func Claim(namespace, name string, uid types.UID, late []LateDevices) *resourcev1.ResourceClaim {
	if len(late) == 0 {
		return nil
	}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
	for i, d := range late {
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourcev1.DeviceRequest{
			Name: fmt.Sprintf("held-%d", i),
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: d.DeviceClassName,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           d.Count,
			},
		})
	}
	return claim
}

// maxLateDevices bounds a late member's count of one class: one claim is
// allocated at most this many devices.
const maxLateDevices = resourcev1.AllocationResultsMaxSize

// ClaimTemplates are the specs of ResourceClaimTemplates of one namespace,
// by name: what a pod template's claims ask for.
type ClaimTemplates map[string]resourcev1.ResourceClaimTemplateSpec

// ClaimTemplateNames lists the ResourceClaimTemplates a pod template
// names, which LateDevicesOf reads.
func ClaimTemplateNames(spec *corev1.PodSpec) []string {
	var names []string
	for _, claim := range spec.ResourceClaims {
		if name := claim.ResourceClaimTemplateName; name != nil && !slices.Contains(names, *name) {
			names = append(names, *name)
		}
	}
	return names
}

// LateDevicesOf returns the devices one pod of the template claims, by
// class, from the ResourceClaimTemplates its claims are made from. A claim
// the pod shares (resourceClaimName) is left out: it is allocated once,
// for every pod that shares it, not for this one. A request of every
// device of a class on a node cannot be held as a count, and is an error;
// so is a template that does not exist. Devices with admin access are
// not consumed, and not counted.
func LateDevicesOf(spec *corev1.PodSpec, templates ClaimTemplates) ([]LateDevices, error) {
	counts := corev1.ResourceList{}
	for i, claim := range spec.ResourceClaims {
		name := claim.ResourceClaimTemplateName
		if name == nil {
			continue
		}
		template, ok := templates[*name]
		if !ok {
			return nil, fmt.Errorf("spec.resourceClaims[%d] names ResourceClaimTemplate %s, which does not exist: create it in the job's namespace", i, *name)
		}
		if request, class, all := resources.AllOfAClass(&template.Spec); all {
			return nil, fmt.Errorf("ResourceClaimTemplate %s, request %s: asks for all devices of class %s on a node, which muster cannot hold for a member created late; ask for a count (allocationMode ExactCount)", *name, request, class)
		}
		resources.Add(counts, resources.OfClaim(&template.Spec), 1)
	}
	var devices []LateDevices
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		class, _ := resources.DeviceClassOf(name)
		count := counts[name]
		devices = append(devices, LateDevices{DeviceClassName: class, Count: count.Value()})
	}
	return devices, nil
}

// checkLateDevices refuses a late member's devices that name no valid
// DeviceClass, or count none or more than one claim may be allocated.
func checkLateDevices(path *field.Path, v, role string, devices []LateDevices) field.ErrorList {
	var errs field.ErrorList
	for i, d := range devices {
		if msgs := validation.IsDNS1123Subdomain(d.DeviceClassName); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("role %s, devices[%d].deviceClassName %q must name a DeviceClass: %s", role, i, d.DeviceClassName, msgs[0])))
		}
		if d.Count < 1 || d.Count > maxLateDevices {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("role %s, devices[%d].count is %d; write how many devices of the class one pod claims, 1 to %d", role, i, d.Count, maxLateDevices)))
		}
		if slices.ContainsFunc(devices[:i], func(o LateDevices) bool { return o.DeviceClassName == d.DeviceClassName }) {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("role %s names device class %s twice; write its devices once, with their count", role, d.DeviceClassName)))
		}
	}
	return errs
}
