package podgroup

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/topology"
)

// upstreamGroups returns the groups of a cluster that serves
// scheduling.k8s.io's PodGroups, holding objs, with members in the cache
// of upstream members; and the client of objs.
func upstreamGroups(t *testing.T, objs []client.Object, members ...*corev1.Pod) (*Groups, client.Client) {
	t.Helper()
	c := newFakeClient(t, objs...)
	memberObjs := make([]client.Object, 0, len(members))
	for _, pod := range members {
		memberObjs = append(memberObjs, pod)
	}
	m := newFakeClient(t, memberObjs...)
	return &Groups{Client: c, UpstreamMembers: fakeCache{Reader: m}}, m
}

func upstreamPodGroup(minCount int32, annotations map[string]string) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "upstream-uid", Annotations: annotations},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
}

func upstreamMember(name string) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(name).UID(name).SchedulerName(topology.SchedulerName).PodGroupName("job").Label(topology.UpstreamMemberLabel, "job")
}

// TestTheResourcesOfAnUpstreamGroup: an MPI group of scheduling.k8s.io
// gets its Service, which selects its members by the label muster gives
// them, its files from its running workers, and its keys, each controlled
// by that PodGroup.
func TestTheResourcesOfAnUpstreamGroup(t *testing.T) {
	pg := upstreamPodGroup(3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	running := upstreamMember("w1").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "1").Phase(corev1.PodRunning).Obj()
	groups, _ := upstreamGroups(t, []client.Object{pg}, running)
	r := &ResourceReconciler{Client: groups.Client, Reader: groups.Client, Groups: groups, Scheme: groups.Client.Scheme(), Recorder: record.NewFakeRecorder(10)}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "job"}})
	require.NoError(t, err)

	svc := get(t, groups.Client, "job", &corev1.Service{})
	assert.Equal(t, map[string]string{topology.UpstreamMemberLabel: "job"}, svc.Spec.Selector)
	cm := get(t, groups.Client, "job-muster", &corev1.ConfigMap{})
	assert.Equal(t, "job-worker-0.job.team-a.svc slots=1\njob-worker-1.job.team-a.svc slots=1\n", cm.Data[envinject.HostfileKey])
	assert.Equal(t, "#!/bin/sh\necho job-worker-1.job.team-a.svc:1\n", cm.Data[envinject.DiscoverHostsKey], "the running worker, from the cache of upstream members")
	secret := get(t, groups.Client, "job-muster-ssh", &corev1.Secret{})
	for _, obj := range []client.Object{svc, cm, secret} {
		owner := metav1.GetControllerOf(obj)
		require.NotNil(t, owner, "%s has no controller", obj.GetName())
		assert.Equal(t, metav1.OwnerReference{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "job", UID: "upstream-uid",
			Controller: new(true), BlockOwnerDeletion: new(true)}, *owner)
	}
}

// TestUpstreamMembersAreToldWhyTheyWait: the members of a scheduling.k8s.io
// gang short of its minCount say why they wait, as a scheduler-plugins
// group's do; a member whose PodGroup is missing names the field that
// names it.
func TestUpstreamMembersAreToldWhyTheyWait(t *testing.T) {
	groups, members := upstreamGroups(t, []client.Object{upstreamPodGroup(3, nil)}, upstreamMember("a").Obj(), upstreamMember("b").Obj())
	r := &StatusReconciler{Client: members, Groups: groups, Recorder: record.NewFakeRecorder(10), Clock: testingclock.NewFakeClock(epoch.Time)}
	reconcileGroup(t, r)
	for _, name := range []string{"a", "b"} {
		cond := condition(t, members, name)
		require.NotNil(t, cond, "pod %s has no PodScheduled condition", name)
		assert.Equal(t, WaitingReason, cond.Reason)
		assert.Equal(t, "waiting for 1 more pods of group team-a/job (2/3)", cond.Message)
	}

	require.NoError(t, groups.Client.Delete(context.Background(), upstreamPodGroup(3, nil)))
	reconcileGroup(t, r)
	assert.Equal(t, "waiting for PodGroup team-a/job to be created (named by spec.schedulingGroup.podGroupName)", condition(t, members, "a").Message)
}
