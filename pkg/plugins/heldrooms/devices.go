package heldrooms

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// A late member that claims devices through Dynamic Resource Allocation
// (topology.LateDevices) has them held with its room: kube-scheduler's own
// allocator chooses them on the room's node (findRoom), and heldDevices
// tells the scheduler's DRA tracker they are allocated, as an allocation
// in flight, so that DynamicResources gives them to no other pod. The late
// member's own cycle lends them back: its PreFilter, which the profile
// runs before DynamicResources' (manifests/scheduler-config.yaml),
// withdraws them, and the next cycle's PreFilter holds them again if the
// room is still held. A room given up any other way (taken, released,
// expired, its attempt failed) frees its devices at the next PreFilter,
// before any pod's devices are allocated.

// inMemoryClaimName names the claims heldDevices signals. The tracker
// checks a claim in flight against the claims the API server has, but for
// a claim of this name, which kube-scheduler gives its own in-memory claims
// (those of extended resources backed by devices): a held room's claim is
// in memory only too, and never written.
const inMemoryClaimName = "<extended-resources>"

// heldDevices keeps the DRA tracker's allocations in flight equal to the
// devices of the rooms held. It is read and changed in scheduling cycles
// only (PreFilter and Reserve), one at a time.
type heldDevices struct {
	dra      fwk.SharedDRAManager
	features feature.Features
	// signaled are the rooms whose devices the tracker counts, by the UID
	// of the claim they were signalled as.
	signaled map[*groupstate.Room]types.UID
}

func newHeldDevices(dra fwk.SharedDRAManager, features feature.Features) *heldDevices {
	return &heldDevices{dra: dra, features: features, signaled: map[*groupstate.Room]types.UID{}}
}

// sync makes the tracker count the devices of the rooms held, but those of
// lent, the room of the cycle's own late member.
func (d *heldDevices) sync(logger klog.Logger, held []*groupstate.Room, lent *groupstate.Room) {
	if d.dra == nil {
		return
	}
	claims := d.dra.ResourceClaims()
	for room, uid := range d.signaled {
		if room == lent || !slices.Contains(held, room) {
			claims.MaybeRemoveClaimPendingAllocation(uid, true)
			delete(d.signaled, room)
		}
	}
	for _, room := range held {
		if _, ok := d.signaled[room]; ok || room == lent {
			continue
		}
		uid := uuid.NewUUID()
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: room.Group.Namespace, Name: inMemoryClaimName, UID: uid},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: room.Devices},
			}},
		}
		if err := claims.SignalClaimPendingAllocation(uid, claim); err != nil {
			// The tracker of this release never refuses a claim of this name.
			logger.Error(err, "Holding the devices of a late member's room", "podGroup", room.Group, "role", room.Role, "node", room.Node)
			continue
		}
		d.signaled[room] = uid
	}
}

// holds reports whether any room's devices are held from other pods.
func (d *heldDevices) holds() bool { return len(d.signaled) > 0 }

// room reads the cluster's devices for holding rooms, or nil when the
// scheduler does not allocate devices. A device is counted allocated while
// the tracker counts it, whoever its claim was for.
func (d *heldDevices) room() (*devices.Room, error) {
	if d.dra == nil {
		return nil, nil
	}
	return devices.NewRoom(d.dra, d.features, func(string, string, types.UID) bool { return true })
}

// allocate chooses on the node the devices one pod of the late member
// claims, beside those allocated and those taken for rooms held before it
// in room, and reports whether it could. None are needed when it claims
// none.
func allocate(ctx context.Context, room *devices.Room, node *corev1.Node, key types.NamespacedName, role string, late []topology.LateDevices) ([]resourcev1.DeviceRequestAllocationResult, bool) {
	if len(late) == 0 {
		return nil, true
	}
	if room == nil {
		return nil, false
	}
	results, err := room.Allocate(ctx, node, []*resourcev1.ResourceClaim{topology.Claim(key.Namespace, key.Name+"-"+role, uuid.NewUUID(), late)}, nil)
	if err != nil || len(results) != 1 {
		klog.FromContext(ctx).V(4).Info("A late member's devices do not fit on the node", "podGroup", key, "role", role, "node", node.Name, "err", err)
		return nil, false
	}
	room.Take(results)
	return results[0].Devices.Results, true
}
