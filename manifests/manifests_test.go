package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/pkg/webhooks"
)

// TestPodGroupCRDIsTheDependencys guards the rule that the CRD is never
// written by hand: it must be byte for byte the one generated in the
// scheduler-plugins module that go.mod pins (`make crds` refreshes it).
func TestPodGroupCRDIsTheDependencys(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins").Output()
	if err != nil {
		t.Fatalf("locating the scheduler-plugins module: %v", err)
	}
	upstream, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
	if err != nil {
		t.Fatalf("reading the generated CRD: %v", err)
	}
	if !bytes.Equal(PodGroupCRD, upstream) {
		t.Errorf("manifests/crds/scheduling.x-k8s.io_podgroups.yaml differs from the pinned scheduler-plugins module; run `make crds`")
	}
}

// TestSchedulerConfigIsValid decodes and validates the configuration the
// way kube-scheduler does at start-up.
func TestSchedulerConfigIsValid(t *testing.T) {
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(SchedulerConfig, nil, nil)
	if err != nil {
		t.Fatalf("decoding scheduler-config.yaml: %v", err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("scheduler-config.yaml decodes to %T, want a KubeSchedulerConfiguration", obj)
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Fatalf("scheduler-config.yaml is invalid: %v", err)
	}
	if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != "muster-scheduler" {
		t.Errorf("profiles = %v, want exactly one, muster-scheduler", profileNames(cfg))
	}
	if !cfg.LeaderElection.LeaderElect {
		t.Errorf("leader election is off; a deployed scheduler needs it on (muster-local turns it off with a flag)")
	}
	if cfg.LeaderElection.ResourceName == "kube-scheduler" {
		t.Errorf("the leader election lease is kube-scheduler's; muster-scheduler would contend with the default scheduler")
	}
}

// TestTheBenchmarkRunsTheShippedProfile: test/perf/config/muster.yaml is
// this profile under the harness's scheduler name, so that `make bench`
// measures what is deployed.
func TestTheBenchmarkRunsTheShippedProfile(t *testing.T) {
	profile := func(data []byte) *config.KubeSchedulerProfile {
		obj, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("decoding: %v", err)
		}
		cfg := obj.(*config.KubeSchedulerConfiguration)
		if len(cfg.Profiles) != 1 {
			t.Fatalf("profiles = %v, want one", profileNames(cfg))
		}
		p := cfg.Profiles[0]
		p.SchedulerName = ""
		return &p
	}
	bench, err := os.ReadFile(filepath.Join("..", "test", "perf", "config", "muster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(profile(SchedulerConfig), profile(bench)); diff != "" {
		t.Errorf("test/perf/config/muster.yaml's profile differs from scheduler-config.yaml's (-shipped +benchmarked):\n%s", diff)
	}
}

// TestSchedulerFeatureGatesAreKnown: the Deployment's --feature-gates name
// gates kube-scheduler 1.37 knows, with NominatedNodeNameForExpectation off
// (the Deployment says why).
func TestSchedulerFeatureGatesAreKnown(t *testing.T) {
	gates, err := SchedulerFeatureGates()
	if err != nil {
		t.Fatal(err)
	}
	known := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	if err := known.Set(gates); err != nil {
		t.Fatalf("--feature-gates=%s: %v", gates, err)
	}
	if known.Enabled(features.NominatedNodeNameForExpectation) {
		t.Errorf("--feature-gates=%s leaves NominatedNodeNameForExpectation on", gates)
	}
}

func profileNames(cfg *config.KubeSchedulerConfiguration) []string {
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	return names
}

// TestExamplesDecode reads every example as the demo and users apply it,
// and checks that the PodGroup webhook accepts each of its PodGroups.
func TestExamplesDecode(t *testing.T) {
	paths, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		objects, err := Objects(data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
		if len(objects) == 0 {
			t.Errorf("%s holds no object", path)
		}
		for _, obj := range objects {
			pg, ok := obj.(*v1alpha1.PodGroup)
			if upstream, isUpstream := obj.(*schedulingv1beta1.PodGroup); isUpstream {
				pg, ok = topology.FromUpstream(upstream), true
			}
			if !ok {
				continue
			}
			if errs := webhooks.Validate(pg); len(errs) > 0 {
				t.Errorf("%s: PodGroup %s would be refused: %v", path, pg.Name, errs.ToAggregate())
			}
		}
	}
}

// webhookConfigurations decodes the webhook configurations.
func webhookConfigurations(t *testing.T) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	objs, err := Objects(WebhookConfigurations)
	if err != nil {
		t.Fatal(err)
	}
	var mutating *admissionregistrationv1.MutatingWebhookConfiguration
	var validating *admissionregistrationv1.ValidatingWebhookConfiguration
	for _, obj := range objs {
		switch obj := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			mutating = obj
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			validating = obj
		}
	}
	if mutating == nil || validating == nil {
		t.Fatalf("webhook-configurations.yaml holds %d objects, want a mutating and a validating configuration", len(objs))
	}
	return mutating, validating
}

