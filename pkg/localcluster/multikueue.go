package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// MultiKueue is a MultiKueue manager cluster and its worker clusters, side
// by side on loopback, as a platform team runs them past one cluster:
// every cluster runs Kueue and the JobSet controller; each worker is a
// whole muster cluster, where jobs run; the manager only queues them and
// dispatches each, through the AdmissionCheck MultiKueueCheck, to a worker
// with room for it.
type MultiKueue struct {
	Dir     string
	Manager *Cluster
	Workers []*Cluster
}

// MultiKueueFrameworks are the integrations of every Kueue of a
// MultiKueue: the manager watches, on each worker, the kinds of all its
// integrations, and counts a worker lacking one's CRD inactive. Its
// clusters run the JobSet controller and no Kubeflow operator.
var MultiKueueFrameworks = []string{"batch/job", "pod", "jobset.x-k8s.io/jobset"}

// MultiKueueCheck is the AdmissionCheck of the manager that a ClusterQueue
// names to have its workloads run on the workers.
const MultiKueueCheck = "multikueue"

// MultiKueueOptions describe a manager and its workers.
type MultiKueueOptions struct {
	// Dir holds a directory per cluster: manager, worker-1, worker-2, …
	Dir    string
	BinDir string
	// KubeVersion is every cluster's control plane, as Options.KubeVersion.
	KubeVersion string
	// Workers is how many worker clusters run.
	Workers int
	// Worker are the options of each worker; its Dir, BinDir,
	// KubeVersion, Detach and Logf are the MultiKueue's.
	Worker Options
	// Manager configures the manager's dispatching.
	Manager MultiKueueManager
	Detach  bool
	Logf    func(format string, args ...any)
}

// ManagerDir is where in a MultiKueue's directory the manager keeps its
// state; each worker keeps its own in a directory of its name.
const ManagerDir = "manager"

// WorkerName is the name of the i-th worker, from 1: its directory, and
// its MultiKueueCluster and kubeconfig Secret on the manager.
func WorkerName(i int) string { return fmt.Sprintf("worker-%d", i) }

// UpMultiKueue starts the workers, then the manager, and connects the
// manager to each; it returns once the manager sees every worker active.
// On failure it stops whatever it had started.
func UpMultiKueue(ctx context.Context, opts MultiKueueOptions) (m *MultiKueue, err error) {
	if opts.Workers < 1 {
		return nil, fmt.Errorf("--workers=%d: MultiKueue needs at least 1 worker cluster", opts.Workers)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving --dir %q: %w", opts.Dir, err)
	}
	if existing, err := LoadMultiKueue(dir); err == nil && existing.anyRunning() {
		return nil, fmt.Errorf("clusters already run in %s; stop them first with: muster-local multikueue down --dir %s", dir, opts.Dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	m = &MultiKueue{Dir: dir}
	defer func() {
		if err != nil {
			if downErr := m.Down(); downErr != nil {
				err = errors.Join(err, fmt.Errorf("cleaning up after the failed start: %w", downErr))
			}
		}
	}()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	for i := 1; i <= opts.Workers; i++ {
		worker := opts.Worker
		worker.Dir, worker.BinDir, worker.KubeVersion = filepath.Join(dir, WorkerName(i)), opts.BinDir, opts.KubeVersion
		worker.Detach, worker.Logf = opts.Detach, opts.Logf
		logf("worker cluster %s", WorkerName(i))
		c, err := Up(ctx, worker)
		if err != nil {
			return m, fmt.Errorf("starting %s: %w", WorkerName(i), err)
		}
		m.Workers = append(m.Workers, c)
		if err := c.startKueueWithJobSet(ctx, opts.BinDir, KueueOptions{Frameworks: MultiKueueFrameworks}); err != nil {
			return m, fmt.Errorf("%s: %w", WorkerName(i), err)
		}
	}
	// The manager runs no job, and muster's programs there idle: one node
	// is enough.
	manager := DefaultOptions(filepath.Join(dir, ManagerDir), opts.BinDir)
	manager.Nodes, manager.KubeVersion, manager.Detach, manager.Logf = 1, opts.KubeVersion, opts.Detach, opts.Logf
	logf("manager cluster")
	if m.Manager, err = Up(ctx, manager); err != nil {
		return m, fmt.Errorf("starting the manager: %w", err)
	}
	if err := m.Manager.startKueueWithJobSet(ctx, opts.BinDir, KueueOptions{MultiKueue: &opts.Manager, Frameworks: MultiKueueFrameworks}); err != nil {
		return m, fmt.Errorf("manager: %w", err)
	}
	return m, m.connect(ctx)
}

// startKueueWithJobSet runs the JobSet controller, then Kueue, whose
// JobSet integration needs JobSet's CRD.
func (c *Cluster) startKueueWithJobSet(ctx context.Context, binDir string, opts KueueOptions) error {
	if err := c.StartJobSet(ctx, binDir); err != nil {
		return fmt.Errorf("starting the JobSet controller: %w", err)
	}
	if err := c.StartKueue(ctx, binDir, opts); err != nil {
		return fmt.Errorf("starting Kueue: %w", err)
	}
	return nil
}

var (
	multiKueueClusters = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "multikueueclusters"}
	multiKueueConfigs  = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "multikueueconfigs"}
	admissionChecks    = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "admissionchecks"}
)

