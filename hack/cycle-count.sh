#!/usr/bin/env bash
# Counts, for one successful scheduling cycle of one gang member through
# muster's plugins (every PreEnqueue, then PreFilter, Filter, Reserve,
# Permit and PreBind), how often the pod's group is derived
# (topology.GroupOf) and its PodGroup looked up (group.Model's PodGroup,
# UpstreamPodGroup, PodGroupsOf and UpstreamPodGroupOf): issue 61's measure of the cycle record. It counts in a
# throwaway worktree of REV (default HEAD), instrumented there, and removes
# it again.
#
#   hack/cycle-count.sh [REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rev=${1:-HEAD}
dir=$(mktemp -d)
trap 'git worktree remove --force "$dir"' EXIT
git worktree add -q --detach "$dir" "$rev"

# Each derivation and lookup adds one to a counter.
perl -0pi -e 's/(func GroupOf\(pod \*corev1\.Pod\) \(types\.NamespacedName, bool\) \{\n)/$1\tDerivations.Add(1)\n/' "$dir/pkg/topology/identity.go"
printf '\n// Derivations counts GroupOf calls (hack/cycle-count.sh).\nvar Derivations atomic.Int64\n' >>"$dir/pkg/topology/identity.go"
perl -0pi -e 's/import \(/import (\n\t"sync\/atomic"/' "$dir/pkg/topology/identity.go"
perl -0pi -e 's/(func \(m \*Model\) (?:Upstream)?PodGroup\(key types\.NamespacedName\) \*[a-z0-9]+\.PodGroup \{\n)/$1\tLookups.Add(1)\n/g' "$dir/pkg/plugins/internal/group/model.go"
# Since the record holds the PodGroup the pod names too: the lookups of both.
perl -0pi -e 's/(func \(m \*Model\) (?:PodGroupsOf\(key types\.NamespacedName, pod|UpstreamPodGroupOf\(pod) \*corev1\.Pod\) [^{]*\{\n)/$1\tLookups.Add(1)\n/g' "$dir/pkg/plugins/internal/group/model.go"
printf '\n// Lookups counts PodGroup lookups (hack/cycle-count.sh).\nvar Lookups atomic.Int64\n' >>"$dir/pkg/plugins/internal/group/model.go"
grep -q '"sync/atomic"' "$dir/pkg/plugins/internal/group/model.go" ||
	perl -0pi -e 's/import \(/import (\n\t"sync\/atomic"/' "$dir/pkg/plugins/internal/group/model.go"

cat >"$dir/pkg/plugins/cyclecount_test.go" <<'GO'
package plugins

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/gang"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
	"github.com/muster-dev/muster/pkg/plugins/heldrooms"
	"github.com/muster-dev/muster/pkg/plugins/internal/frameworktest"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/launchorder"
	"github.com/muster-dev/muster/pkg/plugins/placement"
	"github.com/muster-dev/muster/pkg/plugins/sharedclaims"
	"github.com/muster-dev/muster/pkg/topology"
)

type newPlugin = func(context.Context, runtime.Object, fwk.Handle, *group.Model) (fwk.Plugin, error)

func TestCountOneCycle(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("100")}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w0", UID: "w0", Labels: map[string]string{topology.GroupLabel: "job"}}, Spec: corev1.PodSpec{SchedulerName: topology.SchedulerName, Containers: []corev1.Container{{Name: "c"}}}}
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job"}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}
	c := frameworktest.NewCluster(t, []*corev1.Node{node}, []*corev1.Pod{pod}, []*v1alpha1.PodGroup{pg})
	c.Model.Take(group.Added(pod))
	preemption := gangpreemption.New(func(*rest.Config) (gangpreemption.OwnerShrinker, error) { return nil, nil })
	wrap := func(f newPlugin) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) { return f(ctx, obj, h, c.Model) }
	}
	// The profile's order (manifests/scheduler-config.yaml).
	fw := c.Framework(t,
		tf.RegisterPluginAsExtensions(gang.Name, wrap(gang.New), "PreFilter", "Reserve", "Permit", "PreBind"),
		tf.RegisterPluginAsExtensions(sharedclaims.Name, wrap(sharedclaims.New), "PreFilter"),
		tf.RegisterPluginAsExtensions(heldrooms.Name, wrap(heldrooms.New), "PreFilter", "Filter", "Reserve"),
		tf.RegisterPluginAsExtensions(launchorder.Name, wrap(launchorder.New), "Reserve", "Permit"),
		tf.RegisterPluginAsExtensions(placement.Name, wrap(placement.New), "PreFilter", "Filter"),
	)
	ctx := context.Background()
	derived, looked := topology.Derivations.Load(), group.Lookups.Load()
	count := func(step string, run func()) {
		d, l := topology.Derivations.Load(), group.Lookups.Load()
		run()
		fmt.Printf("%-28s derivations %d  lookups %d\n", step, topology.Derivations.Load()-d, group.Lookups.Load()-l)
	}
	for _, f := range []newPlugin{gang.New, preemption, heldrooms.New, launchorder.New, placement.New, sharedclaims.New} {
		pl, err := f(ctx, nil, fw, c.Model)
		require.NoError(t, err)
		if pe, ok := pl.(fwk.PreEnqueuePlugin); ok {
			count(pl.Name()+" PreEnqueue", func() { require.Nil(t, pe.PreEnqueue(ctx, pod), pl.Name()) })
		}
	}
	state := framework.NewCycleState()
	count("PreFilter", func() {
		_, s, _ := fw.RunPreFilterPlugins(ctx, state, pod)
		require.True(t, s.IsSuccess(), s.Message())
	})
	info, err := c.Snapshot.NodeInfos().Get("n1")
	require.NoError(t, err)
	count("Filter", func() { require.True(t, fw.RunFilterPlugins(ctx, state, pod, info).IsSuccess()) })
	count("Reserve", func() { require.True(t, fw.RunReservePluginsReserve(ctx, state, pod, "n1").IsSuccess()) })
	count("Permit", func() { _, s := fw.RunPermitPlugins(ctx, state, pod, "n1"); require.True(t, s.IsSuccess(), s.Message()) })
	count("PreBind", func() { require.True(t, fw.RunPreBindPlugins(ctx, state, pod, "n1").IsSuccess()) })
	fmt.Printf("%-28s derivations %d  lookups %d\n", "one cycle", topology.Derivations.Load()-derived, group.Lookups.Load()-looked)
}
GO
(cd "$dir" && go test -count=1 -v -run '^TestCountOneCycle$' ./pkg/plugins/) | grep -E '^[A-Za-z ]+ +derivations|^(--- )?FAIL|panic'
