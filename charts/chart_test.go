// Package charts tests the Helm chart charts/muster through Helm's own Go
// packages: it lints as `helm lint` does, and with its default values it
// renders exactly the objects `kubectl apply -k manifests/` applies.
package charts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// TestMain quiets Helm's loader, which says of each file the chart links
// to manifests/ that it follows the link.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// generatedName matches the name of the scheduler's ConfigMap, which each
// tool suffixes with a hash of its content computed its own way.
var generatedName = regexp.MustCompile(`muster-scheduler-config-[a-z0-9]+`)

// objects reads a stream of YAML documents into objects by
// kind/namespace/name, the scheduler ConfigMap's hash suffix cut off.
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	stream = generatedName.ReplaceAllString(stream, "muster-scheduler-config-HASH")
	out := map[string]map[string]any{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(stream, -1) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("reading %q: %v", doc, err)
		}
		if len(obj) == 0 {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		namespace, _ := meta["namespace"].(string)
		key := fmt.Sprint(obj["kind"], "/", namespace, "/", meta["name"])
		if _, dup := out[key]; dup {
			t.Errorf("%s twice", key)
		}
		out[key] = obj
	}
	return out
}

// render renders the chart with values, its templates and its CRDs.
func render(t *testing.T, values map[string]any) map[string]map[string]any {
	t.Helper()
	c, err := loader.Load("muster")
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	top, err := util.ToRenderValues(c, values, common.ReleaseOptions{Name: "muster", Namespace: "muster-system", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	rendered, err := engine.Render(c, top)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	var stream strings.Builder
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		if strings.HasSuffix(name, ".yaml") {
			stream.WriteString("\n---\n" + rendered[name])
		}
	}
	for _, crd := range c.CRDObjects() {
		stream.WriteString("\n---\n" + string(crd.File.Data))
	}
	return objects(t, stream.String())
}

// TestTheChartRendersWhatTheManifestsApply: with its default values, the
// chart's objects are the kustomize base's, each the same.
func TestTheChartRendersWhatTheManifestsApply(t *testing.T) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "../manifests")
	if err != nil {
		t.Fatalf("kustomize build manifests/: %v", err)
	}
	built, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	want := objects(t, string(built))
	got := render(t, nil)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("the chart's objects differ from manifests/' (-manifests +chart):\n%s", diff)
	}
	for key, obj := range want {
		if diff := cmp.Diff(normal(t, obj), normal(t, got[key])); got[key] != nil && diff != "" {
			t.Errorf("%s differs (-manifests +chart):\n%s", key, diff)
		}
	}
}

// normal is obj as JSON reads it back: numbers and empty values alike
// whichever tool wrote them.
func normal(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTheChartLints: helm lint, run as the helm command runs it.
func TestTheChartLints(t *testing.T) {
	for _, values := range []map[string]any{nil, {"monitoring": map[string]any{"enabled": true}}} {
		linter := lint.RunAll("muster", values, "muster-system")
		for _, msg := range linter.Messages {
			if msg.Severity >= support.WarningSev {
				t.Errorf("helm lint (values %v): %s", values, msg)
			}
		}
	}
}

// TestTheChartsValuesReachTheirObjects: each value changes what it is
// for, and only that.
func TestTheChartsValuesReachTheirObjects(t *testing.T) {
	got := render(t, map[string]any{
		"scheduler": map[string]any{
			"image":     map[string]any{"repository": "registry.example/muster-scheduler", "digest": "sha256:0123"},
			"replicas":  3,
			"resources": map[string]any{"requests": map[string]any{"cpu": "2"}},
			"name":      "gangs",
		},
		"controller": map[string]any{"image": map[string]any{"tag": "v1.2.3"}, "replicas": 1},
		"webhooks":   map[string]any{"failurePolicy": "Ignore"},
		"monitoring": map[string]any{"enabled": true},
	})
	scheduler := got["Deployment/muster-system/muster-scheduler"]
	container := path(scheduler, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if container["image"] != "registry.example/muster-scheduler@sha256:0123" {
		t.Errorf("scheduler image %v", container["image"])
	}
	if replicas := path(scheduler, "spec", "replicas"); fmt.Sprint(replicas) != "3" {
		t.Errorf("scheduler replicas %v", replicas)
	}
	if cpu := path(container, "resources", "requests", "cpu"); cpu != "2" {
		t.Errorf("scheduler resources %v", container["resources"])
	}
	controller := got["Deployment/muster-system/muster-controller"]
	ctl := path(controller, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if ctl["image"] != "ghcr.io/muster-dev/muster-controller:v1.2.3" {
		t.Errorf("controller image %v", ctl["image"])
	}
	if !slices.Contains(ctl["args"].([]any), any("--scheduler-name=gangs")) {
		t.Errorf("controller args %v lack --scheduler-name=gangs", ctl["args"])
	}
	config := got["ConfigMap/muster-system/muster-scheduler-config-HASH"]
	if !strings.Contains(fmt.Sprint(path(config, "data", "scheduler-config.yaml")), "schedulerName: gangs") {
		t.Errorf("the scheduler's profile is not named gangs:\n%v", path(config, "data"))
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, w := range path(got[kind+"//muster-controller"], "webhooks").([]any) {
			webhook := w.(map[string]any)
			if webhook["failurePolicy"] != "Ignore" {
				t.Errorf("%s %v has failurePolicy %v", kind, webhook["name"], webhook["failurePolicy"])
			}
			data, _ := json.Marshal(webhook["matchConditions"])
			if strings.Contains(string(data), "muster-scheduler") {
				t.Errorf("%s %v still matches muster-scheduler: %s", kind, webhook["name"], data)
			}
		}
	}
	for _, key := range []string{"PodMonitor/muster-system/muster-scheduler", "PodMonitor/muster-system/muster-controller", "ConfigMap/muster-system/muster-grafana-dashboard", "ServiceAccount/muster-system/muster-metrics-reader"} {
		if got[key] == nil {
			t.Errorf("monitoring enabled renders no %s", key)
		}
	}
}

// path walks obj's maps.
func path(obj any, keys ...string) any {
	for _, key := range keys {
		m, _ := obj.(map[string]any)
		obj = m[key]
	}
	return obj
}
