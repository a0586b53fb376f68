// Package framework gives an integration test package one real control
// plane (etcd, kube-apiserver, kube-controller-manager, kwok and
// muster-scheduler from bin/) and each test a namespace of its own.
package framework

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
)

// Timeout bounds every wait of a test for the cluster to converge. It is a
// limit that keeps a broken test from hanging, never a measurement.
const Timeout = 2 * time.Minute

var (
	cluster *localcluster.Cluster
	// Config and Client reach the package's cluster as an admin.
	Config *rest.Config
	Client kubernetes.Interface
	// PodGroups reaches the scheduling.x-k8s.io API as an admin.
	PodGroups schedulingclient.Interface
)

// BinDir is where the control plane's binaries are: $MUSTER_BIN_DIR, else
// bin/ at the top of the repository.
func BinDir() string {
	if dir := os.Getenv("MUSTER_BIN_DIR"); dir != "" {
		return dir
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "bin")
}

// KubeVersion is the control plane's Kubernetes version: $MUSTER_KUBE_VERSION,
// which make test-skew sets to the next release's, else empty, bin/'s own
// (localcluster.Options.KubeVersion).
func KubeVersion() string { return os.Getenv("MUSTER_KUBE_VERSION") }

// RunMain is TestMain for a package of integration tests: it starts one
// cluster, runs the tests and stops the cluster again, whether the tests
// pass or fail. configure, when not nil, adjusts the cluster's options.
func RunMain(m *testing.M, configure func(*localcluster.Options)) {
	os.Exit(runMain(m, configure))
}

func runMain(m *testing.M, configure func(*localcluster.Options)) int {
	// controller-runtime's client, with which the cluster installs muster,
	// logs through klog as muster's programs do, rather than warn with a
	// stack trace that no logger was set.
	ctrllog.SetLogger(klog.NewKlogr())
	dir, err := os.MkdirTemp("", "muster-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the cluster directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	opts := localcluster.DefaultOptions(dir, BinDir())
	opts.KubeVersion = KubeVersion()
	if configure != nil {
		configure(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Ports are picked free but bound by the programs a moment later; when
	// packages start clusters side by side, one may lose a port to another.
	// That costs a second start, never a failed run.
	for attempt := 1; ; attempt++ {
		if cluster, err = localcluster.Up(ctx, opts); err == nil {
			break
		}
		if attempt == 2 || !strings.Contains(err.Error(), "address already in use") {
			fmt.Fprintln(os.Stderr, "starting the local cluster:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "starting the local cluster again after a port clash:", err)
	}
	stopOnSignal()

	code := run(m)
	if err := cluster.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local cluster left something behind:", err)
		return 1
	}
	return code
}

func run(m *testing.M) int {
	var err error
	if Config, err = cluster.RESTConfig(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	Config.QPS, Config.Burst = 100, 200
	if Client, err = kubernetes.NewForConfig(Config); err != nil {
		fmt.Fprintln(os.Stderr, "creating the client:", err)
		return 1
	}
	if PodGroups, err = schedulingclient.NewForConfig(Config); err != nil {
		fmt.Fprintln(os.Stderr, "creating the PodGroup client:", err)
		return 1
	}
	return m.Run()
}

// stopOnSignal stops the cluster when the test binary is interrupted.
func stopOnSignal() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "%s: stopping the local cluster\n", sig)
		_ = cluster.Down()
		os.Exit(1)
	}()
}

// Cluster is the package's running cluster.
func Cluster() *localcluster.Cluster { return cluster }

// LogTailOnFailure prints the last lines of a program's log when the test
// fails: the cluster's directory, and the log with it, is gone after the
// run, and CI keeps only what the tests print.
func LogTailOnFailure(t *testing.T, program string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, err := os.ReadFile(filepath.Join(cluster.Dir, "logs", program+".log"))
		if err != nil {
			t.Logf("reading the log of %s: %v", program, err)
			return
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		t.Logf("the last lines of %s's log:\n%s", program, strings.Join(lines[max(0, len(lines)-logTailLines):], "\n"))
	})
}

// Log returns what a program of the cluster has logged so far.
func Log(t *testing.T, program string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Dir, "logs", program+".log"))
	if err != nil {
		t.Fatalf("reading the log of %s: %v", program, err)
	}
	return string(data)
}

// logTailLines is how much of a log LogTailOnFailure prints.
const logTailLines = 60

