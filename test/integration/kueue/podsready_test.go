package kueue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/test/integration/framework"
)

// startOperators starts training-operator and the JobSet controller once
// for the package.
var startOperators = sync.OnceValue(func() error {
	if err := framework.StartTrainingOperator(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return framework.Cluster().StartJobSet(ctx, framework.BinDir())
})

// podTemplate is a pod on the test's node pool, scheduled by
// muster-scheduler, asking for one CPU, Ready READY after it starts.
const podTemplate = `
        metadata:
          annotations: {muster.dev/sim-ready-after: READY}
        spec:
          schedulerName: muster-scheduler
          restartPolicy: Never
          nodeSelector: {muster.dev/test-pool: NAMESPACE}
          tolerations: [{key: muster.dev/test-pool, operator: Equal, value: NAMESPACE, effect: NoSchedule}]
          containers:
          - {name: tensorflow, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}`

// jobSetPodTemplate is podTemplate as a JobSet nests it, two levels deeper.
var jobSetPodTemplate = strings.ReplaceAll(podTemplate, "\n", "\n  ")

// orderedJobSet is an MPI-style JobSet in LocalQueue lq: two workers, and
// a launcher JobSet creates once they are Ready (dependsOn), into the room
// muster holds for it.
var orderedJobSet = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: NAME
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  replicatedJobs:
  - name: workers
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:` + jobSetPodTemplate + `
  - name: launcher
    dependsOn: [{name: workers, status: Ready}]
    template:
      spec:
        template:` + jobSetPodTemplate + `
`

// orderedTFJob is a TFJob in LocalQueue lq: a parameter server, and two
// workers muster binds once it is Ready.
const orderedTFJob = `
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: NAME
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template:` + podTemplate + `
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:` + podTemplate + `
`

// TestAPodsReadyTimeoutMustCoverTheLaunchOrder measures the rule of
// docs/kueue.md on Kueue's waitForPodsReady timeout (15 s here), with
// three jobs of two roles admitted at once, each role's pods Ready some
// seconds after they start, each within the timeout:
//   - JobSet "slow" (9 s a role): its launcher starts only once its
//     workers are Ready, so its pods are all Ready after about 18 s, and
//     Kueue evicts it for PodsReadyTimeout;
//   - JobSet "quick" (4 s a role, about 8 s in all) is never evicted;
//   - TFJob "slow-tf" (9 s a role) is never evicted either: Kueue takes a
//     Kubeflow job's pods as ready once the operator says it is Running,
//     which training-operator does once a worker runs, whether or not it
//     is Ready. Its workers are still bound only after its parameter
//     server is Ready.
func TestAPodsReadyTimeoutMustCoverTheLaunchOrder(t *testing.T) {
	if err := startOperators(); err != nil {
		t.Fatalf("starting training-operator and the JobSet controller: %v", err)
	}
	ns := framework.QueuedNamespace(t, 1, "9", "9")
	framework.LogTailOnFailure(t, "kueue")
	seen := framework.WatchTimeline(t, ns)
	for _, job := range []struct {
		name, manifest, readyAfter string
		resource                   schema.GroupVersionResource
	}{
		{"slow", orderedJobSet, "9s", schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}},
		{"quick", orderedJobSet, "4s", schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}},
		{"slow-tf", orderedTFJob, "9s", schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "tfjobs"}},
	} {
		obj := &unstructured.Unstructured{}
		manifest := strings.NewReplacer("NAMESPACE", ns, "NAME", job.name, "READY", job.readyAfter).Replace(job.manifest)
		if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
			t.Fatal(err)
		}
		jobs := dynamic.NewForConfigOrDie(framework.Config).Resource(job.resource).Namespace(ns)
		// The controllers' webhooks serve a moment after they are ready.
		framework.Eventually(t, obj.GetKind()+" "+job.name+" created", func(ctx context.Context) (*unstructured.Unstructured, error) {
			return jobs.Create(ctx, obj, metav1.CreateOptions{})
		})
		// Before the pool's nodes go with the namespace's pods: a job
		// left running makes its operator create its pods again.
		t.Cleanup(func() {
			if err := jobs.Delete(context.Background(), job.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", obj.GetKind(), job.name, err)
			}
		})
	}

	for _, name := range []string{"quick", "slow-tf"} {
		framework.Eventually(t, name+"'s Workload with its pods ready", func(ctx context.Context) (string, error) {
			return workloadCondition(ctx, ns, name, "PodsReady", "True", "")
		})
	}
	framework.Eventually(t, "JobSet slow's Workload evicted for PodsReadyTimeout", func(ctx context.Context) (string, error) {
		return workloadCondition(ctx, ns, "slow", "Evicted", "True", "PodsReadyTimeout")
	})
	seen.BoundAfterReady(t, "slow-tf-ps-0", "slow-tf-worker-0", "slow-tf-worker-1")
	for _, name := range []string{"quick", "slow-tf"} {
		if reason, err := workloadCondition(context.Background(), ns, name, "Evicted", "True", ""); err == nil {
			t.Errorf("%s, whose launch order Kueue's timeout covers, was evicted: %s", name, reason)
		}
	}
}

// workloadCondition returns the reason of the Workload Kueue made for the
// owner, once it has a condition of the type with the status, and the
// reason unless that is empty.
func workloadCondition(ctx context.Context, namespace, owner, conditionType, status, reason string) (string, error) {
	workloads := dynamic.NewForConfigOrDie(framework.Config).Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}).Namespace(namespace)
	list, err := workloads.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, wl := range list.Items {
		if refs := wl.GetOwnerReferences(); len(refs) == 0 || refs[0].Name != owner {
			continue
		}
		conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
		for _, c := range conditions {
			if c, _ := c.(map[string]any); c["type"] == conditionType && c["status"] == status && (reason == "" || c["reason"] == reason) {
				return fmt.Sprint(c["reason"]), nil
			}
		}
		return "", fmt.Errorf("Workload %s: conditions %v", wl.GetName(), conditions)
	}
	return "", fmt.Errorf("no Workload of %s among %d", owner, len(list.Items))
}
