package podgroup

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

func TestJobSetGroupReconcilerMakesTheJobSetsPodGroup(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	scheme.AddKnownTypeWithName(topology.JobSetGVK, &unstructured.Unstructured{})
	jobSet := func(name string, annotations map[string]string) *unstructured.Unstructured {
		js := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "leader"},
			map[string]any{"name": "workers", "replicas": int64(2), "template": map[string]any{"spec": map[string]any{"parallelism": int64(2)}}},
		}}}}
		js.SetGroupVersionKind(topology.JobSetGVK)
		js.SetNamespace(ns)
		js.SetName(name)
		js.SetUID(types.UID("uid-" + name))
		js.SetAnnotations(annotations)
		return js
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		jobSet("js", nil), jobSet("opted-out", map[string]string{topology.JobSetPodGroupAnnotation: "none"})).Build()
	recorder := record.NewFakeRecorder(10)
	r := &JobSetGroupReconciler{Client: c, Reader: c, Recorder: recorder}
	reconcileJobSet := func(name string) {
		t.Helper()
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		require.NoError(t, err)
	}

	reconcileJobSet("js")
	pg := &v1alpha1.PodGroup{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "js"}, pg))
	assert.Equal(t, int32(5), pg.Spec.MinMember)
	assert.Equal(t, "leader=1,workers=4", pg.Annotations[topology.RolesAnnotation])
	owner := metav1.GetControllerOf(pg)
	require.NotNil(t, owner)
	assert.Equal(t, "JobSet", owner.Kind)
	assert.Equal(t, types.UID("uid-js"), owner.UID)
	assert.Equal(t, "Normal PodGroupCreated PodGroup js: minMember 5, roles leader=1,workers=4, launch order none", <-recorder.Events)

	reconcileJobSet("js")
	assert.Empty(t, recorder.Events, "a PodGroup that exists is left as it is")

	reconcileJobSet("opted-out")
	reconcileJobSet("gone")
	var groups v1alpha1.PodGroupList
	require.NoError(t, c.List(context.Background(), &groups))
	assert.Len(t, groups.Items, 1, "no PodGroup for a JobSet that opts out or does not exist")
}
