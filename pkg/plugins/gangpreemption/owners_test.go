package gangpreemption

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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

// TestAShrinkReadsTheOwnerAgainAfterAConflict: the owner's controller
// writes it between the shrink's read and its write, as a StatefulSet's
// does while the victim before goes; the shrink reads it again and
// scales it, rather than leave the victim in place.
func TestAShrinkReadsTheOwnerAgainAfterAConflict(t *testing.T) {
	mpiJob := schema.GroupVersionKind{Group: "kubeflow.org", Version: "v2beta1", Kind: "MPIJob"}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	scheme.AddKnownTypeWithName(mpiJob, &unstructured.Unstructured{})
	job := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"mpiReplicaSpecs": map[string]any{
		"Worker": map[string]any{"replicas": int64(4)},
	}}}}
	job.SetGroupVersionKind(mpiJob)
	job.SetNamespace("ns")
	job.SetName("hvd")
	patches := 0
	conflictOnce := interceptor.Funcs{
		SubResourceGet: func(_ context.Context, _ client.Client, sub string, obj client.Object, _ client.Object, _ ...client.SubResourceGetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{Group: mpiJob.Group, Resource: "mpijobs/" + sub}, obj.GetName())
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			if patches == 1 {
				return apierrors.NewConflict(schema.GroupResource{Group: mpiJob.Group, Resource: "mpijobs"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).WithInterceptorFuncs(conflictOnce).Build()
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hvd-worker-2", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "hvd", Controller: ptr.To(true)},
	}}}

	require.NoError(t, (&owners{client: c}).shrink(context.Background(), victim, 2))

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(mpiJob)
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "hvd"}, got))
	workers, _, _ := unstructured.NestedInt64(got.Object, "spec", "mpiReplicaSpecs", "Worker", "replicas")
	assert.Equal(t, int64(2), workers)
	assert.Equal(t, 2, patches, "one conflict, then the write")
}