// NamespaceName is a name for a namespace of the test: its name, cut to
// 50 characters, and a random suffix.
func NamespaceName(t testing.TB) string {
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	return strings.Trim(prefix, "-") + "-" + rand.String(5)
}

// NewNamespace creates a namespace for one test and deletes it when the
// test ends.
func NewNamespace(t testing.TB) string {
	t.Helper()
	name := NamespaceName(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
			return
		}
		// The next test must not find this one's pods holding capacity.
		deletePods(t, name)
	})
	// Pods are refused until the namespace's default ServiceAccount exists.
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		_, err := Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for the default ServiceAccount of %s: %v", name, err)
	}
	return name
}

// PoolLabel and PoolTaint keep a test's own nodes to its own pods.
const PoolLabel = "muster.dev/test-pool"

// NodePool creates count simulated nodes, each with the given allocatable
// CPU, labelled and tainted for the test's namespace so that only pods of
// that test use them; capacity-sensitive tests reason about these nodes
// alone. They are deleted when the test ends, after the namespace's pods:
// a pod left on a deleted node would wait for the pod garbage collector.
func NodePool(t testing.TB, namespace string, count int, cpu string) {
	t.Helper()
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", namespace, i)
		createPoolNode(t, namespace, names[i], cpu, nil)
	}
	waitSchedulable(t, names...)
}

// DevicePool is NodePool with devices: each node publishes that many for
// Dynamic Resource Allocation, as muster-local's nodes do with
// --node-devices. A node's devices go with it.
func DevicePool(t testing.TB, namespace string, count int, cpu string, devices int) {
	t.Helper()
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", namespace, i)
		createPoolNode(t, namespace, names[i], cpu, nil)
		PublishDevices(t, names[i], devices)
	}
	waitSchedulable(t, names...)
}

// PublishDevices makes the node publish that many devices, as
// DevicePool's nodes do.
func PublishDevices(t testing.TB, node string, devices int) {
	t.Helper()
	created, err := Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading node %s: %v", node, err)
	}
	if err := localcluster.PublishDevices(context.Background(), Client, created, devices); err != nil {
		t.Fatal(err)
	}
}

// deletePods deletes the namespace's pods and waits until they are gone.
func deletePods(t testing.TB, namespace string) {
	ctx := context.Background()
	err := Client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		t.Errorf("deleting the pods of %s: %v", namespace, err)
		return
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, pod := range pods.Items {
			left = append(left, fmt.Sprintf("%s (%s, finalizers %v)", pod.Name, pod.Status.Phase, pod.Finalizers))
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("waiting for the pods of %s to go: %v; left: %s", namespace, err, strings.Join(left, ", "))
	}
}

// AddPoolNode adds one node to the test's pool and waits until pods can be
// scheduled to it. When the test ends, the namespace's pods go first, then
// the node.
func AddPoolNode(t testing.TB, namespace, name, cpu string) {
	t.Helper()
	createPoolNode(t, namespace, name, cpu, nil)
	waitSchedulable(t, name)
}

// RackPool creates the test's pool as racks of simulated nodes, each with
// the given allocatable CPU and labelled with its rack under RackLabel:
// for each rack its number of nodes, named <namespace>-<i> as NodePool
// names them, the racks in the order of their names.
func RackPool(t testing.TB, namespace string, racks map[string]int, cpu string) {
	t.Helper()
	var names []string
	for _, rack := range slices.Sorted(maps.Keys(racks)) {
		for range racks[rack] {
			name := fmt.Sprintf("%s-%d", namespace, len(names))
			createPoolNode(t, namespace, name, cpu, map[string]string{RackLabel: rack})
			names = append(names, name)
		}
	}
	waitSchedulable(t, names...)
}

// AddRackNode adds one node of the rack to the test's pool, as AddPoolNode.
func AddRackNode(t testing.TB, namespace, name, cpu, rack string) {
	t.Helper()
	createPoolNode(t, namespace, name, cpu, map[string]string{RackLabel: rack})
	waitSchedulable(t, name)
}

// RacksOf returns the rack of each of the pods' nodes, failing the test for
// a pod that is not bound.
func RacksOf(t *testing.T, namespace string, names []string) map[string]string {
	t.Helper()
	racks := map[string]string{}
	for _, name := range names {
		pod, err := Client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading pod %s: %v", name, err)
		}
		node, err := Client.CoreV1().Nodes().Get(context.Background(), pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading node %q of pod %s: %v", pod.Spec.NodeName, name, err)
		}
		racks[name] = node.Labels[RackLabel]
	}
	return racks
}

