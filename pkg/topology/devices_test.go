package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func claimTemplate(requests ...resourcev1.DeviceRequest) resourcev1.ResourceClaimTemplateSpec {
	return resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}}}
}

func exactly(name, class string, mode resourcev1.DeviceAllocationMode, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count}}
}

func podClaims(claims ...corev1.PodResourceClaim) *corev1.PodSpec {
	return &corev1.PodSpec{ResourceClaims: claims}
}

func fromTemplate(name, template string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(template)}
}

func TestLateDevicesOfCountsEachClassOfEveryTemplate(t *testing.T) {
	templates := ClaimTemplates{
		"two-gpus": claimTemplate(exactly("gpus", "gpu.example.com", resourcev1.DeviceAllocationModeExactCount, 2)),
		"one-gpu-one-nic": claimTemplate(
			exactly("gpu", "gpu.example.com", "", 0),
			exactly("nic", "nic.example.com", resourcev1.DeviceAllocationModeExactCount, 1),
		),
	}
	spec := podClaims(fromTemplate("a", "two-gpus"), fromTemplate("b", "one-gpu-one-nic"))
	got, err := LateDevicesOf(spec, templates)
	require.NoError(t, err)
	assert.Equal(t, []LateDevices{{DeviceClassName: "gpu.example.com", Count: 3}, {DeviceClassName: "nic.example.com", Count: 1}}, got)
	assert.Equal(t, []string{"two-gpus", "one-gpu-one-nic"}, ClaimTemplateNames(spec))
}

func TestLateDevicesOfReadsTheFirstAlternative(t *testing.T) {
	templates := ClaimTemplates{"any-gpu": claimTemplate(resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "big", DeviceClassName: "big-gpu.example.com", Count: 1},
		{Name: "small", DeviceClassName: "small-gpu.example.com", Count: 2},
	}})}
	got, err := LateDevicesOf(podClaims(fromTemplate("gpu", "any-gpu")), templates)
	require.NoError(t, err)
	assert.Equal(t, []LateDevices{{DeviceClassName: "big-gpu.example.com", Count: 1}}, got)
}

func TestLateDevicesOfLeavesOutSharedClaimsAndAdminAccess(t *testing.T) {
	admin := exactly("watch", "gpu.example.com", resourcev1.DeviceAllocationModeExactCount, 1)
	admin.Exactly.AdminAccess = ptr.To(true)
	templates := ClaimTemplates{"monitor": claimTemplate(admin)}
	spec := podClaims(corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To("team-gpus")}, fromTemplate("monitor", "monitor"))
	got, err := LateDevicesOf(spec, templates)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, []string{"monitor"}, ClaimTemplateNames(spec))
}

func TestLateDevicesOfRefusesWhatCannotBeHeld(t *testing.T) {
	_, err := LateDevicesOf(podClaims(fromTemplate("gpu", "missing")), ClaimTemplates{})
	assert.EqualError(t, err, "spec.resourceClaims[0] names ResourceClaimTemplate missing, which does not exist: create it in the job's namespace")
	all := ClaimTemplates{"every-gpu": claimTemplate(exactly("gpus", "gpu.example.com", resourcev1.DeviceAllocationModeAll, 0))}
	_, err = LateDevicesOf(podClaims(fromTemplate("gpu", "every-gpu")), all)
	assert.EqualError(t, err, "ResourceClaimTemplate every-gpu, request gpus: asks for all devices of class gpu.example.com on a node, which muster cannot hold for a member created late; ask for a count (allocationMode ExactCount)")
}

const mpiJobWithDevices = `
launcherCreationPolicy: WaitForWorkersReady
mpiReplicaSpecs:
  Launcher:
    template:
      spec:
        resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
        containers:
        - {name: launcher, resources: {requests: {cpu: "1"}, claims: [{name: gpu}]}}
  Worker:
    replicas: 2
    template:
      spec:
        resourceClaims: [{name: gpu, resourceClaimTemplateName: worker-gpu}]
`

func TestFromOwnerHoldsTheDevicesOfAnMPIJobsLateLauncher(t *testing.T) {
	spec := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(mpiJobWithDevices), &spec))
	names, err := LateClaimTemplates("kubeflow.org/v2beta1", "MPIJob", spec)
	require.NoError(t, err)
	assert.Equal(t, []string{"one-gpu"}, names, "only the late launcher's templates are read")
	templates := ClaimTemplates{"one-gpu": claimTemplate(exactly("gpu", "gpu.example.com", "", 0))}
	got, err := FromOwner("kubeflow.org/v2beta1", "MPIJob", "job", spec, templates)
	require.NoError(t, err)
	assert.Equal(t, `{"launcher":{"requests":{"cpu":"1"},"devices":[{"deviceClassName":"gpu.example.com","count":1}]}}`, got[LateMembersAnnotation])
	topo, errs := Parse(got)
	require.Empty(t, errs)
	assert.Equal(t, []LateDevices{{DeviceClassName: "gpu.example.com", Count: 1}}, topo.Late["launcher"].Devices)

	_, err = FromOwner("kubeflow.org/v2beta1", "MPIJob", "job", spec, nil)
	assert.ErrorContains(t, err, "spec.mpiReplicaSpecs.Launcher.template: spec.resourceClaims[0] names ResourceClaimTemplate one-gpu, which does not exist")
}

func TestLateClaimTemplatesReadsNoneOfAJobWithoutLateMembers(t *testing.T) {
	spec := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(mpiJobWithDevices), &spec))
	delete(spec, "launcherCreationPolicy")
	names, err := LateClaimTemplates("kubeflow.org/v2beta1", "MPIJob", spec)
	require.NoError(t, err)
	assert.Empty(t, names)
	names, err = LateClaimTemplates("kubeflow.org/v1", "PyTorchJob", spec)
	require.NoError(t, err)
	assert.Empty(t, names)
}
