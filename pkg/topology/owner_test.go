package topology

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// Specs in the shape the operators' own examples have.
const (
	pytorchJob = `
pytorchReplicaSpecs:
  Master: {replicas: 1, restartPolicy: OnFailure}
  Worker: {replicas: 3, restartPolicy: OnFailure}
`
	elasticPyTorchJob = `
elasticPolicy: {rdzvBackend: c10d, minReplicas: 1, maxReplicas: 3, maxRestarts: 100}
pytorchReplicaSpecs:
  Worker: {replicas: 2, restartPolicy: OnFailure}
`
	tfJob = `
tfReplicaSpecs:
  PS: {replicas: 2}
  Chief: {}
  Worker: {replicas: 4}
`
	mpiJobV2 = `
slotsPerWorker: 2
launcherCreationPolicy: WaitForWorkersReady
mpiImplementation: Intel
mpiReplicaSpecs:
  Launcher:
    replicas: 1
    template:
      spec:
        nodeSelector: {pool: cpu}
        tolerations: [{key: dedicated, operator: Equal, value: mpi, effect: NoSchedule}]
        initContainers:
        - {name: wait, resources: {requests: {cpu: 500m, memory: 4Gi}}}
        containers:
        - {name: launcher, resources: {requests: {cpu: "1", memory: 1Gi}}}
        - {name: sidecar, resources: {requests: {cpu: 250m}}}
  Worker: {replicas: 2}
`
	paddleJob = `
paddleReplicaSpecs:
  Worker: {replicas: 2}
`
	xgboostJob = `
xgbReplicaSpecs:
  Master: {replicas: 1}
  Worker: {replicas: 2}
`
	jaxJob = `
jaxReplicaSpecs:
  Worker: {replicas: 2}
`
)

func TestFromOwner(t *testing.T) {
	tests := []struct {
		apiVersion, kind, spec string
		want                   map[string]string
	}{
		{"kubeflow.org/v1", "PyTorchJob", pytorchJob, map[string]string{FrameworkAnnotation: "pytorch", RolesAnnotation: "master=1,worker=3"}},
		{"kubeflow.org/v1", "PyTorchJob", elasticPyTorchJob, map[string]string{FrameworkAnnotation: "pytorch", RolesAnnotation: "worker=3", ElasticAnnotation: "1:3"}},
		{"kubeflow.org/v1", "TFJob", tfJob, map[string]string{FrameworkAnnotation: "tensorflow", RolesAnnotation: "chief=1,ps=2,worker=4"}},
		{"kubeflow.org/v2beta1", "MPIJob", mpiJobV2, map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", SlotsAnnotation: "2", MPIImplementationAnnotation: "intel",
			LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1250m","memory":"4Gi"},"nodeSelector":{"pool":"cpu"},` +
				`"tolerations":[{"key":"dedicated","operator":"Equal","value":"mpi","effect":"NoSchedule"}]}}`}},
		{"kubeflow.org/v1", "PaddleJob", paddleJob, map[string]string{FrameworkAnnotation: "generic", RolesAnnotation: "worker=2"}},
		{"kubeflow.org/v1", "XGBoostJob", xgboostJob, map[string]string{FrameworkAnnotation: "generic", RolesAnnotation: "master=1,worker=2", LaunchOrderAnnotation: "master>worker"}},
		{"kubeflow.org/v1", "JAXJob", jaxJob, map[string]string{FrameworkAnnotation: "generic", RolesAnnotation: "worker=2", LaunchOrderAnnotation: "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			spec := map[string]any{}
			require.NoError(t, yaml.Unmarshal([]byte(tt.spec), &spec))
			require.True(t, IsKnownOwner(tt.apiVersion, tt.kind))
			got, err := FromOwner(tt.apiVersion, tt.kind, "job", spec, nil)
			require.NoError(t, err)
			tt.want[DerivedFromAnnotation] = tt.kind + "/job"
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFromOwnerRefusesWhatItCannotRead(t *testing.T) {
	_, err := FromOwner("kubeflow.org/v1", "PyTorchJob", "job", map[string]any{}, nil)
	assert.EqualError(t, err, "PyTorchJob job has no spec.pytorchReplicaSpecs")
	_, err = FromOwner("kubeflow.org/v1", "PyTorchJob", "job", map[string]any{"pytorchReplicaSpecs": map[string]any{"Trainer": map[string]any{}}}, nil)
	assert.ErrorContains(t, err, `has replica type "Trainer"`)
	_, err = FromOwner("batch/v1", "Job", "job", nil, nil)
	assert.ErrorContains(t, err, "muster reads no topology from batch/v1 Job")
	assert.False(t, IsKnownOwner("example.com/v1", "PyTorchJob"))
}

func TestRoleReplicasPath(t *testing.T) {
	cases := []struct {
		name             string
		apiVersion, kind string
		role             string
		want             []string
	}{
		{"mpi-operator's workers", "kubeflow.org/v2beta1", "MPIJob", "worker", []string{"spec", "mpiReplicaSpecs", "Worker", "replicas"}},
		{"a PyTorchJob's workers", "kubeflow.org/v1", "PyTorchJob", "worker", []string{"spec", "pytorchReplicaSpecs", "Worker", "replicas"}},
		{"a role the kind does not have", "kubeflow.org/v1", "JAXJob", "master", nil},
		{"a kind muster does not read", "apps/v1", "StatefulSet", "worker", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RoleReplicasPath(tc.apiVersion, tc.kind, tc.role)
			if !slices.Equal(got, tc.want) || ok != (tc.want != nil) {
				t.Errorf("RoleReplicasPath(%s, %s, %s) = %v, %v; want %v", tc.apiVersion, tc.kind, tc.role, got, ok, tc.want)
			}
		})
	}
}
