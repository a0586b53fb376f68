//go:build bench

// Package cost measures what muster-controller and muster-scheduler cost as
// the cluster grows, on the real control plane with kwok as the kubelet:
// the API requests each makes per minute, counted from the API server's
// audit log, and the CPU and memory of each process, at 100, 1,000 and
// 5,000 nodes with 10 pods on each and 20 elastic groups waiting or
// growing. `make bench-cost` runs it and writes docs/benchmarks-cost.md; the
// build tag keeps it out of `make test`.
package cost

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
	"github.com/muster-dev/muster/test/perf/figures"
)

const (
	// podsPerNode filler pods fill each filler node's CPU exactly.
	podsPerNode = 10
	nodeCPU     = "32"
	fillerCPU   = "3200m"
	// The elastic groups: on a pool of 4 nodes of 32 CPUs, 16 groups run
	// at their min and cannot grow, and 4 wait for room for their min.
	poolNodes     = 4
	elasticGroups = 20
	elasticMin    = 4
	elasticMax    = 16
	workerCPU     = "2"
	// window is how long each size is measured, once muster-scheduler
	// has been quiet for quiet.
	window = 2 * time.Minute
	quiet  = 30 * time.Second
	// elasticWindow is muster-controller's --elastic-window: its default.
	elasticWindow   = 15 * time.Second
	fillerNamespace = "cost-filler"
)

// sizes are the cluster's node counts, reached in turn by adding filler
// nodes: $BENCH_COST_SIZES, else 100, 1,000 and 5,000.
func sizes(b *testing.B) []int {
	spec := os.Getenv("BENCH_COST_SIZES")
	if spec == "" {
		return []int{100, 1000, 5000}
	}
	var out []int
	for _, field := range strings.Fields(spec) {
		n, err := strconv.Atoi(field)
		if err != nil || n <= poolNodes+localcluster.DefaultOptions("", "").Nodes {
			b.Fatalf("BENCH_COST_SIZES=%q: %q is not a node count above the %d nodes the cluster starts with", spec, field, poolNodes+localcluster.DefaultOptions("", "").Nodes)
		}
		out = append(out, n)
	}
	return out
}

var programs = []string{"muster-controller", "muster-scheduler"}

func TestMain(m *testing.M) {
	framework.RunMain(m, func(opts *localcluster.Options) {
		opts.AuditMuster = true
		opts.ElasticWindow = elasticWindow
		opts.StaticNodes = true
	})
}

// measurement is one program's cost at one size.
type measurement struct {
	requestsPerMinute float64
	// byVerb counts the requests of the window by verb and resource.
	byVerb map[string]int
	// cpu is the cores used on average over the window.
	cpu float64
	// rssMiB is the resident memory at the window's end.
	rssMiB float64
	// recordWrites counts the window's writes of a PodGroup's published
	// record (muster-scheduler's patches of PodGroups).
	recordWrites int
}

type row struct {
	nodes, pods int
	cost        map[string]measurement
}

func BenchmarkCost(b *testing.B) {
	ctx := context.Background()
	client := fastClient(b)
	ns := framework.NewNamespace(b)
	framework.NodePool(b, ns, poolNodes, nodeCPU)
	createElasticGroups(b, ns)
	waitForElasticSteadyState(b, ns)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fillerNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating namespace %s: %v", fillerNamespace, err)
	}
	waitForDefaultServiceAccount(b, client, fillerNamespace)
	auditPath := localcluster.AuditLogPath(framework.Cluster().Dir)
	start := time.Now()

	var rows []row
	fillers := 0
	for _, size := range sizes(b) {
		others := countNodes(b, client)
		want := size - (others - fillers)
		addFillers(b, client, fillers, want)
		fillers = want
		b.Logf("%d nodes: waiting for muster-scheduler to be quiet for %s", size, quiet)
		waitForSchedulerQuiet(b, auditPath)
		r := measure(b, client, auditPath)
		r.nodes = countNodes(b, client)
		rows = append(rows, r)
		b.Logf("%d nodes, %d pods: %v", r.nodes, r.pods, r.cost)
		// Written after each size, so that a size the machine cannot
		// hold leaves the figures of those before it.
		checkElasticSteadyState(b, ns)
		write(b, rows, listsSince(b, auditPath, start), recordWrites(b, auditPath))
	}
}

