package webhooks

import (
	"context"
	"regexp"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// namesAField matches a refusal that names the field to fix.
var namesAField = regexp.MustCompile(`(metadata|spec)\.[a-zA-Z]+`)

// checkRefusal fails the fuzz case when a refusal does not name a field.
func checkRefusal(t *testing.T, resp admission.Response) {
	t.Helper()
	if resp.Allowed {
		return
	}
	if resp.Result == nil || !namesAField.MatchString(resp.Result.Message) {
		t.Fatalf("a refusal that names no field: %+v", resp.Result)
	}
}

// FuzzPodDefaulter gives the pod webhook pods with random names, group,
// role and index labels and annotations, against PodGroups of every kind:
// it never panics, and every refusal names a field. The seed corpus is in
// testdata/fuzz/FuzzPodDefaulter.
func FuzzPodDefaulter(f *testing.F) {
	f.Add("p", "mpi", "worker", "1", "muster.dev/role", "x")
	f.Add("p", "tf", "master", "0", topology.JobCompletionIndex, "3")
	f.Add("", "later", "", "", "", "")
	f.Add("p", "cyclic", "a", "-1", topology.StatefulSetIndexLabel, "zz")
	s := scheme(f)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		podGroup("mpi", 3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}),
		podGroup("tf", 3, map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "master=1,ps=1,worker=2"}),
		podGroup("gang", 3, nil),
		podGroup("cyclic", 2, map[string]string{topology.RolesAnnotation: "a=1,b=1", topology.LaunchOrderAnnotation: "a>b>a"}),
	).Build()
	webhook := admission.WithCustomDefaulter(s, &corev1.Pod{}, &PodDefaulter{Client: c, Reader: c, ClusterDomain: "cluster.local"})
	f.Fuzz(func(t *testing.T, name, group, role, index, key, value string) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{}, Annotations: map[string]string{key: value}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "trainer"}}},
		}
		for label, v := range map[string]string{topology.GroupLabel: group, topology.RoleLabel: role, topology.IndexLabel: index, key: value} {
			if v != "" {
				pod.Labels[label] = v
			}
		}
		checkRefusal(t, webhook.Handle(context.Background(), request(t, admissionv1.Create, pod, nil)))
	})
}

// FuzzPodGroupValidator gives the PodGroup webhook random names, muster
// annotations and minMembers: it never panics, and every refusal names a
// field. The seed corpus is in testdata/fuzz/FuzzPodGroupValidator.
func FuzzPodGroupValidator(f *testing.F) {
	f.Add("job", "mpi", "launcher=1,worker=2", "muster.dev/slots", "2", int32(3))
	f.Add("1job", "tensorflow", "ps=1,worker=99999", "muster.dev/framwork", "x", int32(1))
	f.Add("a.b", "pytorch", "trainer=2", "muster.dev/elastic", "1:2", int32(0))
	webhook := admission.WithCustomValidator(scheme(f), &v1alpha1.PodGroup{}, PodGroupValidator{})
	f.Fuzz(func(t *testing.T, name, framework, roles, key, value string, minMember int32) {
		annotations := map[string]string{key: value}
		for k, v := range map[string]string{topology.FrameworkAnnotation: framework, topology.RolesAnnotation: roles} {
			if v != "" {
				annotations[k] = v
			}
		}
		pg := podGroup(name, minMember, annotations)
		checkRefusal(t, webhook.Handle(context.Background(), request(t, admissionv1.Create, pg, nil)))
	})
}
