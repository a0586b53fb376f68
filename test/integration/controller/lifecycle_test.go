package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestBadInputIsRefused: a pod without its role, a PodGroup with a cyclic
// order and one with a negative replica count are refused with the reason,
// and nothing of them is stored or created.
func TestBadInputIsRefused(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.CreatePodGroup(t, ns, "job", 3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	noRole := member(ns, "job", "worker", 0).Obj()
	delete(noRole.Labels, topology.RoleLabel)
	_, err := framework.Client.CoreV1().Pods(ns).Create(context.Background(), noRole, metav1.CreateOptions{})
	wantRefused(t, err, `metadata.labels[muster.dev/role]: Required value`, "set it to one of [launcher worker]")

	podGroups := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns)
	for name, tc := range map[string]struct {
		annotations map[string]string
		want        []string
	}{
		"cycle": {
			map[string]string{topology.RolesAnnotation: "a=1,b=1", topology.LaunchOrderAnnotation: "a>b>a"},
			[]string{"metadata.annotations[muster.dev/launch-order]", "the order has a cycle, a>b>a"},
		},
		"negative": {
			map[string]string{topology.RolesAnnotation: "worker=-1"},
			[]string{`metadata.annotations[muster.dev/roles]: Invalid value: "worker=-1"`, "it must be a positive whole number"},
		},
	} {
		pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: tc.annotations}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}
		_, err := podGroups.Create(context.Background(), pg, metav1.CreateOptions{})
		wantRefused(t, err, tc.want...)
	}

	pods, err := framework.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods stored: %v (err %v)", pods.Items, err)
	}
	stored, err := podGroups.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(stored.Items) != 1 {
		t.Errorf("want only PodGroup job stored, have %d (err %v)", len(stored.Items), err)
	}
	// The valid group's objects appear; none for the refused ones.
	service(t, ns, "job")
	services, err := framework.Client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(services.Items) != 1 {
		t.Errorf("want only Service job, have %v (err %v)", services.Items, err)
	}
}

func wantRefused(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("created; want it refused with %q", want)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("refused with %v; want a webhook's denial", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %q does not say %q", err, w)
		}
	}
}

// TestOwnership: the group's objects belong to its PodGroup and go with it;
// a user's edit is undone; an object of the same name that the group does
// not own is never touched, and the conflict is reported on the PodGroup.
func TestOwnership(t *testing.T) {
	ns := framework.NewNamespace(t)
	mpi := map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}
	configMaps := framework.Client.CoreV1().ConfigMaps(ns)

	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "theirs-muster", Labels: map[string]string{"team": "a"}},
		Data:       map[string]string{"train.yaml": "lr: 0.1\n"},
	}
	foreign, err := configMaps.Create(context.Background(), foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the user's ConfigMap: %v", err)
	}
	framework.CreatePodGroup(t, ns, "theirs", 3, mpi)
	note := framework.WaitForEvent(t, ns, "theirs", podgroup.ReasonOwnershipConflict)
	if !strings.Contains(note, "ConfigMap theirs-muster exists and does not belong to this PodGroup") {
		t.Errorf("the conflict event says %q", note)
	}
	service(t, ns, "theirs") // reconciled past the conflict

	ours := framework.CreatePodGroup(t, ns, "ours", 3, mpi)
	objects := []string{"Service ours", "ConfigMap ours-muster", "Secret ours-muster-ssh"}
	owned := []metav1.Object{service(t, ns, "ours"), configMap(t, ns, "ours-muster"), secret(t, ns, "ours-muster-ssh")}
	for i, obj := range owned {
		if !metav1.IsControlledBy(obj, ours) {
			t.Errorf("%s is not controlled by PodGroup ours: %v", objects[i], obj.GetOwnerReferences())
		}
	}

	// A user edits the hostfile; it is put back, and the PodGroup says so.
	cm := configMap(t, ns, "ours-muster")
	want := cm.Data["hostfile"]
	cm.Data["hostfile"] = "localhost slots=64\n"
	if _, err := configMaps.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("editing the ConfigMap: %v", err)
	}
	framework.Eventually(t, "the hostfile to be restored", func(ctx context.Context) (string, error) {
		if got := configMap(t, ns, "ours-muster").Data["hostfile"]; got != want {
			return got, fmt.Errorf("hostfile is %q", got)
		}
		return want, nil
	})
	framework.WaitForEvent(t, ns, "ours", podgroup.ReasonRestored)

	for _, name := range []string{"ours", "theirs"} {
		if err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting PodGroup %s: %v", name, err)
		}
	}
	gone := func(get func(context.Context) error) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) { return apierrors.IsNotFound(get(ctx)), nil }
	}
	for i, get := range []func(context.Context) error{
		func(ctx context.Context) error {
			_, err := framework.Client.CoreV1().Services(ns).Get(ctx, "ours", metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := configMaps.Get(ctx, "ours-muster", metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := framework.Client.CoreV1().Secrets(ns).Get(ctx, "ours-muster-ssh", metav1.GetOptions{})
			return err
		},
	} {
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, gone(get)); err != nil {
			t.Errorf("%s outlived its PodGroup: %v", objects[i], err)
		}
	}
	// theirs' own Service went with it; the user's ConfigMap did not.
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, gone(func(ctx context.Context) error {
		_, err := framework.Client.CoreV1().Services(ns).Get(ctx, "theirs", metav1.GetOptions{})
		return err
	})); err != nil {
		t.Errorf("Service theirs outlived its PodGroup: %v", err)
	}
	kept, err := configMaps.Get(context.Background(), "theirs-muster", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the user's ConfigMap is gone: %v", err)
	}
	if kept.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the user's ConfigMap was changed: %+v", kept)
	}
}

