package framework

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/localcluster"
)

// StartKueue runs Kueue in the package's cluster, in front of
// muster-scheduler, once, from the first test that needs it on; jobs that
// name no LocalQueue are not its business, so the tests after it run as
// before.
var StartKueue = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return Cluster().StartKueue(ctx, BinDir(), KueueOptions)
})

// KueueOptions configure the Kueue StartKueue runs; a package sets them
// in its TestMain.
var KueueOptions localcluster.KueueOptions

// QueuedNamespace starts Kueue once, and returns a namespace of the test
// with a pool of nodes of nodeCPU CPUs each (none when nodes is 0) and a
// LocalQueue lq whose ClusterQueue holds quota CPUs (QueueFor); its
// KueueObjects are shown if the test fails.
func QueuedNamespace(t *testing.T, nodes int, nodeCPU, quota string) string {
	t.Helper()
	ns := KueueNamespace(t)
	if nodes > 0 {
		NodePool(t, ns, nodes, nodeCPU)
	}
	QueueFor(t, ns, quota)
	ShowOnFailure(t, ns, KueueObjects)
	return ns
}

// KueueNamespace starts Kueue once, and returns a namespace of the test.
func KueueNamespace(t *testing.T) string {
	t.Helper()
	if err := StartKueue(); err != nil {
		t.Fatalf("starting Kueue: %v", err)
	}
	return NewNamespace(t)
}

// KueueObjects are the kinds of a queued namespace's objects that say
// where its jobs stand, as kubectl get names them.
const KueueObjects = "pods,workloads,podgroups,events"

// QueueFor gives the namespace a LocalQueue, lq, of a ClusterQueue of its
// own whose quota is cpu CPUs of one ResourceFlavor, as a platform team
// gives a team its share; a workload of higher priority preempts one of
// lower priority in it. The cluster-scoped objects go with the test.
func QueueFor(t *testing.T, namespace, cpu string) {
	t.Helper()
	CreateObject(t, "", fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s}
`, namespace))
	clusterQueue(t, namespace, cpu)
}

// TopologyQueueFor is QueueFor whose ResourceFlavor is the namespace's pool
// laid out in the topology of the node labels, coarsest first: Kueue's
// Topology Aware Scheduling places every workload admitted through it,
// those that ask for no topology too, and writes each pod's node into its
// node selector.
func TopologyQueueFor(t *testing.T, namespace, cpu string, levels ...string) {
	t.Helper()
	var nodeLabels strings.Builder
	for _, level := range levels {
		fmt.Fprintf(&nodeLabels, "\n  - nodeLabel: %s", level)
	}
	CreateObject(t, "", fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: %s}
spec:
  levels:%s
`, namespace, nodeLabels.String()))
	CreateObject(t, "", fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s}
spec:
  nodeLabels: {%[2]s: %[1]s}
  topologyName: %[1]s
`, namespace, PoolLabel))
	clusterQueue(t, namespace, cpu)
}

// clusterQueue gives the namespace the LocalQueue lq of a ClusterQueue of
// its name, with cpu CPUs of the ResourceFlavor of its name.
func clusterQueue(t *testing.T, namespace, cpu string) {
	t.Helper()
	CreateObject(t, "", fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: %[1]s
      resources: [{name: cpu, nominalQuota: "%[2]s"}]
`, namespace, cpu))
	CreateObject(t, namespace, fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq}
spec: {clusterQueue: %s}
`, namespace))
}

// CreateObject creates the object of the manifest in the namespace ("" for a
// cluster-scoped one) and deletes it when the test ends.
func CreateObject(t *testing.T, namespace, manifest string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	gvk := obj.GroupVersionKind()
	// Kueue's kinds are plural as English nouns are: a class, classes; a
	// topology, topologies.
	kind := strings.ToLower(gvk.Kind)
	plural := kind + "s"
	switch {
	case strings.HasSuffix(kind, "s"):
		plural = kind + "es"
	case strings.HasSuffix(kind, "y"):
		plural = strings.TrimSuffix(kind, "y") + "ies"
	}
	resource := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: plural}
	var client dynamic.ResourceInterface = dynamic.NewForConfigOrDie(Config).Resource(resource)
	if namespace != "" {
		client = dynamic.NewForConfigOrDie(Config).Resource(resource).Namespace(namespace)
	}
	if _, err := client.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", gvk.Kind, obj.GetName(), err)
	}
	t.Cleanup(func() {
		if err := client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
	})
}

// WaitForAPodOf waits until the namespace has a pod of the label selector:
// a queued job's first pod, so that a job created after it is queued after
// it (Kueue orders by creation time, to the second).
func WaitForAPodOf(t *testing.T, namespace, selector string) {
	t.Helper()
	Eventually(t, "a pod of "+selector, func(ctx context.Context) (int, error) {
		pods, err := Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			return 0, fmt.Errorf("no pod yet (%v)", err)
		}
		return len(pods.Items), nil
	})
}

// WatchNoneBefore watches the namespace's pods, in the order the API server
// committed them, for a pod that later selects seen before any pod that
// done selects: a job Kueue should have held back until another ended. It
// returns a function that names the first such pod, "" for none.
func WatchNoneBefore(t *testing.T, namespace string, done, later func(*corev1.Pod) bool) func() string {
	t.Helper()
	var mu sync.Mutex
	ended, early := false, ""
	WatchPods(t, namespace, func(_, pod *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case done(pod):
			ended = true
		case later(pod) && !ended && early == "":
			early = pod.Name
		}
	})
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return early
	}
}

// ShowOnFailure logs the namespace's objects of the kinds named (as
// kubectl get names them) when the test fails.
func ShowOnFailure(t *testing.T, namespace, kinds string) {
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command(filepath.Join(BinDir(), "kubectl"), "--kubeconfig", Cluster().Kubeconfig, "-n", namespace,
				"get", kinds, "-o", "wide").CombinedOutput()
			t.Logf("the namespace as the test failed:\n%s", out)
		}
	})
}
