// Package launchorder implements the LaunchOrder scheduler plugin: within a
// PodGroup, a pod whose role has predecessors (MPI workers before the
// launcher, parameter servers before workers) waits at Permit, with its
// reservation kept, until every pod of each predecessor role has reached
// the group's start-after state. Next to Gang, the whole gang is reserved at
// once and its roles then bind in order.
package launchorder

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = "LaunchOrder"

var (
	_ fwk.ReservePlugin     = &LaunchOrder{}
	_ fwk.PermitPlugin      = &LaunchOrder{}
	_ fwk.EnqueueExtensions = &LaunchOrder{}
)

// Groups is what LaunchOrder reads of the scheduler's groups, and asks of
// the group model that owns them (group.Model).
type Groups interface {
	Topology(key types.NamespacedName) (*topology.Topology, error)
	Role(key types.NamespacedName, role string) groupstate.RoleCount
	Pending(key types.NamespacedName) []*corev1.Pod
	// Publish has the group's published record written again: its held
	// members changed.
	Publish(key types.NamespacedName)
}

// LaunchOrder holds successors at Permit until their predecessors are up.
type LaunchOrder struct {
	handle fwk.Handle
	groups Groups
	clock  clock.PassiveClock

	mu sync.Mutex
	// held are the successors waiting at Permit, by group. It is rebuilt
	// by Permit itself after a restart.
	held map[types.NamespacedName]map[types.UID]hold
}

type hold struct {
	pod   *corev1.Pod
	since time.Time
}

// New builds the plugin from the framework's handle and the scheduler's
// group model. It takes no args.
func New(ctx context.Context, _ runtime.Object, handle fwk.Handle, groups *group.Model) (fwk.Plugin, error) {
	register()
	l := newLaunchOrder(handle, groups, clock.RealClock{})
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	groups.OnPodGroupChange(l.podGroupHandler(logger))
	groups.OnPodChange(l.podChanged(logger))
	groups.ReadHeldFrom(l.heldNames)
	return l, nil
}

// heldNames are the names of the group's members held at Permit, sorted:
// what the scheduler publishes of its launch holds.
func (l *LaunchOrder) heldNames(key types.NamespacedName) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.held[key]))
	for _, h := range l.held[key] {
		names = append(names, h.pod.Name)
	}
	slices.Sort(names)
	return names
}

func newLaunchOrder(handle fwk.Handle, groups Groups, clk clock.PassiveClock) *LaunchOrder {
	return &LaunchOrder{
		handle: handle,
		groups: groups,
		clock:  clk,
		held:   map[types.NamespacedName]map[types.UID]hold{},
	}
}

// Name returns the plugin's name.
func (l *LaunchOrder) Name() string { return Name }

// Reserve does nothing: a hold begins at Permit.
func (l *LaunchOrder) Reserve(context.Context, fwk.CycleState, *corev1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve forgets a hold that ended without a release: the pod was
// rejected, or its wait timed out.
func (l *LaunchOrder) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) {
	key, grouped, err := groupstate.KeyIn(state)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Unreserving a member", "pod", klog.KObj(pod))
		return
	}
	if !grouped {
		return
	}
	h, held := l.dropHold(key, pod.UID)
	if !held {
		return
	}
	waited := l.clock.Since(h.since)
	if waited >= group.MaxPermitWait {
		note := fmt.Sprintf("held for %s, the longest a Permit wait may last; back to the queue, still waiting for %s",
			waited.Round(time.Second), l.describeUnmet(key, pod))
		klog.FromContext(ctx).Info("Launch hold timed out", "pod", klog.KObj(pod), "waited", waited)
		l.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, gangview.ReasonLaunchHoldTimedOut, "Hold", "%s", note)
	}
}

// Permit holds a pod whose role has predecessors until every pod of those
// roles has reached the group's start-after state. The reservation is kept
// meanwhile, so the pod still counts toward its gang's quorum.
func (l *LaunchOrder) Permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.Status, time.Duration) {
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	if !cycle.Grouped {
		return nil, 0
	}
	key, topo := cycle.Key, cycle.Topology
	if cycle.TopologyErr != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, cycle.TopologyErr.Error()), 0
	}
	if topo == nil {
		return nil, 0
	}
	role, ok := topology.RoleOf(pod)
	if !ok || len(topo.Predecessors(role)) == 0 {
		return nil, 0
	}
	unmet := l.unmet(key, topo, role)
	if len(unmet) == 0 {
		return nil, 0
	}
	l.addHold(key, pod)
	note := "held until " + strings.Join(unmet, ", ")
	klog.FromContext(ctx).V(2).Info("Launch held", "pod", klog.KObj(pod), "waitingFor", unmet)
	l.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeNormal, gangview.ReasonLaunchHeld, "Hold", "%s", note)
	return fwk.NewStatus(fwk.Wait, note), group.MaxPermitWait
}

