package framework

import (
	"context"
	"fmt"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/topology"
)

// CreateElasticSet creates an elastic group of min to max workers of one
// CPU, its minMember min, whose workers are the pods of a StatefulSet at
// replicas, its PodGroup with the annotations given besides. The set is named
// <group>-worker and its service <group>, so that its pods' names are the
// hostnames muster gives the group's workers. shape changes the pod
// template further.
func CreateElasticSet(t *testing.T, namespace, group string, min, max, replicas int32, annotations map[string]string, shape ...func(*corev1.Pod)) {
	t.Helper()
	pgAnnotations := map[string]string{
		topology.RolesAnnotation:   fmt.Sprintf("worker=%d", max),
		topology.ElasticAnnotation: fmt.Sprintf("%d:%d", min, max),
	}
	maps.Copy(pgAnnotations, annotations)
	CreatePodGroup(t, namespace, group, min, pgAnnotations)
	template := InPool(MemberPod(namespace, group, 0, "1").Label(topology.RoleLabel, "worker").Obj(), namespace)
	for _, change := range shape {
		change(template)
	}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: group + "-worker"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         group,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{topology.GroupLabel: group}},
			Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
		},
	}
	if _, err := Client.AppsV1().StatefulSets(namespace).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating StatefulSet %s: %v", set.Name, err)
	}
	// Before the node pool's cleanup deletes the pods, which the set
	// would create again.
	t.Cleanup(func() {
		if err := Client.AppsV1().StatefulSets(namespace).Delete(context.Background(), set.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting StatefulSet %s: %v", set.Name, err)
		}
	})
}
