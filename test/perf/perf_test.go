//go:build bench

// Package perf benchmarks muster-scheduler against the default scheduler
// and scheduler-plugins' Coscheduling with the upstream harness,
// k8s.io/kubernetes/test/integration/scheduler_perf: the same workloads, one
// scheduler profile each, in the same run. `make bench` runs it; the build
// tag keeps it out of `make test`, since benchmarks never fail a test on a
// timing.
package perf

import (
	"bytes"
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/ktesting"
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme" // CoschedulingArgs
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/plugins/gang"
	"github.com/muster-dev/muster/pkg/plugins/launchorder"
)

// TestMain sets up the harness's flags and logging. The harness starts
// etcd from $PATH; `make bench` puts bin/ first.
func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// registry holds every out-of-tree plugin a profile may enable. muster's
// plugins wait for their PodGroup informer to sync when they are created,
// as a real scheduler must, and the harness creates the scheduler before
// it calls the prepare hook; so the CRD is also installed just before
// muster's plugins are created, through the handle's client configuration.
var registry = frameworkruntime.Registry{
	gang.Name:         withPodGroupCRD(gang.New),
	launchorder.Name:  withPodGroupCRD(launchorder.New),
	coscheduling.Name: coscheduling.New,
}

func withPodGroupCRD(factory frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, handle framework.Handle) (framework.Plugin, error) {
		if err := installPodGroupCRD(ctx, handle.KubeConfig()); err != nil {
			return nil, err
		}
		return factory(ctx, args, handle)
	}
}

func BenchmarkPerfScheduling(b *testing.B) {
	perf.RunBenchmarkPerfScheduling(b, "config/performance-config.yaml", "muster", registry, perf.WithPrepareFn(prepare))
}

func prepare(tCtx ktesting.TContext) error {
	if strings.Contains(tCtx.TB().Name(), "-coscheduling/") {
		tCtx.Cleanup(collectCoschedulingCaches)
	}
	if err := installPodGroupCRD(tCtx, tCtx.RESTConfig()); err != nil {
		return err
	}
	return startSimulator(tCtx)
}

// collectCoschedulingCaches works around a goroutine leak of Coscheduling,
// in its workloads only, since forced collections cost CPU and heap: its
// go-cache janitors stop only when the garbage collector finalizes their
// caches, and the harness fails a workload that leaves goroutines behind.
// This cleanup runs before the scheduler's teardown, so it keeps collecting
// while the teardown drops the plugin, and stops as soon as no janitor is
// left, before the harness's leak check gives up on its own goroutine.
func collectCoschedulingCaches() {
	go func() {
		for range 100 {
			goruntime.GC()
			time.Sleep(50 * time.Millisecond)
			if !goCacheJanitorsRunning() {
				return
			}
		}
	}()
}

func goCacheJanitorsRunning() bool {
	stacks := make([]byte, 16<<20)
	n := goruntime.Stack(stacks, true)
	return bytes.Contains(stacks[:n], []byte("go-cache.(*janitor).Run"))
}

// installPodGroupCRD installs the PodGroup CRD that both gang plugins read,
// before each workload, and waits until it is served.
func installPodGroupCRD(ctx context.Context, config *rest.Config) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(manifests.PodGroupCRD, crd); err != nil {
		return fmt.Errorf("decoding the PodGroup CRD: %w", err)
	}
	client, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the PodGroup CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
