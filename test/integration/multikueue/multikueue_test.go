// Package multikueue tests muster past one cluster: a MultiKueue manager
// and two worker clusters on one machine (localcluster.UpMultiKueue), each
// worker a whole muster cluster, with the real Kueue and the real JobSet
// controller in every cluster.
package multikueue

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// clusters are the manager and the workers, with their clients.
var manager *cluster
var workers []*cluster

type cluster struct {
	name    string
	local   *localcluster.Cluster
	client  kubernetes.Interface
	dynamic dynamic.Interface
}

// workerLostTimeout is how long the manager keeps a workload on a worker it
// has lost before dispatching it anew.
const workerLostTimeout = 20 * time.Second

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "muster-multikueue-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	opts := localcluster.MultiKueueOptions{
		Dir: dir, BinDir: framework.BinDir(), KubeVersion: framework.KubeVersion(), Workers: 2,
		Worker:  localcluster.DefaultOptions("", ""),
		Manager: localcluster.MultiKueueManager{WorkerLostTimeout: workerLostTimeout.String(), GCInterval: "5s"},
	}
	// One node of 3 CPUs each: a worker holds one job of three pods.
	opts.Worker.Nodes, opts.Worker.NodeCPU = 1, "3"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	federation, err := localcluster.UpMultiKueue(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the manager and its workers:", err)
		return 1
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		_ = federation.Down()
		os.Exit(1)
	}()
	code := func() int {
		if manager, err = connect("manager", federation.Manager); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for i, w := range federation.Workers {
			c, err := connect(localcluster.WorkerName(i+1), w)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			workers = append(workers, c)
		}
		return m.Run()
	}()
	if err := federation.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the clusters left something behind:", err)
		return 1
	}
	return code
}

func connect(name string, local *localcluster.Cluster) (*cluster, error) {
	config, err := local.RESTConfig()
	if err != nil {
		return nil, err
	}
	c := &cluster{name: name, local: local}
	if c.client, err = kubernetes.NewForConfig(config); err != nil {
		return nil, err
	}
	if c.dynamic, err = dynamic.NewForConfig(config); err != nil {
		return nil, err
	}
	return c, nil
}

var (
	jobSets        = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	workloads      = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	podGroups      = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	flavors        = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	clusterQueues  = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	localQueues    = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
	namespacedKind = map[schema.GroupVersionResource]bool{jobSets: true, workloads: true, podGroups: true, localQueues: true}
)

// create creates the manifest's object in the cluster, in the namespace
// when its kind is namespaced, and deletes it when the test ends.
func (c *cluster) create(t testing.TB, resource schema.GroupVersionResource, namespace, manifest string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	var client dynamic.ResourceInterface = c.dynamic.Resource(resource)
	if namespacedKind[resource] {
		client = c.dynamic.Resource(resource).Namespace(namespace)
	}
	// Kueue's and JobSet's webhooks serve a moment after they are ready.
	framework.Eventually(t, fmt.Sprintf("%s %s created in %s", obj.GetKind(), obj.GetName(), c.name), func(ctx context.Context) (*unstructured.Unstructured, error) {
		return client.Create(ctx, obj, metav1.CreateOptions{})
	})
	t.Cleanup(func() {
		if err := client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s in %s: %v", obj.GetKind(), obj.GetName(), c.name, err)
		}
	})
}

// queues gives the test a namespace in every cluster, and a LocalQueue lq
// of a ClusterQueue of the namespace's name: on the manager, with room for
// two jobs of 3 CPUs and the MultiKueue check, which dispatches each
// admitted job to a worker; on each worker, with room for one, as much as
// its node.
func queues(t testing.TB) string {
	t.Helper()
	return queuesFor(t, localcluster.MultiKueueCheck, "6", "3")
}