func write(b *testing.B, rows []row, lists map[string]int, records int) {
	if doc := os.Getenv("BENCH_COST_DOC"); doc != "" {
		page := render(rows, lists, records)
		if len(rows) > 1 {
			figure, err := costFigure(rows)
			if err != nil {
				b.Fatal(err)
			}
			path := strings.TrimSuffix(doc, ".md") + "-requests.svg"
			if err := os.WriteFile(path, figure, 0o644); err != nil {
				b.Fatal(err)
			}
			page += fmt.Sprintf("\n![Requests per minute of each program against the cluster's size](%s)\n", filepath.Base(path))
		}
		if err := os.WriteFile(doc, []byte(page), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// costFigure draws each program's requests per minute against the
// cluster's nodes.
func costFigure(rows []row) ([]byte, error) {
	xs := make([]float64, len(rows))
	var series []figures.Series
	for _, program := range []string{"muster-controller", "muster-scheduler"} {
		s := figures.Series{Name: program}
		for i, r := range rows {
			xs[i] = float64(r.nodes)
			s.Values = append(s.Values, []float64{r.cost[program].requestsPerMinute})
		}
		series = append(series, s)
	}
	return figures.Lines("API requests per minute at rest, against the cluster's size", "nodes", "requests per minute", xs, true, series)
}

// fastClient is an admin client that creates thousands of objects quickly.
func fastClient(b *testing.B) kubernetes.Interface {
	config := *framework.Config
	config.QPS, config.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(&config)
	if err != nil {
		b.Fatal(err)
	}
	return client
}

// createElasticGroups makes the 20 elastic groups, each a PodGroup and a
// StatefulSet of workers started at min, as muster-controller's elastic
// scaler grows and shrinks them.
func createElasticGroups(b *testing.B, ns string) {
	for i := range elasticGroups {
		name := fmt.Sprintf("e%d", i)
		framework.CreatePodGroup(b, ns, name, elasticMin, map[string]string{
			topology.RolesAnnotation:   fmt.Sprintf("worker=%d", elasticMax),
			topology.ElasticAnnotation: fmt.Sprintf("%d:%d", elasticMin, elasticMax),
		})
		template := framework.InPool(framework.MemberPod(ns, name, 0, workerCPU).Label(topology.RoleLabel, "worker").Obj(), ns)
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-worker"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr.To[int32](elasticMin),
				ServiceName:         name,
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{topology.GroupLabel: name}},
				Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
			},
		}
		if _, err := framework.Client.AppsV1().StatefulSets(ns).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
			b.Fatalf("creating StatefulSet %s: %v", set.Name, err)
		}
		// Before the pool's cleanup deletes the pods, which the set would
		// create again.
		b.Cleanup(func() {
			if err := framework.Client.AppsV1().StatefulSets(ns).Delete(context.Background(), set.Name, metav1.DeleteOptions{}); err != nil {
				b.Errorf("deleting StatefulSet %s: %v", set.Name, err)
			}
		})
	}
}

// elasticState counts the groups running at their min, bound whole, and
// the members bound in all.
func elasticState(ctx context.Context, ns string) (atMin, bound int, err error) {
	pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	byGroup := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			byGroup[p.Labels[topology.GroupLabel]]++
			bound++
		}
	}
	for _, n := range byGroup {
		if n >= elasticMin {
			atMin++
		}
	}
	return atMin, bound, nil
}

// The pool holds 16 groups at their min: 4 * 32 CPUs / (4 workers * 2).
const groupsThatFit = poolNodes * 32 / (elasticMin * 2)

