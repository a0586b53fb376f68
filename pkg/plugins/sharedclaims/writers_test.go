package sharedclaims

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices/devicestest"
)

// naming is a pod of no group that names the claims, in that order.
func naming(name string, claims ...string) *corev1.Pod {
	pod := st.MakePod().Namespace(ns).Name(name).UID(name).Obj()
	for i, claim := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "claim-" + string(rune('a'+i)), ResourceClaimName: ptr.To(claim)})
	}
	return pod
}

func writersOnly() *SharedClaims {
	return NewWithGangs(&gangs{}, devicestest.On(st.MakeNode().Name("n1").Obj()), time.Second)
}

// preBind runs the pod's PreBind in a cycle of its own and returns that
// cycle's state, for its PostBind or Unreserve.
func preBind(t *testing.T, s *SharedClaims, ctx context.Context, pod *corev1.Pod) (fwk.CycleState, *fwk.Status) {
	t.Helper()
	state := recorded(s, pod)
	return state, s.PreBind(ctx, state, pod, "n1")
}

// turnIsFree reports whether a pod naming the claim would get its turn now,
// without waiting.
func turnIsFree(t *testing.T, s *SharedClaims, claim string) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	state, status := preBind(t, s, ctx, naming("probe", claim))
	s.PostBind(context.Background(), state, naming("probe", claim), "n1")
	return status.IsSuccess()
}

// preBindInBackground runs the pod's PreBind and sends its state once it
// returns successfully.
func preBindInBackground(t *testing.T, s *SharedClaims, pod *corev1.Pod) <-chan fwk.CycleState {
	t.Helper()
	done := make(chan fwk.CycleState, 1)
	go func() {
		state, status := preBind(t, s, context.Background(), pod)
		assert.True(t, status.IsSuccess(), "%s's PreBind failed: %v", pod.Name, status.AsError())
		done <- state
	}()
	return done
}

// writingAndWaiting has x write the claim "shared", and y wait for its
// turn; it returns x and its cycle's state, and y's state once y has the
// turn.
func writingAndWaiting(t *testing.T, s *SharedClaims) (*corev1.Pod, fwk.CycleState, <-chan fwk.CycleState) {
	t.Helper()
	x := naming("x", "shared")
	xState, status := preBind(t, s, context.Background(), x)
	require.True(t, status.IsSuccess(), status.AsError())
	require.False(t, turnIsFree(t, s, "shared"), "a second pod got the turn of the claim x is writing")
	return x, xState, preBindInBackground(t, s, naming("y", "shared"))
}

// TestAClaimsTurnPassesWhenItsWriterIsDone: x writes the claim "shared"
// and y waits for its turn; each case ends x's turn a way the framework
// does, and pins that y then gets it and what the turn is after.
func TestAClaimsTurnPassesWhenItsWriterIsDone(t *testing.T) {
	tests := []struct {
		name string
		// end ends x's part, as the framework does.
		end func(s *SharedClaims, xState fwk.CycleState, x *corev1.Pod)
		// after runs once y has the turn.
		after func(t *testing.T, s *SharedClaims, xState fwk.CycleState, x *corev1.Pod, yState fwk.CycleState)
	}{
		{
			name: "one pod at a time writes a claim, until it is bound",
			end: func(s *SharedClaims, xState fwk.CycleState, x *corev1.Pod) {
				s.PostBind(context.Background(), xState, x, "n1")
			},
			after: func(t *testing.T, s *SharedClaims, _ fwk.CycleState, _ *corev1.Pod, yState fwk.CycleState) {
				assert.False(t, turnIsFree(t, s, "shared"), "y, writing the claim after x, does not hold its turn")
				s.PostBind(context.Background(), yState, naming("y", "shared"), "n1")
				assert.True(t, turnIsFree(t, s, "shared"), "the claim's turn was kept after its last writer was bound")
			},
		},
		{
			name: "Unreserve gives the turn back",
			end: func(s *SharedClaims, xState fwk.CycleState, x *corev1.Pod) {
				s.Unreserve(context.Background(), xState, x, "n1")
			},
			after: func(*testing.T, *SharedClaims, fwk.CycleState, *corev1.Pod, fwk.CycleState) {},
		},
		{
			name: "a turn is given back once",
			end: func(s *SharedClaims, xState fwk.CycleState, x *corev1.Pod) {
				s.PostBind(context.Background(), xState, x, "n1")
			},
			after: func(t *testing.T, s *SharedClaims, xState fwk.CycleState, x *corev1.Pod, _ fwk.CycleState) {
				s.Unreserve(context.Background(), xState, x, "n1")
				assert.False(t, turnIsFree(t, s, "shared"), "x, given back twice, ended y's turn")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := writersOnly()
			x, xState, y := writingAndWaiting(t, s)
			tt.end(s, xState, x)
			tt.after(t, s, xState, x, <-y)
		})
	}
}

func TestPodsNamingOtherClaimsDoNotWait(t *testing.T) {
	s := writersOnly()
	_, status := preBind(t, s, context.Background(), naming("x", "one"))
	require.True(t, status.IsSuccess(), status.AsError())
	assert.True(t, turnIsFree(t, s, "two"), "a pod waits for the turn of a claim it does not name")
}

func TestAPodThatStopsWaitingHoldsNoTurn(t *testing.T) {
	s := writersOnly()
	_, status := preBind(t, s, context.Background(), naming("x", "b"))
	require.True(t, status.IsSuccess(), status.AsError())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// y takes a's turn, then waits for b's, and gives up.
	_, status = preBind(t, s, ctx, naming("y", "b", "a"))
	require.False(t, status.IsSuccess(), "y got the turn of b, which x holds")
	assert.Contains(t, status.AsError().Error(), "waiting for another pod to finish writing a ResourceClaim y names")
	assert.True(t, turnIsFree(t, s, "a"), "y kept the turn of a after it gave up")
}

func TestTurnsAreTakenInTheOrderOfTheClaimsNames(t *testing.T) {
	pod := naming("x", "zeta", "alpha", "zeta")
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "own", ResourceClaimTemplateName: ptr.To("gpu")})
	assert.Equal(t, []types.NamespacedName{{Namespace: ns, Name: "alpha"}, {Namespace: ns, Name: "zeta"}}, reservedForEachPod(pod, nil),
		"two pods naming two claims in opposite orders could each hold one and wait for the other")
}

func TestPreBindOfAPodNamingAClaimTakesPart(t *testing.T) {
	s := writersOnly()
	_, status := s.PreBindPreFlight(context.Background(), recorded(s, naming("x", "shared")), naming("x", "shared"), "n1")
	assert.True(t, status.IsSuccess(), "a pod naming a claim would write it without its turn: %v", status.AsError())

	own := st.MakePod().Namespace(ns).Name("own").UID("own").Obj()
	own.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	_, status = s.PreBindPreFlight(context.Background(), recorded(s, own), own, "n1")
	assert.Equal(t, fwk.Skip, status.Code(), "a claim made from a template is the pod's alone")

	_, status = NewWithGangs(&gangs{}, nil, time.Second).PreBindPreFlight(context.Background(), framework.NewCycleState(), naming("x", "shared"), "n1")
	assert.Equal(t, fwk.Skip, status.Code(), "without devices the plugin takes no part in binding")
}
