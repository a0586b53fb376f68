package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &obj.Object))
	return obj
}

// trainJobsJobSet is the JobSet Trainer makes of a TrainJob of the MPI
// runtime with an initializer: two nodes, and a launcher after them.
func trainJobsJobSet(t *testing.T, owner types.UID) *unstructured.Unstructured {
	js := jobSet(t, `
spec:
  replicatedJobs:
  - name: model-initializer
    template: {spec: {template: {spec: {containers: [{name: c, resources: {requests: {cpu: "2", memory: 1Gi}}}]}}}}
  - name: node
    replicas: 1
    dependsOn: [{name: model-initializer, status: Complete}]
    template: {spec: {parallelism: 2, template: {spec: {containers: [{name: node}]}}}}
  - name: launcher
    dependsOn: [{name: node, status: Ready}]
    template: {spec: {template: {spec: {containers: [{name: node, resources: {requests: {cpu: "1"}}}]}}}}`)
	js.SetName("tj")
	js.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: TrainJobKind, Name: "tj", UID: owner, Controller: ptr.To(true)}})
	return js
}

func TestFromTrainJob(t *testing.T) {
	trainJob := object(t, `{metadata: {name: tj, uid: tj-uid}, spec: {runtimeRef: {name: mpi}}}`)
	got, err := FromTrainJob(trainJob, trainJobsJobSet(t, "tj-uid"), MPI)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		FrameworkAnnotation:   "mpi",
		RolesAnnotation:       "node=2,launcher=1",
		LaunchOrderAnnotation: "node>launcher",
		DerivedFromAnnotation: "TrainJob/tj",
		LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"}}}`,
	}, got.Annotations)
	assert.Equal(t, int32(3), got.MinMember, "the initializer is not in the gang")
	assert.Equal(t, []string{"model-initializer"}, got.Ungrouped)
	assert.True(t, got.UngroupedRequests.Cpu().Equal(resource.MustParse("2")), "%v", got.UngroupedRequests)
	assert.True(t, got.UngroupedRequests.Memory().Equal(resource.MustParse("1Gi")), "%v", got.UngroupedRequests)

	_, err = FromTrainJob(trainJob, trainJobsJobSet(t, "another-uid"), MPI)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "JobSet tj is not TrainJob tj's")
}

func TestTrainJobRuntime(t *testing.T) {
	gvk, name, err := TrainJobRuntime(object(t, `{metadata: {name: tj}, spec: {runtimeRef: {name: torch-distributed}}}`))
	require.NoError(t, err)
	assert.Equal(t, "ClusterTrainingRuntime", gvk.Kind, "Trainer's default kind")
	assert.Equal(t, "torch-distributed", name)

	gvk, _, err = TrainJobRuntime(object(t, `{metadata: {name: tj}, spec: {runtimeRef: {name: mine, kind: TrainingRuntime}}}`))
	require.NoError(t, err)
	assert.Equal(t, "trainer.kubeflow.org/v1alpha1, Kind=TrainingRuntime", gvk.String())

	_, _, err = TrainJobRuntime(object(t, `{metadata: {name: tj}, spec: {runtimeRef: {name: x, kind: Pod}}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `spec.runtimeRef.kind`)
}

func TestFrameworkOfRuntime(t *testing.T) {
	for manifest, want := range map[string]Framework{
		`{spec: {mlPolicy: {numNodes: 1, torch: {}}}}`:                 PyTorch,
		`{spec: {mlPolicy: {numNodes: 1, mpi: {numProcPerNode: 1}}}}`:  MPI,
		`{spec: {mlPolicy: {numNodes: 1, jax: {}}}}`:                   Generic,
		`{spec: {template: {spec: {replicatedJobs: [{name: node}]}}}}`: Generic,
	} {
		assert.Equal(t, want, FrameworkOfRuntime(object(t, manifest)), manifest)
	}
}

func TestTrainJobIsAKnownOwner(t *testing.T) {
	assert.True(t, IsKnownOwner("trainer.kubeflow.org/v1alpha1", "TrainJob"))
	assert.False(t, IsKnownOwner("example.com/v1", "TrainJob"))
}
