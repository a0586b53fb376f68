package gangpreemption

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// shrinks records what an OwnerShrinker was asked.
type shrinks []string

func (s *shrinks) ShrinkTo(_ context.Context, namespace string, owner *metav1.OwnerReference, n int32) error {
	*s = append(*s, fmt.Sprintf("%s/%s/%s=%d", namespace, owner.Kind, owner.Name, n))
	return nil
}

func TestAVictimsControllerIsShrunkToTheVictimsIndex(t *testing.T) {
	controller := metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "hvd", Controller: ptr.To(true)}
	notController := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"}
	cases := []struct {
		name   string
		owners []metav1.OwnerReference
		want   []string
	}{
		{name: "the controller is shrunk to the index, keeping the members below it", owners: []metav1.OwnerReference{notController, controller}, want: []string{"ns/MPIJob/hvd=2"}},
		{name: "a pod with no controller is only evicted", owners: []metav1.OwnerReference{notController}},
		{name: "a pod with no owner is only evicted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got shrinks
			victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hvd-worker-2", OwnerReferences: tc.owners}}
			require.NoError(t, (&owners{shrinker: &got}).shrink(context.Background(), victim, 2))
			assert.Equal(t, tc.want, []string(got))
		})
	}
}