// CheckInRack fails the test for each of the pods whose node is not in
// the rack.
func CheckInRack(t *testing.T, namespace string, names []string, rack string) {
	t.Helper()
	for name, got := range RacksOf(t, namespace, names) {
		if got != rack {
			t.Errorf("%s is in %q, want it in %s with the rest of its group", name, got, rack)
		}
	}
}

// RackLabel is the node label RackPool puts its nodes' racks under, as
// muster-local's racks.
const RackLabel = localcluster.RackLabel

func createPoolNode(t testing.TB, namespace, name, cpu string, labels map[string]string) {
	t.Helper()
	resources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(cpu),
		corev1.ResourceMemory:           resource.MustParse("64Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse(localcluster.SimulatedNodeEphemeralStorage),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      withLabels(map[string]string{PoolLabel: namespace, corev1.LabelHostname: name}, labels),
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: PoolLabel, Value: namespace, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources},
	}
	if _, err := Client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() {
		deletePods(t, namespace)
		if err := Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting node %s: %v", name, err)
		}
	})
}

func withLabels(labels, more map[string]string) map[string]string {
	maps.Copy(labels, more)
	return labels
}

// waitSchedulable waits until each node is Ready and rid of the not-ready
// taint that a new node is given until kwok reports it Ready: a test's pods
// created before that would fail their first attempt on a cluster that is
// still starting, and back off.
func waitSchedulable(t testing.TB, names ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			node, err := Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !isSchedulable(node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for nodes %v to be Ready and untainted: %v", names, err)
	}
}

func isSchedulable(node *corev1.Node) bool {
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// MemberPod is a pod of group for muster-scheduler, asking for cpu, named
// <group>-<index>.
func MemberPod(namespace, group string, index int, cpu string) *st.PodWrapper {
	return st.MakePod().Namespace(namespace).Name(fmt.Sprintf("%s-%d", group, index)).
		SchedulerName(localcluster.SchedulerName).
		Label(topology.GroupLabel, group).
		Container("registry.k8s.io/pause:3.10").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu})
}

// CreatePods creates the pods, or fails the test.
func CreatePods(t testing.TB, pods ...*corev1.Pod) {
	t.Helper()
	for _, pod := range pods {
		if _, err := Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
}

// InPool places a pod on the test's node pool.
func InPool(pod *corev1.Pod, namespace string) *corev1.Pod {
	pod.Spec.NodeSelector = map[string]string{PoolLabel: namespace}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
		Key: PoolLabel, Operator: corev1.TolerationOpEqual, Value: namespace, Effect: corev1.TaintEffectNoSchedule,
	})
	return pod
}

// IntruderName is the pod CreateIntruder creates.
const IntruderName = "intruder"

// CreateIntruder creates, on the namespace's node pool, a pod of no group
// for muster-scheduler asking for cpu: another pod of the same priority
// that wants the room a gang holds for a member to come.
func CreateIntruder(t *testing.T, namespace, cpu string) {
	t.Helper()
	intruder := InPool(MemberPod(namespace, "none", 0, cpu).Name(IntruderName).Obj(), namespace)
	delete(intruder.Labels, topology.GroupLabel)
	CreatePods(t, intruder)
}

// CheckIntruderKeptOut fails the test if the intruder was bound: it took
// room held for another member.
func CheckIntruderKeptOut(t *testing.T, namespace string) {
	t.Helper()
	got, err := Client.CoreV1().Pods(namespace).Get(context.Background(), IntruderName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the intruder: %v", err)
	}
	if IsBound(got) {
		t.Errorf("the intruder took the room held for a member to come, on %s", got.Spec.NodeName)
	}
}

// SchedulerMetrics scrapes muster-scheduler's /metrics as the admin and
// returns each sample by its name and labels, as written in the exposition.
func SchedulerMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	endpoint := cluster.Endpoint("muster-scheduler")
	return scrape(t, endpoint+"/metrics", Config.BearerToken)
}

// ControllerMetrics scrapes muster-controller's /metrics, served by
// controller-runtime over plain HTTP: each series by its name and labels.
func ControllerMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	for _, p := range cluster.Processes {
		if p.Name == localcluster.ControllerReplica(0) {
			return scrape(t, p.Metrics, "")
		}
	}
	t.Fatal("the cluster runs no muster-controller")
	return nil
}

