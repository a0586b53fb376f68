//go:build bench

// Package perf benchmarks muster-scheduler against the default scheduler
// and scheduler-plugins' Coscheduling with the upstream harness,
// k8s.io/kubernetes/test/integration/scheduler_perf: the same workloads, one
// scheduler profile each, in the same run. `make bench` runs it; the build
// tag keeps it out of `make test`, since benchmarks never fail a test on a
// timing.
package perf

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/ownerscale"
	"github.com/muster-dev/muster/pkg/plugins"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
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
var registry = func() frameworkruntime.Registry {
	// Elastic owners are shrunk as muster-scheduler shrinks them
	// (cmd/scheduler).
	registry := plugins.Registry(func(config *rest.Config) (gangpreemption.OwnerShrinker, error) {
		return ownerscale.NewShrinker(config)
	})
	for name, factory := range registry {
		registry[name] = withPodGroupCRD(factory)
	}
	return registry
}()

func withPodGroupCRD(factory frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
		if err := installPodGroupCRD(ctx, handle.KubeConfig()); err != nil {
			return nil, err
		}
		return factory(ctx, args, handle)
	}
}

// workloadsFile holds the workloads of every profile.
const workloadsFile = "config/performance-config.yaml"

func BenchmarkPerfScheduling(b *testing.B) {
	perf.RunBenchmarkPerfScheduling(b, workloadsFile, "muster", registry, perf.WithPrepareFn(prepare), perf.WithPreRunFn(musterFeatureGates))
}

// musterFeatureGates sets, for muster's workloads, the feature gates
// muster-scheduler's Deployment runs it with, before the harness starts
// its scheduler.
func musterFeatureGates(tCtx ktesting.TContext, _ *perf.Workload) (func(), error) {
	if profileOf(tCtx.TB().Name()) != "muster" {
		return nil, nil
	}
	gates, err := manifests.SchedulerFeatureGates()
	if err != nil {
		return nil, err
	}
	// Parsed as kube-scheduler's --feature-gates flag parses it.
	parsed := map[string]bool{}
	if err := cliflag.NewMapStringBool(&parsed).Set(gates); err != nil {
		return nil, fmt.Errorf("the scheduler's --feature-gates=%s: %w", gates, err)
	}
	overrides := featuregatetesting.FeatureOverrides{}
	for name, enabled := range parsed {
		overrides[featuregate.Feature(name)] = enabled
	}
	featuregatetesting.SetFeatureGatesDuringTest(tCtx.TB(), utilfeature.DefaultFeatureGate, overrides)
	return nil, nil
}

func prepare(tCtx ktesting.TContext) error {
	if err := installPodGroupCRD(tCtx, tCtx.RESTConfig()); err != nil {
		return err
	}
	if profileOf(tCtx.TB().Name()) == "coscheduling" {
		if err := startCoscheduling(tCtx); err != nil {
			return err
		}
	} else if b, ok := tCtx.TB().(*testing.B); ok {
		tCtx.Cleanup(func() { reportBatching(tCtx, b) })
	}
	return startSimulator(tCtx)
}

// reportBatching reports how the in-process scheduler's opportunistic
// batching went over the workload: its attempts (one per pod that reached
// filtering), and how many placed the pod on the node a batch hinted at.
// The harness's scheduler's profile is default-scheduler in every
// workload. Coscheduling is a 1.34 scheduler, which has no batching.
func reportBatching(tCtx ktesting.TContext, b *testing.B) {
	counts, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "scheduler_batch_attempts_total",
		map[string]string{"profile": "default-scheduler"}, "result")
	if err != nil {
		tCtx.Errorf("reading the batching metrics: %v", err)
		return
	}
	var attempts float64
	for _, n := range counts {
		attempts += n
	}
	b.ReportMetric(attempts, "batch_attempts")
	b.ReportMetric(counts["hint_used"], "batch_hint_used")
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
