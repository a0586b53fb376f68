package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/test/integration/framework"
)

// manifestsDir is manifests/ at the top of the repository.
func manifestsDir() string {
	return filepath.Join(framework.BinDir(), "..", "manifests")
}

// TestKustomizeBaseInstalls: the install a cluster admin runs,
// `kubectl apply -k manifests/`, is accepted by the API server as it
// stands, including admission and validation of every object.
func TestKustomizeBaseInstalls(t *testing.T) {
	cmd := exec.Command(filepath.Join(framework.BinDir(), "kubectl"), "--kubeconfig", framework.Cluster().Kubeconfig,
		"apply", "--dry-run=server", "-k", manifestsDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server -k manifests/: %v\n%s", err, out)
	}
	for _, want := range []string{"deployment.apps/muster-scheduler", "deployment.apps/muster-controller", "service/muster-controller-webhook",
		"poddisruptionbudget.policy/muster-scheduler", "mutatingwebhookconfiguration.admissionregistration.k8s.io/muster-controller"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want) + `\S* (created|configured|unchanged) \(server dry run\)`).Match(out) {
			t.Errorf("the dry run did not accept %s:\n%s", want, out)
		}
	}
}

// denial is how the API server words an RBAC refusal of one of muster's
// ServiceAccounts, in the programs' logs.
var denial = regexp.MustCompile(`User \\?"system:serviceaccount:` + manifests.SystemNamespace + `:muster-(scheduler|controller)\\?" cannot [a-z]+ resource`)

// TestManifestsRBACSufficesForAnExampleJob runs the MPI example end to end
// with both programs using the manifests' ServiceAccounts, as every test
// here does, and passing through each permission they hold: the launcher
// first waits for its group (pods/status), the group's Service, ConfigMap
// and SSH Secret are created, the gang is admitted, the launcher is held
// and released, and the status is written. No request of either program
// may have been refused. hack/rbac-mutations.sh removes each rule of
// manifests/rbac in turn and shows that this test then fails.
func TestManifestsRBACSufficesForAnExampleJob(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 5, "8")
	data, err := os.ReadFile(filepath.Join(manifestsDir(), "examples", "mpi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objects, err := manifests.Objects(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(framework.Config, client.Options{Scheme: manifests.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var launcherJob, workerJob client.Object
	for _, obj := range objects {
		obj.SetNamespace(ns)
		if template, ok := podTemplate(obj); ok {
			template.Spec.Tolerations = append(template.Spec.Tolerations, framework.InPool(&corev1.Pod{}, ns).Spec.Tolerations...)
			template.Spec.NodeSelector = framework.InPool(&corev1.Pod{}, ns).Spec.NodeSelector
			if template.Labels["muster.dev/role"] == "launcher" {
				launcherJob = obj
			} else {
				workerJob = obj
			}
			continue
		}
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	if err := c.Create(context.Background(), launcherJob); err != nil {
		t.Fatalf("creating the launcher Job: %v", err)
	}
	framework.WaitForEvent(t, ns, "mpi-pi", "WaitingForMembers")
	if err := c.Create(context.Background(), workerJob); err != nil {
		t.Fatalf("creating the worker Job: %v", err)
	}

	launcher := waitForMember(t, c, ns, "mpi-pi-launcher-0", framework.IsReady)
	if launcher.Spec.Subdomain != "mpi-pi" || len(launcher.Spec.Containers[0].Env) == 0 {
		t.Errorf("the launcher was not given its place in the group: %+v", launcher.Spec)
	}
	framework.WaitForEvent(t, ns, "mpi-pi", "GangAdmitted")
	for _, obj := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mpi-pi"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mpi-pi-muster"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mpi-pi-muster-ssh"}},
	} {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj); err != nil {
			t.Errorf("the group's %T %s: %v", obj, obj.GetName(), err)
		}
	}
	framework.WaitForEvent(t, ns, "mpi-pi", "Phase")

	for _, p := range framework.Cluster().Processes {
		if p.Name != "muster-scheduler" && p.Name != "muster-controller" {
			continue
		}
		log, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range regexp.MustCompile(`.*`+denial.String()+`.*`).FindAll(log, 5) {
			t.Errorf("%s was refused by RBAC: %s", p.Name, line)
		}
	}
}

func podTemplate(obj client.Object) (*corev1.PodTemplateSpec, bool) {
	if job, ok := obj.(*batchv1.Job); ok {
		return &job.Spec.Template, true
	}
	return nil, false
}

// waitForMember waits for the pod whose hostname is name to satisfy cond:
// pods of a Job have generated names, but muster gives each its hostname.
func waitForMember(t *testing.T, c client.Client, namespace, name string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return framework.Eventually(t, "member "+namespace+"/"+name, func(ctx context.Context) (*corev1.Pod, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			if pods.Items[i].Spec.Hostname == name && cond(&pods.Items[i]) {
				return &pods.Items[i], nil
			}
		}
		return nil, fmt.Errorf("no pod with hostname %s in that state yet", name)
	})
}
