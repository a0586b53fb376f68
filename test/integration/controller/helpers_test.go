// Package controller tests muster-controller against a real control plane:
// pods and PodGroups go through the API server's admission chain, with
// muster's webhooks in it, and each test reads back what was stored.
package controller

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, nil)
}

// member is a pod of role and index in group for muster-scheduler, as a
// user would write it.
func member(namespace, group, role string, index int) *st.PodWrapper {
	return st.MakePod().Namespace(namespace).Name(group+"-"+role+"-"+strconv.Itoa(index)).
		SchedulerName(localcluster.SchedulerName).
		Label(topology.GroupLabel, group).Label(topology.RoleLabel, role).Label(topology.IndexLabel, strconv.Itoa(index)).
		Container("registry.k8s.io/pause:3.10")
}

// create creates the pod through the API server and returns it as stored,
// after admission.
func create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := framework.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return created
}

// createRoles creates every member of the roles, in the order given, and
// returns them by name.
func createRoles(t *testing.T, namespace, group string, roles []string, replicas map[string]int) map[string]*corev1.Pod {
	t.Helper()
	pods := map[string]*corev1.Pod{}
	for _, role := range roles {
		for i := range replicas[role] {
			pod := create(t, member(namespace, group, role, i).Obj())
			pods[pod.Name] = pod
		}
	}
	return pods
}

// env returns the value of the first container's variable, and whether it
// is set.
func env(pod *corev1.Pod, name string) (string, bool) {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// wantEnv checks variables of the pod's first container; an empty value
// means the variable must not be set.
func wantEnv(t *testing.T, pod *corev1.Pod, want map[string]string) {
	t.Helper()
	for name, value := range want {
		got, ok := env(pod, name)
		switch {
		case value == "" && ok:
			t.Errorf("%s: %s is set to %q; it should not be", pod.Name, name, got)
		case value != "" && got != value:
			t.Errorf("%s: %s = %q, want %q", pod.Name, name, got, value)
		}
	}
}

func service(t *testing.T, namespace, name string) *corev1.Service {
	t.Helper()
	return framework.Eventually(t, "Service "+name, func(ctx context.Context) (*corev1.Service, error) {
		return framework.Client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}

func configMap(t *testing.T, namespace, name string) *corev1.ConfigMap {
	t.Helper()
	return framework.Eventually(t, "ConfigMap "+name, func(ctx context.Context) (*corev1.ConfigMap, error) {
		return framework.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}

func secret(t *testing.T, namespace, name string) *corev1.Secret {
	t.Helper()
	return framework.Eventually(t, "Secret "+name, func(ctx context.Context) (*corev1.Secret, error) {
		return framework.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}
