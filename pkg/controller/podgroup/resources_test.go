package podgroup

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/topology"
)

func mpiPodGroup() *v1alpha1.PodGroup {
	pg := podGroup(3, v1alpha1.PodGroupStatus{})
	pg.UID = "pg-uid"
	pg.Annotations = map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}
	return pg
}

func newResourceReconciler(t *testing.T, objs ...client.Object) (*ResourceReconciler, client.Client, *record.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, groupField, podGroupIndex).Build()
	recorder := record.NewFakeRecorder(100)
	return &ResourceReconciler{Client: c, Reader: c, Groups: &Groups{Client: c}, Scheme: scheme, Recorder: recorder}, c, recorder
}

func reconcileResources(t *testing.T, r *ResourceReconciler) {
	t.Helper()
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "job"}})
	require.NoError(t, err)
}

func get[T client.Object](t *testing.T, c client.Client, name string, obj T) T {
	t.Helper()
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj))
	return obj
}

func events(recorder *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestResourcesOfAnMPIGroup(t *testing.T) {
	runningWorker := member("w1").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "1").Phase(corev1.PodRunning).Obj()
	pendingWorker := member("w0").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0").Obj()
	r, c, recorder := newResourceReconciler(t, mpiPodGroup(), runningWorker, pendingWorker)
	reconcileResources(t, r)

	svc := get(t, c, "job", &corev1.Service{})
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.True(t, svc.Spec.PublishNotReadyAddresses)
	assert.Equal(t, map[string]string{topology.GroupLabel: "job"}, svc.Spec.Selector)
	cm := get(t, c, "job-muster", &corev1.ConfigMap{})
	assert.Equal(t, "job-worker-0.job.team-a.svc slots=1\njob-worker-1.job.team-a.svc slots=1\n", cm.Data[envinject.HostfileKey])
	assert.Equal(t, "#!/bin/sh\necho job-worker-1.job.team-a.svc:1\n", cm.Data[envinject.DiscoverHostsKey], "only the running worker")
	secret := get(t, c, "job-muster-ssh", &corev1.Secret{})
	assert.True(t, isKeyPair(secret.Data))
	for _, obj := range []client.Object{svc, cm, secret} {
		assert.True(t, metav1.IsControlledBy(obj, mpiPodGroup()), "%s is controlled by its PodGroup", obj.GetName())
		assert.Equal(t, ManagedBy, obj.GetLabels()[ManagedByLabel])
	}

	reconcileResources(t, r)
	assert.Equal(t, svc.ResourceVersion, get(t, c, "job", &corev1.Service{}).ResourceVersion)
	assert.Equal(t, cm.ResourceVersion, get(t, c, "job-muster", &corev1.ConfigMap{}).ResourceVersion)
	assert.Equal(t, secret.ResourceVersion, get(t, c, "job-muster-ssh", &corev1.Secret{}).ResourceVersion, "the key pair is kept")
	assert.Empty(t, events(recorder))
}

func TestTheFilesOfAnElasticGroupFollowItsRunningWorkers(t *testing.T) {
	pg := mpiPodGroup()
	pg.Annotations[topology.RolesAnnotation] = "launcher=1,worker=3"
	pg.Annotations[topology.ElasticAnnotation] = "1:3"
	worker := func(i string) *st.PodWrapper {
		return member("w"+i).Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, i)
	}
	r, c, _ := newResourceReconciler(t, pg, worker("0").Phase(corev1.PodRunning).Obj(), worker("2").Phase(corev1.PodRunning).Obj(), worker("1").Obj())
	reconcileResources(t, r)

	cm := get(t, c, "job-muster", &corev1.ConfigMap{})
	assert.Equal(t, "job-worker-0.job.team-a.svc slots=1\njob-worker-2.job.team-a.svc slots=1\n", cm.Data[envinject.HostfileKey], "the running workers only")
	assert.Equal(t, "job-worker-0.job.team-a.svc\njob-worker-2.job.team-a.svc\n", cm.Data["worker.hosts"])
	assert.Equal(t, "job-launcher-0.job.team-a.svc\n", cm.Data["launcher.hosts"], "a fixed role is listed whole")
}