// scrape reads the series a /metrics endpoint serves, as the bearer when
// one is given.
func scrape(t *testing.T, url, bearer string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("building the /metrics request: %v", err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	// The scheduler serves a self-signed certificate on loopback.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", url, resp.Status)
	}
	samples := map[string]float64{}
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if value, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			samples[line[:i]] = value
		}
	}
	return samples
}

// CreatePodGroup creates a PodGroup with the annotations, which may be nil.
func CreatePodGroup(t testing.TB, namespace, name string, minMember int32, annotations map[string]string) *v1alpha1.PodGroup {
	t.Helper()
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember},
	}
	created, err := PodGroups.SchedulingV1alpha1().PodGroups(namespace).Create(context.Background(), pg, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", namespace, name, err)
	}
	return created
}

// Eventually polls get until it returns no error, up to Timeout, and
// returns its result; on Timeout it fails the test with the last error.
func Eventually[T any](t testing.TB, what string, get func(context.Context) (T, error)) T {
	t.Helper()
	var result T
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		result, err = get(ctx)
		// A call the deadline cut short says nothing about what is awaited.
		if err != nil && ctx.Err() == nil || last == nil {
			last = err
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
	return result
}

// WithoutPodGroupValidation removes muster-controller's PodGroup webhook
// until the test ends, so that the test can store a PodGroup as a cluster
// without muster's webhooks would: the scheduler must cope with it.
func WithoutPodGroupValidation(t *testing.T) {
	t.Helper()
	configs := Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	config, err := configs.Get(context.Background(), manifests.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the PodGroup webhook: %v", err)
	}
	if err := configs.Delete(context.Background(), config.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("removing the PodGroup webhook: %v", err)
	}
	// The API server sees a change of its webhooks a moment later; a
	// PodGroup only the webhook refuses tells when it has.
	probe := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "probe", Annotations: map[string]string{topology.AnnotationPrefix + "no-such-setting": "x"}}}
	refused := func(ctx context.Context) bool {
		_, err := PodGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}
	t.Cleanup(func() {
		config.ResourceVersion = ""
		if _, err := configs.Create(context.Background(), config, metav1.CreateOptions{}); err != nil {
			t.Errorf("restoring the PodGroup webhook: %v", err)
			return
		}
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
			return refused(ctx), nil
		}); err != nil {
			t.Errorf("waiting for the PodGroup webhook to serve again: %v", err)
		}
	})
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		return !refused(ctx), nil
	}); err != nil {
		t.Fatalf("waiting for the PodGroup webhook to go: %v", err)
	}
}

// WaitForEvent waits for an event with the reason about the named object
// (a pod or a PodGroup) and returns its note.
func WaitForEvent(t *testing.T, namespace, regarding, reason string) string {
	t.Helper()
	var note string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		events, err := Client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", reason).String(),
		})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Regarding.Name == regarding {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event about %s/%s: %v", reason, namespace, regarding, err)
	}
	return note
}

// WatchPods calls observe with every change to the namespace's pods, in the
// order the API server committed them (old is nil the first time a pod is
// seen), from now until the test ends. observe runs on one goroutine.
func WatchPods(t *testing.T, namespace string, observe func(old, pod *corev1.Pod)) {
	t.Helper()
	stop := make(chan struct{})
	lw := cache.NewListWatchFromClient(Client.CoreV1().RESTClient(), "pods", namespace, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(nil, obj.(*corev1.Pod)) },
		UpdateFunc: func(oldObj, obj any) { observe(oldObj.(*corev1.Pod), obj.(*corev1.Pod)) },
	}); err != nil {
		t.Fatalf("watching pods: %v", err)
	}
	go informer.Run(stop)
	t.Cleanup(func() { close(stop) })
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		t.Fatalf("syncing the watch of the pods of %s", namespace)
	}
}

// Timeline records when each pod of a namespace was first seen bound and
// Ready.
type Timeline struct {
	mu           sync.Mutex
	bound, ready map[string]time.Time
}

// WatchTimeline records the namespace's pods until the test ends.
func WatchTimeline(t *testing.T, namespace string) *Timeline {
	tl := &Timeline{bound: map[string]time.Time{}, ready: map[string]time.Time{}}
	WatchPods(t, namespace, func(_, pod *corev1.Pod) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		now := time.Now()
		if _, seen := tl.bound[pod.Name]; !seen && IsBound(pod) {
			tl.bound[pod.Name] = now
		}
		if _, seen := tl.ready[pod.Name]; !seen && IsReady(pod) {
			tl.ready[pod.Name] = now
		}
	})
	return tl
}