// TestEveryPodWebhookIsForMustersPodsOnly: no pod of another scheduler is
// ever sent to muster-controller, whatever its labels, so its outage
// reaches no other pod.
func TestEveryPodWebhookIsForMustersPodsOnly(t *testing.T) {
	mutating, validating := webhookConfigurations(t)
	conditions := map[string][]admissionregistrationv1.MatchCondition{}
	for _, w := range mutating.Webhooks {
		conditions[w.Name] = w.MatchConditions
	}
	for _, w := range validating.Webhooks {
		if w.Rules[0].Resources[0] == "pods" {
			conditions[w.Name] = w.MatchConditions
		}
	}
	if len(conditions) != 5 {
		t.Fatalf("pod webhooks: %v, want pods, jobset-pods, kueue-pod-groups, upstream-pods and pod-updates", conditions)
	}
	want := "object.spec.schedulerName in ['muster-scheduler']"
	for name, conds := range conditions {
		if len(conds) == 0 || conds[0].Name != "scheduled-by-muster" || conds[0].Expression != want {
			t.Errorf("webhook %s: first matchCondition = %v, want scheduled-by-muster: %s", name, conds, want)
		}
	}
}

// TestPodUpdatesSeeEveryPlaceChange: pod-updates is called only when a
// label or annotation a member's place is read from changes; it must name
// every one topology reads.
func TestPodUpdatesSeeEveryPlaceChange(t *testing.T) {
	_, validating := webhookConfigurations(t)
	var expression string
	for _, w := range validating.Webhooks {
		for _, c := range w.MatchConditions {
			if c.Name == "place-changes" {
				expression = c.Expression
			}
		}
	}
	if expression == "" {
		t.Fatal("no webhook has the place-changes matchCondition")
	}
	labels := "['" + strings.Join(topology.IdentityLabels(), "', '") + "'].exists(k"
	annotations := "['" + strings.Join(topology.IdentityAnnotations(), "', '") + "'].exists(k"
	for _, want := range []string{labels, annotations} {
		if !strings.Contains(expression, want) {
			t.Errorf("place-changes does not compare %s…; it is:\n%s", want, expression)
		}
	}
}

// TestEveryPodMonitorScrapesAPortOfItsProgram: each PodMonitor of
// manifests/monitoring selects the pods of one of muster's Deployments and
// scrapes a port those pods name.
func TestEveryPodMonitorScrapesAPortOfItsProgram(t *testing.T) {
	ports := map[string][]string{}
	for _, path := range []string{"scheduler/deployment.yaml", "controller/deployment.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		objects, err := Objects(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, obj := range objects {
			if d, ok := obj.(*appsv1.Deployment); ok {
				name := d.Spec.Template.Labels["app.kubernetes.io/name"]
				for _, c := range d.Spec.Template.Spec.Containers {
					for _, p := range c.Ports {
						ports[name] = append(ports[name], p.Name)
					}
				}
			}
		}
	}
	data, err := os.ReadFile("monitoring/podmonitors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var monitors int
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var monitor struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Selector            struct{ MatchLabels map[string]string }
				PodMetricsEndpoints []struct{ Port string }
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &monitor); err != nil {
			t.Fatal(err)
		}
		if monitor.Kind != "PodMonitor" {
			continue
		}
		monitors++
		program := monitor.Spec.Selector.MatchLabels["app.kubernetes.io/name"]
		if ports[program] == nil {
			t.Errorf("PodMonitor %s selects %q, none of muster's Deployments", monitor.Metadata.Name, program)
		}
		for _, endpoint := range monitor.Spec.PodMetricsEndpoints {
			if !slices.Contains(ports[program], endpoint.Port) {
				t.Errorf("PodMonitor %s scrapes port %q; %s's pods name %v", monitor.Metadata.Name, endpoint.Port, program, ports[program])
			}
		}
	}
	if monitors != 2 {
		t.Errorf("manifests/monitoring has %d PodMonitors, want one per program", monitors)
	}
}
