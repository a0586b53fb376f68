package group

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/topology"
)

func TestKeepWhatCountsOfAPodThatSucceeded(t *testing.T) {
	full := func(labels map[string]string, group *corev1.PodSchedulingGroup) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: "p", UID: "u", ResourceVersion: "7", Labels: labels,
				Annotations:   map[string]string{topology.BuiltForAnnotation: "pg-1", topology.JobCompletionIndex: "3"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			},
			Spec: corev1.PodSpec{
				SchedulerName: topology.SchedulerName, NodeName: "n1", SchedulingGroup: group,
				Containers: []corev1.Container{{Name: "work", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
		}
	}
	upstream := &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want *corev1.Pod
	}{
		{
			name: "a member by label keeps its group, role, index, scheduler, node and phase",
			pod:  full(map[string]string{topology.GroupLabel: "train", topology.RoleLabel: "worker"}, nil),
			want: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", ResourceVersion: "7",
					Labels:      map[string]string{topology.GroupLabel: "train", topology.RoleLabel: "worker"},
					Annotations: map[string]string{topology.BuiltForAnnotation: "pg-1", topology.JobCompletionIndex: "3"}},
				Spec:   corev1.PodSpec{SchedulerName: topology.SchedulerName, NodeName: "n1"},
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded},
			},
		},
		{
			name: "a member by spec.schedulingGroup keeps it",
			pod:  full(nil, upstream),
			want: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", ResourceVersion: "7",
					Annotations: map[string]string{topology.BuiltForAnnotation: "pg-1", topology.JobCompletionIndex: "3"}},
				Spec:   corev1.PodSpec{SchedulerName: topology.SchedulerName, NodeName: "n1", SchedulingGroup: upstream},
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded},
			},
		},
		{
			name: "a pod of no group keeps its name alone",
			pod:  full(map[string]string{"app": "web"}, nil),
			want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", ResourceVersion: "7"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, err := keepWhatCounts(tt.pod)
			require.NoError(t, err)
			assert.Equal(t, tt.want, kept)
		})
	}
}

// TestTheModelCountsTheMembersThatSucceededAndCountsThemAgain: the
// informer of the pods that succeeded feeds the group's state, and a
// recount, as after a PodGroup's change, keeps them.
func TestTheModelCountsTheMembersThatSucceededAndCountsThemAgain(t *testing.T) {
	g := newTestGroup(t, 2)
	g.m.succeeded = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc})
	running := g.add(t, "a", "n1", topology.SchedulerName, "")
	done := running.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	require.NoError(t, g.pods.Delete(running))
	g.m.Take(Deleted(running))
	require.NoError(t, g.m.succeeded.Add(done))
	g.m.SucceededPodEvents().OnAdd(done, false)
	g.add(t, "b", "", topology.SchedulerName, "")

	assert.Equal(t, int32(2), g.m.Census(g.key).TowardQuorum(), "a succeeded and b pending")
	g.m.recount(g.key)
	assert.Equal(t, int32(1), g.m.Census(g.key).Succeeded(), "a recount keeps the member that succeeded")
	lacking := g.m.LackingMembers(g.key, 2)
	require.Len(t, lacking, 1, "a, succeeded, counts as placed: the gang lacks b alone")
	assert.Equal(t, "b", lacking[0].Name)

	require.NoError(t, g.m.succeeded.Delete(done))
	g.m.SucceededPodEvents().OnDelete(done)
	assert.Equal(t, int32(1), g.m.Census(g.key).TowardQuorum(), "b alone once a is deleted")
	assert.Empty(t, g.m.LackingMembers(g.key, 2), "with a deleted, b alone cannot reach the min: no room is made for it")
}