// waitForElasticSteadyState waits until the pool holds groupsThatFit groups
// at their min and every StatefulSet has created the pods it is scaled to:
// a group the scaler grew before the pool filled has its extra workers,
// pending, and the webhook calls of their creation are behind.
func waitForElasticSteadyState(b *testing.B, ns string) {
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		atMin, bound, err := elasticState(ctx, ns)
		if err != nil || atMin != groupsThatFit || bound != groupsThatFit*elasticMin {
			return false, nil
		}
		sets, err := framework.Client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, set := range sets.Items {
			if set.Status.ObservedGeneration != set.Generation || set.Status.Replicas != *set.Spec.Replicas {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("waiting for %d elastic groups at their min: %v", groupsThatFit, err)
	}
}

// checkElasticSteadyState fails the run unless the groups are as they
// were: what was measured is 16 groups that cannot grow and 4 that wait.
func checkElasticSteadyState(b *testing.B, ns string) {
	atMin, bound, err := elasticState(context.Background(), ns)
	if err != nil {
		b.Fatal(err)
	}
	if atMin != groupsThatFit || bound != groupsThatFit*elasticMin {
		b.Fatalf("the elastic groups changed during the run: %d at min with %d members bound, want %d with %d", atMin, bound, groupsThatFit, groupsThatFit*elasticMin)
	}
}

func waitForDefaultServiceAccount(b *testing.B, client kubernetes.Interface, ns string) {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		b.Fatalf("waiting for the default ServiceAccount of %s: %v", ns, err)
	}
}

func countNodes(b *testing.B, client kubernetes.Interface) int {
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	return len(nodes.Items)
}

// addFillers creates the filler nodes from index from up to to, each with
// podsPerNode pods bound to it that fill its CPU: pods of another
// scheduler's, never muster's.
//
// Fillers are static, as upstream's scheduler_perf nodes are: each node is
// created Ready and each pod is set Running by this benchmark, and no
// kubelet or kwok heartbeats them afterwards (the node lifecycle controller
// gives them a day's grace). kwok on 2 cores cannot heartbeat 5,000 nodes
// while it plays 50,000 pods: it fell minutes behind, and the node
// lifecycle controller evicted the pods of the nodes it had not renewed.
func addFillers(b *testing.B, client kubernetes.Interface, from, to int) {
	b.Logf("adding filler nodes %d to %d, with %d pods each", from, to-1, podsPerNode)
	parallel(b, from, to, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("filler-%d", i)
		if _, err := client.CoreV1().Nodes().Create(ctx, fillerNode(name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
		for j := range podsPerNode {
			pod, err := client.CoreV1().Pods(fillerNamespace).Create(ctx, fillerPod(fmt.Sprintf("%s-%d", name, j), name), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating pod %s-%d: %w", name, j, err)
			}
			pod.Status = runningStatus(pod)
			if _, err := client.CoreV1().Pods(fillerNamespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("setting pod %s Running: %w", pod.Name, err)
			}
		}
		return nil
	})
}

// parallel runs do for each index in [from, to) on 32 workers.
func parallel(b *testing.B, from, to int, do func(context.Context, int) error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	indices := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range indices {
				if err := do(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := from; i < to && ctx.Err() == nil; i++ {
		indices <- i
	}
	close(indices)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		b.Fatal(err)
	}
}

func fillerNode(name string) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(nodeCPU),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelHostname: name, "muster.dev/bench": "filler"},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{
				Type:               corev1.NodeReady,
				Status:             corev1.ConditionTrue,
				Reason:             "StaticFiller",
				LastHeartbeatTime:  metav1.Now(),
				LastTransitionTime: metav1.Now(),
			}},
		},
	}
}

func runningStatus(pod *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	return corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:    pod.Spec.Containers[0].Name,
			Image:   pod.Spec.Containers[0].Image,
			Ready:   true,
			Started: ptr.To(true),
			State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
}

func fillerPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fillerNamespace, Name: name, Labels: map[string]string{"app": "filler"}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fillerCPU)}},
			}},
		},
	}
}