// connect gives the manager's Kueue each worker: its admin kubeconfig in a
// Secret of Kueue's namespace, a MultiKueueCluster of it, a
// MultiKueueConfig of them all, and the AdmissionCheck MultiKueueCheck;
// and waits until the manager reports each worker, and the check, active.
func (m *MultiKueue) connect(ctx context.Context) error {
	client, err := m.Manager.Clientset()
	if err != nil {
		return err
	}
	config, err := m.Manager.RESTConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	var names []string
	for i, worker := range m.Workers {
		name := WorkerName(i + 1)
		names = append(names, name)
		kubeconfig, err := os.ReadFile(worker.Kubeconfig)
		if err != nil {
			return err
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: KueueNamespace, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
		if _, err := client.CoreV1().Secrets(KueueNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the kubeconfig Secret of %s: %w", name, err)
		}
		if err := create(ctx, dyn.Resource(multiKueueClusters), fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: %[1]s}
spec:
  clusterSource:
    kubeConfig: {location: %[1]s, locationType: Secret}
`, name)); err != nil {
			return err
		}
	}
	clusters, err := json.Marshal(names)
	if err != nil {
		return err
	}
	if err := create(ctx, dyn.Resource(multiKueueConfigs), fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: workers}
spec:
  clusters: %s`, clusters)); err != nil {
		return err
	}
	if err := create(ctx, dyn.Resource(admissionChecks), fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: %s}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: workers}
`, MultiKueueCheck)); err != nil {
		return err
	}
	for _, name := range names {
		if err := waitActive(ctx, dyn.Resource(multiKueueClusters), name); err != nil {
			return err
		}
	}
	return waitActive(ctx, dyn.Resource(admissionChecks), MultiKueueCheck)
}

// create creates the cluster-scoped object of the manifest.
func create(ctx context.Context, resource dynamic.ResourceInterface, manifest string) error {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		return err
	}
	if _, err := resource.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// waitActive waits until the Kueue object's Active condition is True.
func waitActive(ctx context.Context, resource dynamic.ResourceInterface, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
		obj, err := resource.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conditions {
			if c, _ := c.(map[string]any); c["type"] == "Active" {
				last = fmt.Sprintf("%v: %v", c["reason"], c["message"])
				return c["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be active (last: %s): %w", name, last, err)
	}
	return nil
}

// LoadMultiKueue reads the state of the clusters in dir.
func LoadMultiKueue(dir string) (*MultiKueue, error) {
	manager, err := Load(filepath.Join(dir, ManagerDir))
	if err != nil {
		return nil, err
	}
	m := &MultiKueue{Dir: dir, Manager: manager}
	for i := 1; ; i++ {
		worker, err := Load(filepath.Join(dir, WorkerName(i)))
		if err != nil {
			return m, nil
		}
		m.Workers = append(m.Workers, worker)
	}
}

func (m *MultiKueue) anyRunning() bool {
	return slices.ContainsFunc(m.clusters(), (*Cluster).anyRunning)
}

// clusters are the manager, first, and the workers.
func (m *MultiKueue) clusters() []*Cluster {
	var all []*Cluster
	if m.Manager != nil {
		all = append(all, m.Manager)
	}
	return append(all, m.Workers...)
}

// Down stops the manager, so that nothing is dispatched any more, then
// every worker, and removes the directory.
func (m *MultiKueue) Down() error {
	var errs []error
	for _, c := range m.clusters() {
		if err := c.Down(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(m.Dir); err != nil {
		return fmt.Errorf("removing %s: %w", m.Dir, err)
	}
	return nil
}