// TestRestart: restarting muster-controller rewrites nothing that was
// right, creates no duplicates, keeps the SSH keys and the webhook
// certificate, and admits the next pod as before.
func TestRestart(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.CreatePodGroup(t, ns, "job", 3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	createRoles(t, ns, "job", []string{"worker"}, map[string]int{"worker": 2})
	versions := func() map[string]string {
		return map[string]string{
			"Service":     service(t, ns, "job").ResourceVersion,
			"Secret":      secret(t, ns, "job-muster-ssh").ResourceVersion,
			"certificate": secret(t, manifests.SystemNamespace, manifests.WebhookCertSecretName).ResourceVersion,
		}
	}
	before := versions()
	files := configMap(t, ns, "job-muster").Data

	if err := framework.Cluster().Restart(context.Background(), "muster-controller"); err != nil {
		t.Fatalf("restarting muster-controller: %v", err)
	}
	launcher := create(t, member(ns, "job", "launcher", 0).Obj())
	wantEnv(t, launcher, map[string]string{"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"})
	// A user's edit is undone only by a running reconciler: once it is, the
	// restarted controller has looked at this group.
	cm := configMap(t, ns, "job-muster")
	cm.Data = map[string]string{"hostfile": "localhost\n"}
	if _, err := framework.Client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("editing the ConfigMap: %v", err)
	}
	// The hostfile names every worker, running or not (discover_hosts.sh,
	// which names the running ones, has changed as the gang started).
	framework.Eventually(t, "the restarted controller to restore the hostfile", func(ctx context.Context) (string, error) {
		if got := configMap(t, ns, "job-muster").Data["hostfile"]; got != files["hostfile"] {
			return got, fmt.Errorf("hostfile is %q, want %q", got, files["hostfile"])
		}
		return files["hostfile"], nil
	})

	after := versions()
	for what, version := range before {
		if after[what] != version {
			t.Errorf("the restart rewrote the %s (resourceVersion %s, then %s)", what, version, after[what])
		}
	}
	managed := metav1.ListOptions{LabelSelector: podgroup.ManagedByLabel + "=" + podgroup.ManagedBy}
	services, _ := framework.Client.CoreV1().Services(ns).List(context.Background(), managed)
	configMaps, _ := framework.Client.CoreV1().ConfigMaps(ns).List(context.Background(), managed)
	secrets, _ := framework.Client.CoreV1().Secrets(ns).List(context.Background(), managed)
	if len(services.Items) != 1 || len(configMaps.Items) != 1 || len(secrets.Items) != 1 {
		t.Errorf("want one Service, ConfigMap and Secret; have %d, %d and %d", len(services.Items), len(configMaps.Items), len(secrets.Items))
	}
}