// waitForSchedulerQuiet waits until muster-scheduler has written nothing
// for quiet: each node added sets off a retry of every pending pod, with a
// status patch and an event, and the window measures the cluster at rest,
// not the scheduler catching up. Quiet is measured against the newest
// event in the log, not the clock, since the batched log lags.
func waitForSchedulerQuiet(b *testing.B, auditPath string) {
	var newest, lastWrite time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Second, 15*time.Minute, false, func(context.Context) (bool, error) {
		events, err := readAudit(auditPath)
		if err != nil {
			return false, err
		}
		for _, e := range events {
			at := e.StageTimestamp.Time
			if at.After(newest) {
				newest = at
			}
			if e.program() == "muster-scheduler" && (e.Verb == "patch" || e.Verb == "create") && at.After(lastWrite) {
				lastWrite = at
			}
		}
		return newest.Sub(lastWrite) >= quiet, nil
	})
	if err != nil {
		b.Fatalf("waiting for muster-scheduler to write nothing for %s (last write %s, log up to %s): %v", quiet, lastWrite, newest, err)
	}
}

// measure counts each program's requests, CPU and memory over the window.
func measure(b *testing.B, client kubernetes.Interface, auditPath string) row {
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore := map[string]float64{}
	for _, name := range programs {
		cpuBefore[name] = cpuSeconds(b, pid(b, name))
	}
	from := time.Now()
	time.Sleep(window)
	to := time.Now()
	r := row{pods: len(pods.Items), cost: map[string]measurement{}}
	events := auditEvents(b, auditPath, from, to)
	for _, name := range programs {
		m := measurement{byVerb: map[string]int{}}
		total := 0
		for _, e := range events {
			if e.program() == name {
				m.byVerb[e.Verb+" "+e.ObjectRef.Resource]++
				total++
				if e.writesPublishedRecord() {
					m.recordWrites++
				}
			}
		}
		m.requestsPerMinute = float64(total) / to.Sub(from).Minutes()
		m.cpu = (cpuSeconds(b, pid(b, name)) - cpuBefore[name]) / to.Sub(from).Seconds()
		m.rssMiB = rssMiB(b, pid(b, name))
		r.cost[name] = m
	}
	return r
}

func pid(b *testing.B, program string) int {
	for _, p := range framework.Cluster().Processes {
		if p.Name == program {
			return p.PID
		}
	}
	b.Fatalf("no process %s in the cluster", program)
	return 0
}

// cpuSeconds is the user and system time the process has used.
func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th of them.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return (utime + stime) / ticksPerSecond
}

func rssMiB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS for process %d", pid)
	return 0
}

// auditEvent is what the benchmark reads of an audit event.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
}

// writesPublishedRecord says whether the request is muster-scheduler
// writing a PodGroup's published record: the only PodGroup writes it
// makes besides upstream PodGroups' status, which is a subresource.
func (e auditEvent) writesPublishedRecord() bool {
	return e.program() == "muster-scheduler" && e.ObjectRef.Resource == "podgroups" && e.ObjectRef.Subresource == "" && (e.Verb == "patch" || e.Verb == "update")
}

func (e auditEvent) program() string {
	name, _ := strings.CutPrefix(e.User.Username, "system:serviceaccount:muster-system:")
	return name
}

// auditEvents returns the events of requests completed between from and
// to, once the batched log holds an event past to.
func auditEvents(b *testing.B, path string, from, to time.Time) []auditEvent {
	var events []auditEvent
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		all, err := readAudit(path)
		if err != nil {
			return false, err
		}
		events = events[:0]
		past := false
		for _, e := range all {
			at := e.StageTimestamp.Time
			past = past || at.After(to)
			if !at.Before(from) && !at.After(to) {
				events = append(events, e)
			}
		}
		return past, nil
	})
	if err != nil {
		b.Fatalf("reading the audit log up to %s: %v", to, err)
	}
	return events
}

func readAudit(path string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []auditEvent
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var e auditEvent
			if json.Unmarshal(line, &e) == nil {
				events = append(events, e)
			}
		}
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// listsSince counts, by program and resource, the LISTs made after start.
func listsSince(b *testing.B, path string, start time.Time) map[string]int {
	all, err := readAudit(path)
	if err != nil {
		b.Fatal(err)
	}
	lists := map[string]int{}
	for _, e := range all {
		if e.Verb == "list" && e.StageTimestamp.After(start) {
			lists[e.program()+" "+e.ObjectRef.Resource]++
		}
	}
	return lists
}

