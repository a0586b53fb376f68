package plugins

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/gang"
	"github.com/muster-dev/muster/pkg/plugins/heldrooms"
	"github.com/muster-dev/muster/pkg/plugins/launchorder"
	"github.com/muster-dev/muster/pkg/plugins/placement"
	"github.com/muster-dev/muster/pkg/plugins/sharedclaims"
)

// TestThePluginsStartNoWatchOfTheirOwn: kube-scheduler starts a dynamic
// informer for every resource a plugin's events name as
// <resource>.<version>.<group>, but for those it watches itself, such as
// ResourceClaims. muster's plugins name none: they hear of PodGroups
// through the group model's one watch. (GangPreemption registers no event
// at all: gangpreemption's own test pins that.)
func TestThePluginsStartNoWatchOfTheirOwn(t *testing.T) {
	for _, plugin := range []fwk.EnqueueExtensions{&gang.Gang{}, &heldrooms.HeldRooms{}, &launchorder.LaunchOrder{}, &placement.Placement{}, &sharedclaims.SharedClaims{}} {
		events, err := plugin.EventsToRegister(context.Background())
		require.NoError(t, err)
		require.NotEmpty(t, events)
		for _, event := range events {
			if event.Event.Resource == fwk.ResourceClaim {
				continue
			}
			assert.False(t, strings.Contains(string(event.Event.Resource), "."),
				"%T registers events of %s, which kube-scheduler watches with an informer of its own", plugin, event.Event.Resource)
		}
	}
}
