package placement

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
)

// A domain's trial counts the devices its members claim through Dynamic
// Resource Allocation, as the profile's DynamicResources filter cannot:
// that filter allocates against the cluster's devices alone, so every
// member the trial placed before leaves them as free as they were, and a
// rack of 8 devices seemed to hold 10 members of one each. A member that
// claims devices not yet allocated has the filter skipped in its trial,
// and its claims allocated by kube-scheduler's allocator (devices.Room)
// beside the devices allocated and those the trial gave the members
// before it; a late member's stand-in claims what its pod template does
// (topology.LateDevices). A claim that members share is allocated once,
// and a member that shares it goes only where its allocation can be used.

// trialDevices is the devices of one choice of a domain, for its trials.
type trialDevices struct {
	room *devices.Room
	dra  fwk.SharedDRAManager
	// late are the claims of the late members' stand-ins, by their UIDs.
	late map[types.UID]*resourcev1.ResourceClaim
	// shared are the node selectors of the claims the trial allocated,
	// by UID; nil where the allocation may be used on any node.
	shared map[types.UID]*corev1.NodeSelector
}

// newTrialDevices reads the cluster's devices for the members' trials, or
// returns nil when no member claims devices or the scheduler allocates
// none.
func (p *Placement) newTrialDevices(members []*corev1.Pod, late map[types.UID]*resourcev1.ResourceClaim) (*trialDevices, error) {
	dra := p.framework.SharedDRAManager()
	if dra == nil || len(late) == 0 && !slices.ContainsFunc(members, func(m *corev1.Pod) bool { return len(m.Spec.ResourceClaims) > 0 }) {
		return nil, nil
	}
	// A device is allocated until kube-controller-manager frees it,
	// whoever its claim was reserved for.
	room, err := devices.NewRoom(dra, p.features, func(string, string, types.UID) bool { return true })
	if err != nil {
		return nil, fmt.Errorf("counting devices: %w", err)
	}
	return &trialDevices{room: room, dra: dra, late: late, shared: map[types.UID]*corev1.NodeSelector{}}, nil
}

// start forgets what an earlier trial allocated.
func (d *trialDevices) start() {
	if d != nil {
		d.room.ForgetTaken()
		clear(d.shared)
	}
}

// claimsOf returns the member's claims the trial counts, and false when it
// counts none: the member claims no devices, or a claim is allocated
// already, which the profile's filter alone decides for.
func (d *trialDevices) claimsOf(member *corev1.Pod) ([]*resourcev1.ResourceClaim, bool, error) {
	if d == nil {
		return nil, false, nil
	}
	if claim, ok := d.late[member.UID]; ok {
		return []*resourcev1.ResourceClaim{claim}, true, nil
	}
	return devices.Claims(d.dra, member)
}

// unmade returns a member's claim not yet made from its template, or an
// error reading one: until kube-controller-manager makes them all, no
// trial can count the gang's devices.
func (d *trialDevices) unmade(members []*corev1.Pod) error {
	if d == nil {
		return nil
	}
	for _, m := range members {
		if _, late := d.late[m.UID]; late {
			continue
		}
		if _, _, err := devices.Claims(d.dra, m); err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
	}
	return nil
}

// take allocates the claims on the node, beside what the trial allocated
// before, and reports whether they all fit; a claim allocated earlier in
// the trial fits where its allocation can be used.
func (d *trialDevices) take(ctx context.Context, node *corev1.Node, claims []*resourcev1.ResourceClaim) (bool, error) {
	var fresh []*resourcev1.ResourceClaim
	for _, claim := range claims {
		selector, allocated := d.shared[claim.UID]
		if !allocated {
			fresh = append(fresh, claim)
			continue
		}
		if selector == nil {
			continue
		}
		on, err := nodeaffinity.NewNodeSelector(selector)
		if err != nil {
			return false, fmt.Errorf("reading the node selector of claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		if !on.Match(node) {
			return false, nil
		}
	}
	if len(fresh) == 0 {
		return true, nil
	}
	results, err := d.room.Allocate(ctx, node, fresh, nil)
	if err != nil || results == nil {
		return false, err
	}
	d.room.Take(results)
	for i, claim := range fresh {
		d.shared[claim.UID] = results[i].NodeSelector
	}
	return true, nil
}

// shortfall says which device classes the members claim more of than the
// domain's nodes have free, "" when none or when no member claims devices.
func (d *trialDevices) shortfall(ctx context.Context, members []*corev1.Pod, dom domain) string {
	if d == nil {
		return ""
	}
	var claims []*resourcev1.ResourceClaim
	for _, m := range members {
		if c, ok, err := d.claimsOf(m); err == nil && ok {
			claims = append(claims, c...)
		}
	}
	d.room.ForgetTaken()
	return d.room.ShortfallIn(ctx, claims, dom.id.String(), nodeNames(dom.nodes))
}