// recordWrites counts muster-scheduler's writes of PodGroups' published
// records over the whole run, the groups' admission included.
func recordWrites(b *testing.B, path string) int {
	all, err := readAudit(path)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range all {
		if e.writesPublishedRecord() {
			n++
		}
	}
	return n
}

func render(rows []row, lists map[string]int, records int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Controller and scheduler cost\n\n")
	command := "make bench-cost"
	if spec := os.Getenv("BENCH_COST_SIZES"); spec != "" {
		command = fmt.Sprintf("make bench-cost BENCH_COST_SIZES=%q", spec)
	}
	fmt.Fprintf(&sb, "Generated by `%s` (test/perf/cost) on %s. Do not edit: run it again.\n\n", command, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&sb, "The real control plane with kwok as the kubelet of the pool's nodes, grown to each size in turn by filler nodes of %s CPUs, each with %d pods of another scheduler filling it. ", nodeCPU, podsPerNode)
	fmt.Fprintf(&sb, "Fillers are static, as upstream's scheduler_perf nodes are: created Ready and Running, with no heartbeats (the node lifecycle controller gives them a day's grace), because kwok on this 2-core machine cannot heartbeat 5,000 nodes. So the figures leave out the node status updates a real cluster's kubelets send (one per node every 5 minutes with node leases). ")
	fmt.Fprintf(&sb, "On %d pool nodes, %d elastic groups (%d to %d workers of %s CPUs, StatefulSets that muster-controller scales): the pool holds %d at their min and no more, so none can grow (one that grew before the pool filled keeps its extra workers pending), and %d wait for room for their min. ", poolNodes, elasticGroups, elasticMin, elasticMax, workerCPU, groupsThatFit, elasticGroups-groupsThatFit)
	fmt.Fprintf(&sb, "At each size, once muster-scheduler has written nothing for %s (each node added sets off a retry of every pending pod, with a status patch and an event), a window of %s: requests counted from the API server's audit log (every request of each program's ServiceAccount, watches included), CPU from /proc (cores used on average), memory the resident set at the window's end.\n\n", quiet, window)
	fmt.Fprintf(&sb, "| nodes | pods | program | requests/min | by verb and resource | CPU (cores) | RSS (MiB) |\n|---:|---:|---|---:|---|---:|---:|\n")
	for _, r := range rows {
		for _, name := range programs {
			m := r.cost[name]
			var verbs []string
			for _, v := range slices.Sorted(maps.Keys(m.byVerb)) {
				verbs = append(verbs, fmt.Sprintf("%s %d", v, m.byVerb[v]))
			}
			fmt.Fprintf(&sb, "| %d | %d | %s | %.1f | %s | %.3f | %.0f |\n", r.nodes, r.pods, name, m.requestsPerMinute, strings.Join(verbs, ", "), m.cpu, m.rssMiB)
		}
	}
	fmt.Fprintf(&sb, "\nLISTs after the groups were at rest, through the last window: ")
	if len(lists) == 0 {
		fmt.Fprintf(&sb, "none.\n")
	} else {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(lists)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, lists[k]))
		}
		fmt.Fprintf(&sb, "%s.\n", strings.Join(parts, ", "))
	}
	var atRest []string
	for _, r := range rows {
		atRest = append(atRest, fmt.Sprintf("%d at %d nodes", r.cost["muster-scheduler"].recordWrites, r.nodes))
	}
	fmt.Fprintf(&sb, "\nWrites of the record muster-scheduler publishes on each PodGroup (`%s`, what `kubectl muster` reads): %d over the whole run for its %d groups, their admission and every retry as nodes were added included; in the windows at rest, %s.\n", gangview.PublishedAnnotation, records, elasticGroups, strings.Join(atRest, ", "))
	return sb.String()
}
