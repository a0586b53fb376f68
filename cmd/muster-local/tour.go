package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
)

// tourJob is one framework example: its file, its group, and the member
// whose injected environment the tour shows.
type tourJob struct {
	file, group string
	show        string
	env         []string
	configKey   string
}

var tourJobs = []tourJob{
	{"tensorflow.yaml", "tf-mnist", "tf-mnist-worker-1", []string{"TF_CONFIG"}, ""},
	{"pytorch.yaml", "pt-resnet", "pt-resnet-worker-1", []string{"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NNODES", "PET_NPROC_PER_NODE"}, ""},
	{"pytorch-elastic.yaml", "pt-elastic", "pt-elastic-worker-2", []string{"PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_NNODES", "PET_RDZV_ID"}, ""},
	{"mpi.yaml", "mpi-pi", "mpi-pi-launcher-0", []string{"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_plm_rsh_args"}, "hostfile"},
	{"mxnet.yaml", "mx-cifar", "mx-cifar-worker-1", []string{"DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER", "DMLC_ROLE", "DMLC_WORKER_ID"}, ""},
}

func newTourCommand(dir *string) *cobra.Command {
	var examples, namespace string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "tour",
		Short: "Run every framework example on a running cluster and show how it started",
		Long: `tour applies the TensorFlow, PyTorch, PyTorch elastic, MPI and MXNet
examples to a cluster started with 'up', waits until every job runs, and
prints each one's timeline: the gang admitted, each role bound and Ready in
order, the launch holds, and what muster-controller injected into one pod.
It exits non-zero, saying what went wrong, if a job does not run within
--timeout or a role was bound before its predecessors were up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := localcluster.Load(*dir)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return runTour(ctx, cluster, examples, namespace)
		},
	}
	cmd.Flags().StringVar(&examples, "examples", "manifests/examples", "directory of the example manifests")
	cmd.Flags().StringVar(&namespace, "namespace", "muster-tour", "namespace to run the examples in")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long every job may take to run")
	return cmd
}

// timeline records, as the API server reports them, when each member (by
// hostname) was bound and became Ready, by the tour's clock and in the
// order of the watch.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	seq   int
	pods  map[string]*memberState
}

type memberState struct {
	pod                   *corev1.Pod
	bound, running, ready int
	boundAt, readyAt      time.Duration
}

func (tl *timeline) observe(pod *corev1.Pod) {
	if pod.Spec.Hostname == "" {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.seq++
	m := tl.pods[pod.Spec.Hostname]
	if m == nil {
		m = &memberState{}
		tl.pods[pod.Spec.Hostname] = m
	}
	m.pod = pod
	now := time.Since(tl.start)
	if pod.Spec.NodeName != "" && m.bound == 0 {
		m.bound, m.boundAt = tl.seq, now
	}
	if pod.Status.Phase == corev1.PodRunning && m.running == 0 {
		m.running = tl.seq
	}
	if podutil.IsPodReady(pod) && m.ready == 0 {
		m.ready, m.readyAt = tl.seq, now
	}
}

func runTour(ctx context.Context, cluster *localcluster.Cluster, examples, namespace string) error {
	config, err := cluster.RESTConfig()
	if err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	c, err := client.New(config, client.Options{Scheme: manifests.Scheme()})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}

	tl := &timeline{start: time.Now(), pods: map[string]*memberState{}}
	lw := cache.NewListWatchFromClient(clientset.CoreV1().RESTClient(), "pods", namespace, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tl.observe(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { tl.observe(obj.(*corev1.Pod)) },
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	go informer.Run(ctx.Done())

	groups := map[string]*topology.Topology{}
	for _, job := range tourJobs {
		path := filepath.Join(examples, job.file)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		objects, err := manifests.Objects(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, obj := range objects {
			obj.SetNamespace(namespace)
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("%s: creating %T %s: %w", path, obj, obj.GetName(), err)
			}
			if pg, ok := obj.(*v1alpha1.PodGroup); ok {
				topo, errs := topology.Parse(pg.Annotations)
				if len(errs) > 0 {
					return fmt.Errorf("%s: %w", path, errs.ToAggregate())
				}
				groups[pg.Name] = topo
			}
		}
		fmt.Printf("applied %s\n", path)
	}

	waitErr := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(notRunning(tl, groups)) == 0, nil
	})
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var problems []string
	if waitErr != nil {
		problems = append(problems, notRunning(tl, groups)...)
	}
	events, err := clientset.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing events: %w", err)
	}
	for _, job := range tourJobs {
		problems = append(problems, printJob(context.Background(), c, tl, job, groups[job.group], namespace, events.Items)...)
	}
	if len(problems) > 0 {
		fmt.Println()
		fmt.Println("The tour failed:")
		for _, p := range problems {
			fmt.Println("  " + p)
		}
		return errors.New("not every example ran in order")
	}
	fmt.Println()
	fmt.Println("Every job runs: each gang was admitted whole, and each role was bound only")
	fmt.Println("after the roles before it were Ready.")
	return nil
}

// notRunning lists each member of each group that is not running yet, with
// what its PodScheduled condition says; the caller holds tl.mu.
func notRunning(tl *timeline, groups map[string]*topology.Topology) []string {
	var missing []string
	for group, topo := range groups {
		for _, role := range topo.Roles {
			for i := range topo.Replicas[role] {
				name := topology.MemberName(group, role, i)
				m := tl.pods[name]
				switch {
				case m == nil:
					missing = append(missing, name+": no pod yet")
				case m.running == 0:
					why := string(m.pod.Status.Phase)
					for _, c := range m.pod.Status.Conditions {
						if c.Type == corev1.PodScheduled && c.Message != "" {
							why += ": " + c.Message
						}
					}
					missing = append(missing, name+": "+why)
				}
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// printJob prints one job's timeline and injected environment, and returns
// every member bound before its predecessors reached start-after.
func printJob(ctx context.Context, c client.Client, tl *timeline, job tourJob, topo *topology.Topology, namespace string, events []eventsv1.Event) []string {
	fmt.Printf("\n== %s (%s: %s)\n", job.group, topo.Framework, job.file)
	for _, e := range events {
		if e.Regarding.Name == job.group && e.Reason == gangview.ReasonGangAdmitted {
			fmt.Printf("GangAdmitted: %s\n", e.Note)
		}
	}
	fmt.Printf("%-24s %-10s %8s %8s\n", "MEMBER", "ROLE", "BOUND", "READY")
	var problems []string
	podNames := map[string]string{}
	for _, role := range topo.Roles {
		for i := range topo.Replicas[role] {
			name := topology.MemberName(job.group, role, i)
			m := tl.pods[name]
			if m == nil {
				continue
			}
			podNames[m.pod.Name] = name
			fmt.Printf("%-24s %-10s %8s %8s\n", name, role, since(m.bound, m.boundAt), since(m.ready, m.readyAt))
			problems = append(problems, orderProblems(tl, job.group, topo, role, name, m)...)
		}
	}
	for _, e := range events {
		if member, ok := podNames[e.Regarding.Name]; ok && strings.HasPrefix(e.Reason, "Launch") {
			fmt.Printf("%s %s: %s\n", e.Reason, member, e.Note)
		}
	}
	if m := tl.pods[job.show]; m != nil {
		fmt.Printf("injected into %s:\n", job.show)
		for _, name := range job.env {
			for _, e := range m.pod.Spec.Containers[0].Env {
				if e.Name == name {
					fmt.Printf("  %s=%s\n", e.Name, e.Value)
				}
			}
		}
	}
	if job.configKey != "" {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: job.group + "-muster"}, cm); err == nil {
			fmt.Printf("  /etc/mpi/%s:\n", job.configKey)
			for _, line := range strings.Split(strings.TrimSpace(cm.Data[job.configKey]), "\n") {
				fmt.Printf("    %s\n", line)
			}
		}
	}
	return problems
}

// orderProblems checks that member was bound only after every pod of its
// predecessor roles reached the group's start-after, in watch order.
func orderProblems(tl *timeline, group string, topo *topology.Topology, role, name string, m *memberState) []string {
	if m.bound == 0 {
		return nil
	}
	var problems []string
	for _, predecessor := range topo.Predecessors(role) {
		for i := range topo.Replicas[predecessor] {
			pname := topology.MemberName(group, predecessor, i)
			p := tl.pods[pname]
			reached := 0
			if p != nil {
				switch topo.StartAfter {
				case topology.StartAfterReady:
					reached = p.ready
				case topology.StartAfterRunning:
					reached = p.running
				case topology.StartAfterScheduled:
					reached = p.bound
				}
			}
			if reached == 0 || reached > m.bound {
				problems = append(problems, fmt.Sprintf("%s was bound before %s was %s", name, pname, topo.StartAfter))
			}
		}
	}
	return problems
}

func since(seq int, at time.Duration) string {
	if seq == 0 {
		return "-"
	}
	return fmt.Sprintf("+%.1fs", at.Seconds())
}
