package cli

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/test/integration/framework"
)

// dashboard is manifests/monitoring/dashboard.json, as much of it as
// names series.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// seriesName matches the metric names a PromQL expression reads: muster's
// and controller-runtime's.
var seriesName = regexp.MustCompile(`\b(muster_[a-z0-9_]+|controller_runtime_[a-z0-9_]+)\b`)

// TestEveryDashboardQueryNamesASeriesMusterExports scrapes both programs'
// /metrics on the real control plane, after a pod refused for its
// identity, and checks that every query of the Grafana dashboard reads
// series one of them exports: no panel is dead.
func TestEveryDashboardQueryNamesASeriesMusterExports(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.CreatePodGroup(t, ns, "refused", 2, map[string]string{"muster.dev/framework": "mpi", "muster.dev/roles": "launcher=1,worker=1"})
	// A member of a group with roles, without its role: refused, naming
	// the label.
	pod := member(ns, "refused", 0, "1")
	if _, err := framework.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err == nil {
		t.Fatal("a member with no role was admitted")
	}

	data, err := os.ReadFile("../../../manifests/monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("reading the dashboard: %v", err)
	}
	exported := map[string]bool{}
	for _, series := range []map[string]float64{framework.SchedulerMetrics(t), framework.ControllerMetrics(t)} {
		for line := range series {
			name, _, _ := strings.Cut(line, "{")
			exported[name] = true
		}
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, panel := range d.Panels {
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", panel.Title)
		}
		for _, target := range panel.Targets {
			names := seriesName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q reads no series of muster's", panel.Title, target.Expr)
			}
			for _, name := range names {
				if !exported[name] {
					t.Errorf("panel %q: query %q reads %s, which neither program exports", panel.Title, target.Expr, name)
				}
			}
		}
	}
	if !exported["muster_webhook_refusals_total"] {
		t.Error("the refused pod was not counted in muster_webhook_refusals_total")
	}
}
