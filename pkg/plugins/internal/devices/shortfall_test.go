package devices

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
)

func alwaysLive(string, string, types.UID) bool { return true }

// claims are n claims of one device each, not allocated.
func claims(n int) []*resourcev1.ResourceClaim {
	out := make([]*resourcev1.ResourceClaim, n)
	for i := range out {
		out[i] = devicestest.Claim("ns", string(rune('a'+i)))
	}
	return out
}

func TestShortfallNamesTheClassAndTheDevicesFree(t *testing.T) {
	dra, _ := devicestest.Cluster(2) // 4 devices
	dra.Claims = append(dra.Claims, devicestest.Held("ns", "taken", "node-0", "gpu-0", "other"))
	room, err := NewRoom(dra, feature.Features{}, alwaysLive)
	require.NoError(t, err)
	assert.Equal(t, "the claims ask for 5 devices of class "+devicestest.Class+", and 3 of its 4 are free", room.Shortfall(context.Background(), claims(5)))
	assert.Empty(t, room.Shortfall(context.Background(), claims(3)), "3 devices are free for 3 claims")
	shared := claims(3)
	assert.Empty(t, room.Shortfall(context.Background(), append(shared, shared[0])), "a claim two pods share asks for its device once")
}

func TestShortfallCountsTheClaimsOwnDevicesInFlightFree(t *testing.T) {
	dra, _ := devicestest.Cluster(1) // 2 devices
	asked := claims(3)
	// The first two members were reserved in the attempt that failed.
	for i, device := range []string{"gpu-0", "gpu-1"} {
		held := devicestest.Held("ns", asked[i].Name, "node-0", device)
		require.NoError(t, dra.ResourceClaims().SignalClaimPendingAllocation(asked[i].UID, held))
	}
	room, err := NewRoom(dra, feature.Features{}, alwaysLive)
	require.NoError(t, err)
	assert.Equal(t, "the claims ask for 3 devices of class "+devicestest.Class+", and 2 of its 2 are free", room.Shortfall(context.Background(), asked))
}