// BoundAfterReady fails the test when a pod of later was bound before
// first was Ready, or first was never seen Ready. It waits for the watch
// to have seen each pod of later bound, as the caller may have seen it
// first through another read.
func (tl *Timeline) BoundAfterReady(t *testing.T, first string, later ...string) {
	t.Helper()
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, Timeout, true, func(context.Context) (bool, error) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		for _, pod := range later {
			if _, seen := tl.bound[pod]; !seen {
				return false, nil
			}
		}
		return true, nil
	})
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, pod := range later {
		if ready, ok := tl.ready[first]; !ok || !tl.bound[pod].After(ready) {
			t.Errorf("%s was bound at %s, before %s was Ready at %s", pod,
				tl.bound[pod].Format(time.StampMilli), first, tl.ready[first].Format(time.StampMilli))
		}
	}
}

// WaitForPod polls the pod until cond holds and returns it. It fails the
// test, naming what it waited for and the pod's last state, on Timeout.
func WaitForPod(t *testing.T, namespace, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		pod, err := Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pod
		return cond(pod), nil
	})
	if err != nil {
		status := describe(last)
		if last == nil {
			// Whoever was to create the pod says why it did not in events.
			status += "; warnings in the namespace: " + warnings(namespace)
		}
		t.Fatalf("pod %s/%s never became %s: %v; last status: %s", namespace, name, what, err, status)
	}
	return last
}

// warnings lists the namespace's Warning events, each as kind/name reason:
// note, or says why it cannot.
func warnings(namespace string) string {
	events, err := Client.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String(),
	})
	if err != nil {
		return "cannot list them: " + err.Error()
	}
	if len(events.Items) == 0 {
		return "none"
	}
	var lines []string
	for _, e := range events.Items {
		lines = append(lines, fmt.Sprintf("%s/%s %s: %s", e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note))
	}
	return strings.Join(lines, "; ")
}

func describe(pod *corev1.Pod) string {
	if pod == nil {
		return "never read"
	}
	var conds []string
	for _, c := range pod.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
	}
	return fmt.Sprintf("node=%q phase=%s conditions=[%s]", pod.Spec.NodeName, pod.Status.Phase, strings.Join(conds, "; "))
}

// Condition returns the pod's condition of the given type, or nil.
func Condition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(pod *corev1.Pod) bool {
	c := Condition(pod, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// IsRunning reports whether the pod runs, Ready or not.
func IsRunning(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodRunning }

// IsBound reports whether the pod has been bound to a node.
func IsBound(pod *corev1.Pod) bool { return pod.Spec.NodeName != "" }

// BoundActive lists the names of the namespace's pods that selector
// selects, are bound, and have neither finished nor are being deleted.
func BoundActive(ctx context.Context, namespace, selector string) ([]string, error) {
	pods, err := Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var bound []string
	for _, pod := range pods.Items {
		if IsBound(&pod) && topology.IsActiveMember(&pod) {
			bound = append(bound, pod.Name)
		}
	}
	return bound, nil
}

// PriorityClass creates a PriorityClass of the value for the test, named
// after its namespace and the value, deletes it when the test ends, and
// returns its name.
func PriorityClass(t *testing.T, namespace string, value int32) string {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", namespace, value)}, Value: value}
	if _, err := Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PriorityClass %s: %v", pc.Name, err)
	}
	t.Cleanup(func() {
		if err := Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting PriorityClass %s: %v", pc.Name, err)
		}
	})
	// The API server's Priority admission reads classes from an informer:
	// a pod naming one just created may be refused until it has seen it.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "priority-probe"},
		Spec:       corev1.PodSpec{PriorityClassName: pc.Name, Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}},
	}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		_, err := Client.CoreV1().Pods(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server never admitted a pod of PriorityClass %s: %v", pc.Name, err)
	}
	return pc.Name
}

// Rounds is how many rounds a benchmark runs: the environment variable's
// whole number, or three when it is unset.
func Rounds(b testing.TB, variable string) int {
	v := os.Getenv(variable)
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a whole number from 1", variable, v)
	}
	return n
}

// Parallel calls do for 0 to n-1 on 32 goroutines, as a benchmark sets up
// thousands of objects, and fails b with the first error.
func Parallel(b testing.TB, n int, do func(int) error) {
	b.Helper()
	indices := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range indices {
				if err := do(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		indices <- i
	}
	close(indices)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
