//go:build bench

package multikueue

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

var (
	multiKueueConfigs = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "multikueueconfigs"}
	admissionChecks   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "admissionchecks"}
)

// benchNodes gives each worker, beside its node of 3 CPUs, that many
// simulated nodes of 4 CPUs, until the benchmark ends.
func benchNodes(b *testing.B, count int) {
	b.Helper()
	for _, w := range workers {
		for i := range count {
			name := fmt.Sprintf("bench-%d", i)
			capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
				Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
			}
			if _, err := w.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
				b.Fatalf("creating node %s in %s: %v", name, w.name, err)
			}
			b.Cleanup(func() { _ = w.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
			framework.Eventually(b, "node "+name+" Ready in "+w.name, func(ctx context.Context) (bool, error) {
				n, err := w.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
						return true, nil
					}
				}
				return false, fmt.Errorf("not Ready and untainted yet")
			})
		}
	}
}

// oneWorkerCheck is an AdmissionCheck of the manager that dispatches to
// worker-1 alone: the same manager, one worker's capacity.
const oneWorkerCheck = "one-worker"

func oneWorker(b *testing.B) {
	b.Helper()
	manager.create(b, multiKueueConfigs, "", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: "+oneWorkerCheck+"}\nspec: {clusters: ["+localcluster.WorkerName(1)+"]}\n")
	manager.create(b, admissionChecks, "", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: "+oneWorkerCheck+"}\nspec:\n  controllerName: kueue.x-k8s.io/multikueue\n  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: "+oneWorkerCheck+"}\n")
	framework.Eventually(b, "AdmissionCheck "+oneWorkerCheck+" active", func(ctx context.Context) (bool, error) {
		check, err := manager.dynamic.Resource(admissionChecks).Get(ctx, oneWorkerCheck, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(check.Object, "status", "conditions")
		for _, c := range conditions {
			if c, _ := c.(map[string]any); c["type"] == "Active" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", conditions)
	})
}

// run submits jobs JobSets of three 1-CPU pods to the manager through the
// check, at once, and waits until the manager says each completed. It
// returns the wall time from the first submission to the last completion,
// and each job's time from its Workload's creation to its admission
// through a worker, as the manager's conditions record them (seconds).
func run(b *testing.B, check string, jobs int) (time.Duration, []float64) {
	b.Helper()
	// Each worker's queue runs four jobs at a time, on its 12 CPUs of
	// bench nodes; the manager's admits them all.
	ns := queuesFor(b, check, strconv.Itoa(3*jobs), "12")
	began := time.Now()
	for i := range jobs {
		manager.create(b, jobSets, ns, launcherJobSet(fmt.Sprintf("job-%d", i), "2s"))
	}
	framework.Eventually(b, fmt.Sprintf("%d JobSets Completed on the manager", jobs), func(ctx context.Context) (int, error) {
		list, err := manager.dynamic.Resource(jobSets).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		done := 0
		for _, js := range list.Items {
			if state, _, _ := unstructured.NestedString(js.Object, "status", "terminalState"); state == "Completed" {
				done++
			}
		}
		if done < jobs {
			return done, fmt.Errorf("%d of %d completed", done, jobs)
		}
		return done, nil
	})
	elapsed := time.Since(began)
	list, err := manager.dynamic.Resource(workloads).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var admission []float64
	for _, wl := range list.Items {
		conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
		for _, c := range conditions {
			if c, _ := c.(map[string]any); c["type"] == "Admitted" {
				at, err := time.Parse(time.RFC3339, fmt.Sprint(c["lastTransitionTime"]))
				if err == nil {
					admission = append(admission, at.Sub(wl.GetCreationTimestamp().Time).Seconds())
				}
			}
		}
	}
	return elapsed, admission
}

func quantile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(values))
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

// BenchmarkMultiKueueJobsPerMinute: jobs per minute through one manager
// dispatching to two workers, against the same manager dispatching to one,
// side by side in one run. Each job is a JobSet of two workers and a late
// launcher, ganged and ordered by muster on its worker; each worker runs
// four at a time. MULTIKUEUE_JOBS jobs (24 by default) per side. The
// figures are the last round's: run it with -benchtime 1x, once per
// figure wanted.
func BenchmarkMultiKueueJobsPerMinute(b *testing.B) {
	jobs := 24
	if v := os.Getenv("MULTIKUEUE_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("MULTIKUEUE_JOBS=%q: want a whole number from 1", v)
		}
		jobs = n
	}
	benchNodes(b, 3)
	oneWorker(b)
	for range b.N {
		two, admissionTwo := run(b, localcluster.MultiKueueCheck, jobs)
		one, admissionOne := run(b, oneWorkerCheck, jobs)
		perMinute := func(d time.Duration) float64 { return float64(jobs) / d.Minutes() }
		b.ReportMetric(perMinute(two), "jobs/min-two-workers")
		b.ReportMetric(perMinute(one), "jobs/min-one-worker")
		b.ReportMetric(perMinute(two)/perMinute(one), "x-two/one")
		b.ReportMetric(quantile(admissionTwo, 0.5), "s-admit-p50-two")
		b.ReportMetric(quantile(admissionTwo, 0.99), "s-admit-p99-two")
		b.ReportMetric(quantile(admissionOne, 0.99), "s-admit-p99-one")
	}
}
