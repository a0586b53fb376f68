package placement

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
	"github.com/muster-dev/muster/pkg/plugins/internal/frameworktest"
	"github.com/muster-dev/muster/pkg/topology"
)

// blindDynamicResources passes every node, as the profile's DynamicResources
// filter does in a trial where each member's devices are free in the
// cluster: it never sees the devices the trial gave the members before.
type blindDynamicResources struct{}

func (blindDynamicResources) Name() string { return devices.FilterName }

func (blindDynamicResources) Filter(context.Context, fwk.CycleState, *corev1.Pod, fwk.NodeInfo) *fwk.Status {
	return nil
}

// TestADomainsTrialCountsTheDevicesTheMembersClaim: racks of two nodes of
// two devices each; every member claims one device, a late launcher one
// too. A rack holds a gang only where its devices hold every member's.
func TestADomainsTrialCountsTheDevicesTheMembersClaim(t *testing.T) {
	nodes := []*corev1.Node{racked("a1", "rack-a", 16), racked("a2", "rack-a", 16), racked("b1", "rack-b", 16), racked("b2", "rack-b", 16)}
	tests := []struct {
		name    string
		workers int
		// launcher adds an MPI launcher created late, claiming a device.
		launcher bool
		// taken are devices allocated to other pods, as node/device.
		taken []string
		// unmade: the last worker's claim is not made from its template yet.
		unmade     bool
		wantNodes  []string
		wantStatus string
	}{
		{
			name:    "a gang of four fills the first rack's four devices",
			workers: 4, wantNodes: []string{"a1", "a2"},
		},
		{
			name:    "a gang of five fits no rack of four devices, and says so naming them",
			workers: 5,
			wantStatus: "no topology.kubernetes.io/rack domain has room for the 5 members group team-a/job lacks; the closest, rack-a, has room for 4: " +
				"the claims ask for 5 devices of class gpu, and 4 of rack-a's 4 are free",
		},
		{
			name:    "a member's claim not made yet: no trial, the gang waits for it",
			workers: 4, unmade: true,
			wantStatus: "group team-a/job waits for its members' ResourceClaims, which kube-controller-manager makes from their templates: " +
				`member w3: reading ResourceClaim team-a/w3-gpu: resourceclaims.resource.k8s.io "w3-gpu" not found`,
		},
		{
			name:    "a rack with a device taken does not hold three workers and their late launcher",
			workers: 3, launcher: true, taken: []string{"a1/gpu-0"},
			wantNodes: []string{"b1", "b2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dra := devicestest.On(nodes...)
			for i, d := range tt.taken {
				var node, device string
				_, err := fmt.Sscanf(d, "%2s/%s", &node, &device)
				require.NoError(t, err)
				dra.Claims = append(dra.Claims, devicestest.Held(ns, fmt.Sprintf("other-%d", i), node, device, fmt.Sprintf("other-%d", i)))
			}
			pg := gang(int32(tt.workers), rack)
			workers := members(tt.workers, 1, 0)
			for i, w := range workers {
				claim := fmt.Sprintf("w%d-gpu", i)
				w.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
				if !tt.unmade || i < tt.workers-1 {
					dra.Claims = append(dra.Claims, devicestest.Claim(ns, claim))
				}
			}
			if tt.launcher {
				pg.Spec.MinMember++
				pg.Annotations[topology.FrameworkAnnotation] = "mpi"
				pg.Annotations[topology.RolesAnnotation] = fmt.Sprintf("launcher=1,worker=%d", tt.workers)
				pg.Annotations[topology.LateMembersAnnotation] = `{"launcher":{"requests":{"cpu":"1"},"devices":[{"deviceClassName":"gpu","count":1}]}}`
				for i, w := range workers {
					w.Labels[topology.RoleLabel] = "worker"
					w.Labels[topology.IndexLabel] = fmt.Sprint(i)
				}
			}
			f := deviceFixture(t, nodes, workers, pg, dra)

			got, status := f.preFilter(t, workers[0])
			if tt.wantStatus != "" {
				assert.Equal(t, fwk.Unschedulable, status.Code())
				assert.Equal(t, tt.wantStatus, status.Message())
				return
			}
			require.True(t, status.IsSuccess(), "PreFilter: %v", status)
			assert.ElementsMatch(t, tt.wantNodes, got.UnsortedList())
		})
	}
}

// deviceFixture is newFixture with the DRA manager and DynamicResources'
// stand-in.
func deviceFixture(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, pg *v1alpha1.PodGroup, dra *devicestest.DRA) *fixture {
	t.Helper()
	c := frameworktest.NewCluster(t, nodes, pods, []*v1alpha1.PodGroup{pg})
	c.DRA = dra
	blind := func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return blindDynamicResources{}, nil
	}
	return newFixtureWith(t, c, pods, tf.RegisterFilterPlugin(devices.FilterName, blind))
}