func TestResourcesAreRestored(t *testing.T) {
	r, c, recorder := newResourceReconciler(t, mpiPodGroup())
	reconcileResources(t, r)
	want := get(t, c, "job-muster", &corev1.ConfigMap{}).Data

	cm := get(t, c, "job-muster", &corev1.ConfigMap{})
	cm.Data[envinject.HostfileKey] = "localhost slots=64\n"
	require.NoError(t, c.Update(context.Background(), cm))
	svc := get(t, c, "job", &corev1.Service{})
	svc.Spec.PublishNotReadyAddresses = false
	require.NoError(t, c.Update(context.Background(), svc))
	secret := get(t, c, "job-muster-ssh", &corev1.Secret{})
	secret.Data[envinject.SSHPublicKeyKey] = []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyFromSomewhereElse x\n")
	require.NoError(t, c.Update(context.Background(), secret))

	reconcileResources(t, r)
	assert.Equal(t, want, get(t, c, "job-muster", &corev1.ConfigMap{}).Data)
	assert.True(t, get(t, c, "job", &corev1.Service{}).Spec.PublishNotReadyAddresses)
	assert.True(t, isKeyPair(get(t, c, "job-muster-ssh", &corev1.Secret{}).Data), "a broken pair is replaced whole")
	assert.ElementsMatch(t, []string{
		"Warning Restored Service job had been changed; restored [spec.publishNotReadyAddresses]",
		"Warning Restored ConfigMap job-muster had been changed; restored [data]",
		"Warning Restored Secret job-muster-ssh had been changed; restored [data]",
	}, events(recorder))
}

func TestResourcesLeaveForeignObjectsAlone(t *testing.T) {
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-muster", Labels: map[string]string{"team": "a"}},
		Data:       map[string]string{"train.yaml": "lr: 0.1\n"},
	}
	r, c, recorder := newResourceReconciler(t, mpiPodGroup(), foreign)
	reconcileResources(t, r)

	kept := get(t, c, "job-muster", &corev1.ConfigMap{})
	assert.Equal(t, foreign.Data, kept.Data)
	assert.Equal(t, foreign.Labels, kept.Labels)
	assert.Empty(t, kept.OwnerReferences)
	assert.Contains(t, events(recorder), "Warning OwnershipConflict ConfigMap job-muster exists and does not belong to this PodGroup, so muster leaves it alone and the group's members lack it; rename or delete it")
	get(t, c, "job", &corev1.Service{})
}

func TestResourcesOfAGangOnlyGroup(t *testing.T) {
	r, c, _ := newResourceReconciler(t, podGroup(3, v1alpha1.PodGroupStatus{}))
	reconcileResources(t, r)
	var services corev1.ServiceList
	require.NoError(t, c.List(context.Background(), &services))
	assert.Empty(t, services.Items, "a group without roles needs no names")
	var configMaps corev1.ConfigMapList
	require.NoError(t, c.List(context.Background(), &configMaps))
	assert.Empty(t, configMaps.Items)
}

func TestOwnUpdatesAreNotReportedAsRestored(t *testing.T) {
	r, c, recorder := newResourceReconciler(t, mpiPodGroup())
	reconcileResources(t, r)
	events(recorder)

	// A worker starts running: discover_hosts.sh lists it now.
	worker := st.MakePod().Namespace(ns).Name("job-worker-0").SchedulerName(topology.SchedulerName).Label(topology.GroupLabel, "job").
		Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0").Phase(corev1.PodRunning).Obj()
	require.NoError(t, c.Create(context.Background(), worker))
	reconcileResources(t, r)
	configMap := get(t, c, "job-muster", &corev1.ConfigMap{})
	assert.Contains(t, configMap.Data[envinject.DiscoverHostsKey], "job-worker-0")
	assert.Empty(t, events(recorder), "muster's own update of the ConfigMap is no restore")
}

func TestAnInvalidStoredGroupIsReportedOnce(t *testing.T) {
	pg := mpiPodGroup()
	pg.Name = "1job"
	r, c, recorder := newResourceReconciler(t, pg)
	for range 3 {
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "1job"}})
		require.NoError(t, err)
	}
	got := events(recorder)
	require.Len(t, got, 1, "one event however often it is reconciled: %v", got)
	assert.Contains(t, got[0], `Warning InvalidGroup muster cannot serve this group: metadata.name: Invalid value: "1job"`)
	var services corev1.ServiceList
	require.NoError(t, c.List(context.Background(), &services))
	assert.Empty(t, services.Items, "no object is made for it")
}
