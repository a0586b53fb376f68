package gangpreemption

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
)

// A preemptor that claims devices through Dynamic Resource Allocation has
// them counted by its dry run here: the profile's DynamicResources filter
// has no PreFilter extensions, so it never sees a victim's devices freed,
// and it is skipped in the dry run. Every other filter decides as ever.

// deviceCountKey holds, in a preemptor's cycle state, what its dry run
// counts devices with.
const deviceCountKey fwk.StateKey = Name + "/devices"

// deviceCount is the cluster's devices and the preemptor's claims to fit
// among them; it is read only, shared by the dry runs of every node.
type deviceCount struct {
	room   *devices.Room
	claims []*resourcev1.ResourceClaim
}

func (d *deviceCount) Clone() fwk.StateData { return d }

// countDevices makes the preemptor's dry run count its devices, if it
// claims any not yet allocated, and says whether it does. The returned func
// undoes it once the preemption is over.
func (pl *GangPreemption) countDevices(state fwk.CycleState, pod *corev1.Pod) (func(), bool, error) {
	claims, ok, err := devices.Claims(pl.handle.SharedDRAManager(), pod)
	if err != nil || !ok {
		return func() {}, false, err
	}
	room, err := devices.NewRoom(pl.handle.SharedDRAManager(), pl.fts, pl.isLive)
	if err != nil {
		return func() {}, false, err
	}
	skipped := state.GetSkipFilterPlugins()
	countIn(state, room, claims)
	return func() {
		state.SetSkipFilterPlugins(skipped)
		state.Delete(deviceCountKey)
	}, true, nil
}

// countIn makes the dry runs of this cycle state count the claims' devices
// in the room, with the DynamicResources filter skipped.
func countIn(state fwk.CycleState, room *devices.Room, claims []*resourcev1.ResourceClaim) {
	devices.SkipFilter(state)
	state.Write(deviceCountKey, &deviceCount{room: room, claims: claims})
}

// devicesFit reports whether the preemptor's devices fit on the node once
// the gone pods have left it: at once when its dry run counts none.
func devicesFit(ctx context.Context, state fwk.CycleState, node *corev1.Node, gone sets.Set[types.UID]) (bool, error) {
	data, err := state.Read(deviceCountKey)
	if err != nil {
		return true, nil
	}
	count := data.(*deviceCount)
	results, err := count.room.Allocate(ctx, node, count.claims, gone)
	return results != nil, err
}

// isLive reports whether the pod of that name and UID exists and is not
// being deleted, as the scheduler's informer last saw it.
func (pl *GangPreemption) isLive(namespace, name string, uid types.UID) bool {
	pod, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return false
	}
	return err != nil || pod.UID == uid && pod.DeletionTimestamp == nil
}

// devicesResolvable reads the nodes DynamicResources turned the preemptor
// away from, for want of devices, as nodes a preemption may make room on:
// DynamicResources calls that unresolvable, since it cannot see a victim's
// devices freed.
type devicesResolvable struct{ fwk.NodeToStatusReader }

// noDevices is DynamicResources' reason for a node whose devices cannot
// meet the pod's claims.
const noDevices = "cannot allocate all claims"

func (r devicesResolvable) Get(node string) *fwk.Status {
	status := r.NodeToStatusReader.Get(node)
	if !wantsDevices(status) {
		return status
	}
	return fwk.NewStatus(fwk.Unschedulable, status.Reasons()...).WithPlugin(status.Plugin())
}

func (r devicesResolvable) NodesForStatusCode(lister fwk.NodeInfoLister, code fwk.Code) ([]fwk.NodeInfo, error) {
	nodes, err := r.NodeToStatusReader.NodesForStatusCode(lister, code)
	if err != nil || code != fwk.Unschedulable && code != fwk.UnschedulableAndUnresolvable {
		return nodes, err
	}
	unresolvable := nodes
	if code == fwk.Unschedulable {
		if unresolvable, err = r.NodeToStatusReader.NodesForStatusCode(lister, fwk.UnschedulableAndUnresolvable); err != nil {
			return nil, err
		}
	}
	keep := code == fwk.Unschedulable
	var out []fwk.NodeInfo
	if keep {
		out = nodes
	}
	for _, node := range unresolvable {
		if wantsDevices(r.NodeToStatusReader.Get(node.Node().Name)) == keep {
			out = append(out, node)
		}
	}
	return out, nil
}

// wantsDevices reports whether the status is DynamicResources' for want of
// devices.
func wantsDevices(status *fwk.Status) bool {
	return status.Code() == fwk.UnschedulableAndUnresolvable && status.Plugin() == devices.FilterName &&
		slices.Contains(status.Reasons(), noDevices)
}

// countDevices makes a gang member's search count its devices, if it
// claims any not yet allocated, and returns those claims.
func (s *gangSearch) countDevices(state fwk.CycleState, member *corev1.Pod) ([]*resourcev1.ResourceClaim, error) {
	if s.devices == nil {
		return nil, nil
	}
	claims, ok, err := devices.Claims(s.pl.handle.SharedDRAManager(), member)
	if err != nil || !ok {
		return nil, err
	}
	countIn(state, s.devices, claims)
	return claims, nil
}

// takeDevices gives a placed member the devices its claims get on its node,
// so that those placed after it count them; false when they get none.
func (s *gangSearch) takeDevices(claims []*resourcev1.ResourceClaim, placed *corev1.Pod) (bool, error) {
	if len(claims) == 0 {
		return true, nil
	}
	node, err := s.snapshot.NodeInfos().Get(placed.Spec.NodeName)
	if err != nil {
		return false, err
	}
	results, err := s.devices.Allocate(s.ctx, node.Node(), claims, nil)
	if err != nil || results == nil {
		return false, err
	}
	s.devices.Take(results)
	return true, nil
}
