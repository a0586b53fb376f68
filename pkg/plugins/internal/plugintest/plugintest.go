// Package plugintest holds what the plugins' unit tests share.
package plugintest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// Activator stands in for the scheduling queue and records the pods a
// plugin asks it to retry, by namespace/name.
type Activator struct{ Activated []string }

// Activate records the pods.
func (a *Activator) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	for key := range pods {
		a.Activated = append(a.Activated, key)
	}
}

// Permit runs the framework's Permit plugins for the pod as the scheduler
// does: a pod asked to wait becomes a waiting pod.
func Permit(ctx context.Context, fw framework.Framework, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	waits, status := fw.RunPermitPlugins(ctx, state, pod, node)
	if status.IsWait() {
		fw.AddWaitingPod(pod, waits)
	}
	return status
}

// Groups is what a cycle's record is read from: the group model, or a
// test's stand-in for it.
type Groups interface {
	PodGroup(key types.NamespacedName) *v1alpha1.PodGroup
	Topology(key types.NamespacedName) (*topology.Topology, error)
}

// Recorded is a cycle state holding the record Gang's PreFilter, first in
// the profile, leaves for the pod (Record).
func Recorded(groups Groups, pod *corev1.Pod) fwk.CycleState {
	state := framework.NewCycleState()
	Record(state, groups, pod)
	return state
}

// Record leaves in the state the record Gang's PreFilter leaves for the
// pod, a member whose gang's attempt it entered, as groups have its group
// now: for a test that runs a later step without Gang's PreFilter.
func Record(state fwk.CycleState, groups Groups, pod *corev1.Pod) {
	key, grouped := topology.GroupOf(pod)
	c := &groupstate.Cycle{Grouped: grouped, Key: key, Entered: grouped}
	if grouped {
		c.PodGroup = groups.PodGroup(key)
		c.Topology, c.TopologyErr = groups.Topology(key)
	}
	groupstate.Record(state, c)
}
