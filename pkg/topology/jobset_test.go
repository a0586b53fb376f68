package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func jobSet(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	js := object(t, spec)
	js.SetName("js")
	return js
}

func TestFromJobSet(t *testing.T) {
	tests := []struct {
		name, spec string
		want       map[string]string
		minMember  int32
		ungrouped  []string
	}{
		{
			name: "replicated jobs are roles of replicas × parallelism pods, in no order",
			spec: `
spec:
  replicatedJobs:
  - name: leader
    template: {spec: {template: {spec: {containers: [{name: c}]}}}}
  - name: workers
    replicas: 2
    template: {spec: {parallelism: 3, template: {spec: {containers: [{name: c}]}}}}`,
			want:      map[string]string{FrameworkAnnotation: "generic", RolesAnnotation: "leader=1,workers=6", LaunchOrderAnnotation: "none", DerivedFromAnnotation: "JobSet/js"},
			minMember: 7,
		},
		{
			name: "a replicated job that depends on others being Ready is ordered after them, and comes late",
			spec: `
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template: {spec: {template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}}
  - name: launcher
    dependsOn: [{name: workers, status: Ready}]
    template: {spec: {template: {spec: {nodeSelector: {pool: cpu}, containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}}}`,
			want: map[string]string{FrameworkAnnotation: "generic", RolesAnnotation: "workers=2,launcher=1", LaunchOrderAnnotation: "workers>launcher",
				DerivedFromAnnotation: "JobSet/js", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"2"},"nodeSelector":{"pool":"cpu"}}}`},
			minMember: 3,
		},
		{
			name: "InOrder starts each replicated job after the one before",
			spec: `
spec:
  startupPolicy: {startupPolicyOrder: InOrder}
  replicatedJobs:
  - {name: a, template: {spec: {template: {spec: {containers: [{name: c}]}}}}}
  - {name: b, template: {spec: {template: {spec: {containers: [{name: c}]}}}}}
  - {name: c, template: {spec: {template: {spec: {containers: [{name: c}]}}}}}`,
			want: map[string]string{FrameworkAnnotation: "generic", RolesAnnotation: "a=1,b=1,c=1", LaunchOrderAnnotation: "a>b,b>c",
				DerivedFromAnnotation: "JobSet/js", LateMembersAnnotation: `{"b":{"requests":{}},"c":{"requests":{}}}`},
			minMember: 3,
		},
		{
			name: "initializers that others wait for to Complete run first, out of the group",
			spec: `
spec:
  replicatedJobs:
  - {name: dataset-initializer, template: {spec: {template: {spec: {containers: [{name: c}]}}}}}
  - {name: model-initializer, template: {spec: {template: {spec: {containers: [{name: c}]}}}}}
  - name: node
    replicas: 2
    dependsOn: [{name: dataset-initializer, status: Complete}, {name: model-initializer, status: Complete}]
    template: {spec: {template: {spec: {containers: [{name: c}]}}}}`,
			want:      map[string]string{FrameworkAnnotation: "generic", RolesAnnotation: "node=2", LaunchOrderAnnotation: "none", DerivedFromAnnotation: "JobSet/js"},
			minMember: 2,
			ungrouped: []string{"dataset-initializer", "model-initializer"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromJobSet(jobSet(t, tt.spec))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Annotations)
			assert.Equal(t, tt.minMember, got.MinMember)
			assert.Equal(t, tt.ungrouped, got.Ungrouped)
			_, errs := Parse(got.Annotations)
			assert.Empty(t, errs, "what FromJobSet writes is a valid topology")
		})
	}
}

func TestFromJobSetRefusesWhatItCannotGroup(t *testing.T) {
	_, err := FromJobSet(jobSet(t, `
spec:
  replicatedJobs:
  - {name: initializer, template: {spec: {template: {spec: {containers: [{name: c}]}}}}}
  - name: node
    dependsOn: [{name: initializer, status: Complete}]
    template: {spec: {template: {spec: {containers: [{name: c}]}}}}
  - name: sidecar
    dependsOn: [{name: initializer, status: Ready}]
    template: {spec: {template: {spec: {containers: [{name: c}]}}}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replicated job sidecar of JobSet js waits for initializer to be Ready, which another waits for to Complete")

	_, err = FromJobSet(jobSet(t, `spec: {replicatedJobs: []}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "JobSet js has no replicated job to group")
}

func TestJobSetNames(t *testing.T) {
	names, err := JobSetNamesOf(jobSet(t, `
spec:
  replicatedJobs:
  - {name: master, template: {spec: {template: {spec: {containers: [{name: c}]}}}}}
  - {name: worker, replicas: 2, template: {spec: {parallelism: 3, template: {spec: {containers: [{name: c}]}}}}}`))
	require.NoError(t, err)
	assert.Equal(t, JobSetNames{JobSet: "js", Subdomain: "js", PodsPerJob: map[string]int32{"master": 1, "worker": 3}}, names, "the subdomain defaults to the JobSet's name")
	assert.Equal(t, "js-master-0-0", names.Hostname("master", 0))
	assert.Equal(t, "js-worker-1-1", names.Hostname("worker", 4), "worker 4 is pod 1 of Job 1")

	named, err := JobSetNamesOf(jobSet(t, `{spec: {network: {subdomain: net}, replicatedJobs: [{name: a}]}}`))
	require.NoError(t, err)
	assert.Equal(t, "net", named.Subdomain)

	topo, errs := Parse(map[string]string{RolesAnnotation: "master=1,worker=6"})
	require.Empty(t, errs)
	assert.Empty(t, names.CheckRoles(topo))
	topo, _ = Parse(map[string]string{RolesAnnotation: "master=1,worker=4,ps=1"})
	assert.ErrorContains(t, names.CheckRoles(topo).ToAggregate(), "role worker has 4 pods, but replicated job worker runs 3 per Job")
	assert.ErrorContains(t, names.CheckRoles(topo).ToAggregate(), "JobSet js has no replicated job ps; name each role after a replicated job (master, worker)")
}

func TestIdentifyNumbersAJobSetsPodsAcrossItsJobs(t *testing.T) {
	topo, errs := Parse(map[string]string{RolesAnnotation: "worker=6", JobSetAnnotation: "js"})
	require.Empty(t, errs)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{JobSetReplicatedJobLabel: "worker", JobSetJobIndexLabel: "1", JobSetReplicasLabel: "2"},
		Annotations: map[string]string{JobCompletionIndex: "2"},
	}}
	member, errs := topo.Identify(pod)
	require.Empty(t, errs)
	assert.Equal(t, Member{Role: "worker", Index: 5}, member, "pod 2 of Job 1, at 3 pods per Job")

	pod.Labels[IndexLabel] = "0"
	member, _ = topo.Identify(pod)
	assert.Equal(t, int32(0), member.Index, "muster's own index label wins")
}

func TestAJobSetsLateReplicatedJobHasTheDevicesItsTemplateClaims(t *testing.T) {
	group, err := FromJobSet(jobSet(t, `
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template: {spec: {template: {spec: {resourceClaims: [{name: gpu, resourceClaimTemplateName: worker-gpu}], containers: [{name: c}]}}}}
  - name: launcher
    dependsOn: [{name: workers, status: Ready}]
    template: {spec: {template: {spec: {resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}], containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"one-gpu"}, group.LateClaimTemplates(), "only the late replicated job's templates are read")
	require.NoError(t, group.WithLateDevices(ClaimTemplates{"one-gpu": claimTemplate(exactly("gpu", "gpu.example.com", "", 0))}))
	assert.Equal(t, `{"launcher":{"requests":{"cpu":"1"},"devices":[{"deviceClassName":"gpu.example.com","count":1}]}}`, group.Annotations[LateMembersAnnotation])
	assert.ErrorContains(t, group.WithLateDevices(ClaimTemplates{}), "replicated job launcher: spec.resourceClaims[0] names ResourceClaimTemplate one-gpu, which does not exist")
}
