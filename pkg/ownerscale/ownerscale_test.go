package ownerscale

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// An MPIJob has no scale subresource: its workers are scaled in
// spec.mpiReplicaSpecs.Worker.replicas, and its launcher is left alone.
const ns = "team-a"

var mpiJobGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v2beta1", Kind: "MPIJob"}

// mpiJob is the MPIJob hvd in namespace with its replicas by role, and a
// scheme that knows its kind.
func mpiJob(t *testing.T, namespace string, replicas map[string]int64) (*runtime.Scheme, *unstructured.Unstructured) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	scheme.AddKnownTypeWithName(mpiJobGVK, &unstructured.Unstructured{})
	specs := map[string]any{}
	for role, n := range replicas {
		specs[role] = map[string]any{"replicas": n}
	}
	job := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"mpiReplicaSpecs": specs}}}
	job.SetGroupVersionKind(mpiJobGVK)
	job.SetNamespace(namespace)
	job.SetName("hvd")
	return scheme, job
}

func TestAnOwnerWithoutAScaleIsScaledInItsWorkerReplicas(t *testing.T) {
	scheme, job := mpiJob(t, ns, map[string]int64{"Launcher": 1, "Worker": 2})
	// muster's RBAC does not grant mpijobs/scale: the API server answers
	// 403 (it would answer 404 for a kind without a scale subresource).
	noScale := interceptor.Funcs{SubResourceGet: func(_ context.Context, _ client.Client, sub string, obj client.Object, _ client.Object, _ ...client.SubResourceGetOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: obj.GetObjectKind().GroupVersionKind().Group, Resource: "mpijobs/" + sub}, obj.GetName(), nil)
	}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).WithInterceptorFuncs(noScale).Build()
	ref := &metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "hvd", Controller: new(bool)}

	owner, err := Of(context.Background(), c, c, ns, ref)
	require.NoError(t, err)
	require.NotNil(t, owner, "an MPIJob is scaled in its worker replicas")
	assert.Equal(t, int32(2), owner.Replicas)
	assert.Equal(t, "MPIJob "+ns+"/hvd", owner.String())
	require.NoError(t, owner.Set(context.Background(), c, 3))

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(mpiJobGVK)
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "hvd"}, got))
	workers, _, _ := unstructured.NestedInt64(got.Object, "spec", "mpiReplicaSpecs", "Worker", "replicas")
	launchers, _, _ := unstructured.NestedInt64(got.Object, "spec", "mpiReplicaSpecs", "Launcher", "replicas")
	assert.Equal(t, int64(3), workers)
	assert.Equal(t, int64(1), launchers)

	// Written since it was read: the change is refused, not overwritten.
	require.NoError(t, unstructured.SetNestedField(got.Object, int64(5), "spec", "mpiReplicaSpecs", "Worker", "replicas"))
	require.NoError(t, c.Update(context.Background(), got))
	assert.Error(t, owner.Set(context.Background(), c, 1))

	owner, err = Of(context.Background(), c, c, ns, &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "nobody"})
	require.NoError(t, err)
	assert.Nil(t, owner, "a kind with neither a scale nor a known replica field is not scaled")
}

// TestAShrinkReadsTheOwnerAgainAfterAConflict: the owner's controller
// writes it between the shrink's read and its write, as a StatefulSet's
// does while a preemption's victim before goes; the shrink reads it again and
// scales it, rather than leave the victim in place.
func TestAShrinkReadsTheOwnerAgainAfterAConflict(t *testing.T) {
	scheme, job := mpiJob(t, "ns", map[string]int64{"Worker": 4})
	patches := 0
	conflictOnce := interceptor.Funcs{
		SubResourceGet: func(_ context.Context, _ client.Client, sub string, obj client.Object, _ client.Object, _ ...client.SubResourceGetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{Group: mpiJobGVK.Group, Resource: "mpijobs/" + sub}, obj.GetName())
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			if patches == 1 {
				return apierrors.NewConflict(schema.GroupResource{Group: mpiJobGVK.Group, Resource: "mpijobs"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).WithInterceptorFuncs(conflictOnce).Build()
	owner := &metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "hvd", Controller: ptr.To(true)}

	require.NoError(t, (&Shrinker{client: c}).ShrinkTo(context.Background(), "ns", owner, 2))

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(mpiJobGVK)
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "hvd"}, got))
	workers, _, _ := unstructured.NestedInt64(got.Object, "spec", "mpiReplicaSpecs", "Worker", "replicas")
	assert.Equal(t, int64(2), workers)
	assert.Equal(t, 2, patches, "one conflict, then the write")
}