// addHold records a successor held at Permit.
func (l *LaunchOrder) addHold(key types.NamespacedName, pod *corev1.Pod) {
	defer l.groups.Publish(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key] == nil {
		l.held[key] = map[types.UID]hold{}
	}
	if _, already := l.held[key][pod.UID]; !already {
		reportHeld(1)
	}
	l.held[key][pod.UID] = hold{pod: pod, since: l.clock.Now()}
}

// dropHold forgets a hold, however it ended, and the group's map with its
// last hold.
func (l *LaunchOrder) dropHold(key types.NamespacedName, uid types.UID) (hold, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, held := l.held[key][uid]
	if !held {
		return hold{}, false
	}
	reportHeld(-1)
	defer l.groups.Publish(key)
	delete(l.held[key], uid)
	if len(l.held[key]) == 0 {
		delete(l.held, key)
	}
	return h, true
}

// topology returns the group's topology: nil when its PodGroup does not
// exist (Gang waits for it), or an error naming every problem.
func (l *LaunchOrder) topology(key types.NamespacedName) (*topology.Topology, error) {
	return l.groups.Topology(key)
}

// unmet describes, for each predecessor role of role not yet at start-after,
// how far it is, for example "worker is Ready (2/4)".
func (l *LaunchOrder) unmet(key types.NamespacedName, topo *topology.Topology, role string) []string {
	var unmet []string
	for _, pred := range topo.Predecessors(role) {
		reached := l.groups.Role(key, pred).ReachedCount(topo.StartAfter)
		if want := topo.AdmittedReplicas(pred); reached < want {
			unmet = append(unmet, fmt.Sprintf("%s is %s (%d/%d)", pred, topo.StartAfter, reached, want))
		}
	}
	return unmet
}

func (l *LaunchOrder) describeUnmet(key types.NamespacedName, pod *corev1.Pod) string {
	topo, err := l.topology(key)
	if err != nil || topo == nil {
		return "its PodGroup"
	}
	role, _ := topology.RoleOf(pod)
	return strings.Join(l.unmet(key, topo, role), ", ")
}

// release allows every held pod of the group whose predecessors are now
// up. observedAt is when the scheduler saw the change that may free them.
func (l *LaunchOrder) release(logger klog.Logger, key types.NamespacedName, observedAt time.Time) {
	l.mu.Lock()
	holds := make([]hold, 0, len(l.held[key]))
	for _, h := range l.held[key] {
		holds = append(holds, h)
	}
	l.mu.Unlock()
	if len(holds) == 0 {
		return
	}
	topo, err := l.topology(key)
	if err != nil || topo == nil {
		return
	}
	for _, h := range holds {
		role, _ := topology.RoleOf(h.pod)
		if len(l.unmet(key, topo, role)) > 0 {
			continue
		}
		wp := l.handle.GetWaitingPod(h.pod.UID)
		if _, held := l.dropHold(key, h.pod.UID); !held || wp == nil {
			continue
		}
		wp.Allow(Name)
		now := l.clock.Now()
		reportReleased(now.Sub(observedAt), now.Sub(h.since))
		note := fmt.Sprintf("released after %s: %s", now.Sub(h.since).Round(10*time.Millisecond), strings.Join(predecessorsReached(topo, role), ", "))
		logger.V(2).Info("Launch released", "pod", klog.KObj(h.pod), "held", now.Sub(h.since))
		l.handle.EventRecorder().Eventf(h.pod, nil, corev1.EventTypeNormal, gangview.ReasonLaunchReleased, "Release", "%s", note)
	}
}

func predecessorsReached(topo *topology.Topology, role string) []string {
	var reached []string
	for _, pred := range topo.Predecessors(role) {
		reached = append(reached, fmt.Sprintf("%s is %s (%d/%d)", pred, topo.StartAfter, topo.AdmittedReplicas(pred), topo.AdmittedReplicas(pred)))
	}
	return reached
}