// queuesFor is queues with the manager's ClusterQueue naming the check and
// holding managerCPU CPUs, and each worker's holding workerCPU.
func queuesFor(t testing.TB, check, managerCPU, workerCPU string) string {
	t.Helper()
	ns := framework.NamespaceName(t)
	for _, c := range append([]*cluster{manager}, workers...) {
		if _, err := c.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s in %s: %v", ns, c.name, err)
		}
		t.Cleanup(func() { _ = c.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		quota, checks := workerCPU, ""
		if c == manager {
			quota, checks = managerCPU, "\n  admissionChecksStrategy: {admissionChecks: [{name: "+check+"}]}"
		}
		c.create(t, flavors, "", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: "+ns+"}\n")
		c.create(t, clusterQueues, "", fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}%[3]s
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: %[1]s
      resources: [{name: cpu, nominalQuota: "%[2]s"}]
`, ns, quota, checks))
		c.create(t, localQueues, ns, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: "+ns+"}\n")
	}
	return ns
}

// launcherJobSet is a JobSet in LocalQueue lq of two workers and a
// launcher JobSet creates once they are Ready (dependsOn), each asking for
// one CPU of muster-scheduler; the workers are Ready 3 s after they start,
// and the launcher succeeds runFor after it is Ready.
func launcherJobSet(name, runFor string) string {
	template := func(annotation string) string {
		return fmt.Sprintf(`
          metadata:
            annotations: {%s}
          spec:
            schedulerName: %s
            restartPolicy: Never
            containers:
            - {name: main, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}`, annotation, localcluster.SchedulerName)
	}
	return fmt.Sprintf(`
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  successPolicy: {operator: All, targetReplicatedJobs: [launcher]}
  replicatedJobs:
  - name: workers
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:%s
  - name: launcher
    dependsOn: [{name: workers, status: Ready}]
    template:
      spec:
        template:%s
`, name, template(localcluster.SimReadyAfterAnnotation+": 3s"), template(localcluster.SimRunForAnnotation+": "+runFor))
}

// dispatchedTo waits until the manager's Workload of the JobSet is admitted
// through a worker, not except, and returns that worker.
func dispatchedTo(t *testing.T, namespace, jobSet string, except *cluster) *cluster {
	t.Helper()
	return framework.Eventually(t, "the JobSet "+jobSet+" dispatched to a worker", func(ctx context.Context) (*cluster, error) {
		list, err := manager.dynamic.Resource(workloads).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, wl := range list.Items {
			name, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
			admitted := false
			conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
			for _, c := range conditions {
				if c, _ := c.(map[string]any); c["type"] == "Admitted" && c["status"] == "True" {
					admitted = true
				}
			}
			for _, w := range workers {
				if w.name == name && w != except && admitted {
					return w, nil
				}
			}
		}
		return nil, fmt.Errorf("%d Workloads, none admitted through a worker", len(list.Items))
	})
}

// pods waits until the worker has the JobSet's three pods, the launcher
// among them, bound and not being deleted, and returns them by role.
func (c *cluster) pods(t *testing.T, namespace, jobSet string) map[string][]corev1.Pod {
	t.Helper()
	return framework.Eventually(t, "the three pods of "+jobSet+" bound in "+c.name, func(ctx context.Context) (map[string][]corev1.Pod, error) {
		list, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.JobSetNameLabel + "=" + jobSet})
		if err != nil {
			return nil, err
		}
		byRole := map[string][]corev1.Pod{}
		bound := 0
		for _, pod := range list.Items {
			if framework.IsBound(&pod) && pod.DeletionTimestamp == nil {
				byRole[pod.Labels[topology.JobSetReplicatedJobLabel]] = append(byRole[pod.Labels[topology.JobSetReplicatedJobLabel]], pod)
				bound++
			}
		}
		if bound != 3 || len(byRole["launcher"]) != 1 {
			return nil, fmt.Errorf("%d of 3 bound, %d launchers", bound, len(byRole["launcher"]))
		}
		return byRole, nil
	})
}

// checkGangedAndOrdered checks that muster ganged the JobSet's pods in the
// worker, a PodGroup of minMember 3, and bound its launcher only once both
// workers were Ready.
func (c *cluster) checkGangedAndOrdered(t *testing.T, namespace, jobSet string, byRole map[string][]corev1.Pod) {
	t.Helper()
	pg, err := c.dynamic.Resource(podGroups).Namespace(namespace).Get(context.Background(), jobSet, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the PodGroup of %s in %s: %v", jobSet, c.name, err)
	}
	if minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); minMember != 3 {
		t.Errorf("the PodGroup of %s in %s has minMember %d, want 3", jobSet, c.name, minMember)
	}
	launcher := byRole["launcher"][0]
	scheduled := framework.Condition(&launcher, corev1.PodScheduled)
	if scheduled == nil {
		t.Fatalf("launcher %s has no PodScheduled condition", launcher.Name)
	}
	for _, worker := range byRole["workers"] {
		ready := framework.Condition(&worker, corev1.PodReady)
		if ready == nil || ready.Status != corev1.ConditionTrue || scheduled.LastTransitionTime.Before(&ready.LastTransitionTime) {
			t.Errorf("launcher %s was bound at %v, before worker %s was Ready (%v)", launcher.Name, scheduled.LastTransitionTime, worker.Name, ready)
		}
	}
}

// checkEmpty waits until the cluster holds nothing of the namespace's
// jobs: no JobSet, Workload, PodGroup or pod.
func (c *cluster) checkEmpty(t *testing.T, namespace string) {
	t.Helper()
	var left string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		var found strings.Builder
		for _, resource := range []schema.GroupVersionResource{jobSets, workloads, podGroups} {
			list, err := c.dynamic.Resource(resource).Namespace(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, obj := range list.Items {
				fmt.Fprintf(&found, " %s %s (deleting: %v, finalizers %v);", resource.Resource, obj.GetName(), obj.GetDeletionTimestamp() != nil, obj.GetFinalizers())
			}
		}
		pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, pod := range pods.Items {
			fmt.Fprintf(&found, " pod %s (%s, deleting: %v, finalizers %v);", pod.Name, pod.Status.Phase, pod.DeletionTimestamp != nil, pod.Finalizers)
		}
		left = found.String()
		return left == "", nil
	})
	if err != nil {
		t.Errorf("%s still holds, of %s:%s", c.name, namespace, left)
	}
}

// completed waits until the manager's JobSet says it completed: the
// worker's status, copied back.
func completed(t *testing.T, namespace, jobSet string) {
	t.Helper()
	framework.Eventually(t, "the JobSet "+jobSet+" Completed on the manager", func(ctx context.Context) (string, error) {
		js, err := manager.dynamic.Resource(jobSets).Namespace(namespace).Get(ctx, jobSet, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if state, _, _ := unstructured.NestedString(js.Object, "status", "terminalState"); state != "Completed" {
			return "", fmt.Errorf("terminal state %q", state)
		}
		return "Completed", nil
	})
}

func other(w *cluster) *cluster {
	if w == workers[0] {
		return workers[1]
	}
	return workers[0]
}

// TestAJobSetSubmittedToTheManagerRunsOnAWorkerGangedAndOrdered: a JobSet
// with a late launcher, submitted to the manager, where no JobSet
// controller runs it (Kueue gives it to MultiKueue), is dispatched to a
// worker; there muster gangs its three pods and binds the launcher only
// once both workers are Ready. It completes, the manager's JobSet says so,
// and neither worker keeps anything of it.
func TestAJobSetSubmittedToTheManagerRunsOnAWorkerGangedAndOrdered(t *testing.T) {
	ns := queues(t)
	manager.create(t, jobSets, ns, launcherJobSet("mpi", "2s"))

	worker := dispatchedTo(t, ns, "mpi", nil)
	worker.checkGangedAndOrdered(t, ns, "mpi", worker.pods(t, ns, "mpi"))
	completed(t, ns, "mpi")
	for _, w := range workers {
		w.checkEmpty(t, ns)
	}
	pods, err := manager.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) > 0 {
		t.Errorf("the manager ran pods of the JobSet (%d, %v)", len(pods.Items), err)
	}
}

// TestAJobSetOnAWorkerThatStopsIsDispatchedAgainAndLeavesNothingBehind: a
// JobSet runs on a worker, its launcher bound, when that whole worker
// stops. After the manager's workerLostTimeout it dispatches the JobSet
// again, to the other worker, where muster gangs and orders it anew. The
// stopped worker then runs again while the JobSet still runs on the other.
// Once the JobSet has completed, neither worker keeps anything of it: no
// JobSet, Workload, PodGroup or pod.
//
// Kueue v0.17 (v0.17.0 and v0.17.1) deletes the copy on the worker that came back only then,
// not at once: that copy still says it is admitted, and the manager's
// attempt to take it for the reserving one fails (docs/kueue.md).
func TestAJobSetOnAWorkerThatStopsIsDispatchedAgainAndLeavesNothingBehind(t *testing.T) {
	ns := queues(t)
	manager.create(t, jobSets, ns, launcherJobSet("mpi", "40s"))
	first := dispatchedTo(t, ns, "mpi", nil)
	first.pods(t, ns, "mpi")

	if err := first.local.Stop(); err != nil {
		t.Fatalf("stopping %s: %v", first.name, err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := first.local.Start(context.Background()); err != nil {
				t.Errorf("starting %s again: %v", first.name, err)
			}
		}
	})
	second := dispatchedTo(t, ns, "mpi", first)
	second.checkGangedAndOrdered(t, ns, "mpi", second.pods(t, ns, "mpi"))

	restarted = true
	if err := first.local.Start(context.Background()); err != nil {
		t.Fatalf("starting %s again: %v", first.name, err)
	}
	completed(t, ns, "mpi")
	for _, w := range workers {
		w.checkEmpty(t, ns)
	}
}
