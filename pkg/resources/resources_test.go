package resources

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func list(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

func TestAPodRequestsItsContainersAndItsInitContainersPeak(t *testing.T) {
	pod := st.MakePod().Req(map[corev1.ResourceName]string{"cpu": "1"}).Req(map[corev1.ResourceName]string{"cpu": "500m"}).
		InitReq(map[corev1.ResourceName]string{"cpu": "2"}).Obj()
	got := OfPod(pod)
	assert.Equal(t, "2", got.Cpu().String(), "the init container's 2 CPUs exceed the containers' 1.5")
}

func TestAddSumsTimesTheRequests(t *testing.T) {
	total := Add(nil, list("cpu", "1", "memory", "1Gi"), 3)
	total = Add(total, list("cpu", "500m"), 1)
	assert.Equal(t, "3500m", total.Cpu().String())
	assert.Equal(t, "3Gi", total.Memory().String())
}

func TestDeficitIsWhatFreeLacks(t *testing.T) {
	deficit := Deficit(list("cpu", "3", "memory", "1Gi", "nvidia.com/gpu", "1"), list("cpu", "2", "memory", "2Gi"))
	assert.Len(t, deficit, 2, "memory is covered: %v", deficit)
	assert.Equal(t, "1", deficit.Cpu().String())
	gpu := deficit["nvidia.com/gpu"]
	assert.Equal(t, "1", gpu.String(), "the GPU free lacks counts whole")
	assert.False(t, Covered(deficit))
	assert.True(t, Covered(list("cpu", "-1")), "a deficit paid down below zero is covered")
}

func TestFits(t *testing.T) {
	assert.True(t, Fits(list("cpu", "2"), list("cpu", "2")), "exactly")
	assert.False(t, Fits(list("cpu", "2"), list("cpu", "1500m")))
	assert.False(t, Fits(list("nvidia.com/gpu", "1"), list("cpu", "8")), "a resource the node does not have")
	assert.True(t, Fits(list("nvidia.com/gpu", "0"), list("cpu", "8")), "asking none of it")
}

func TestSubTakesOnlyFromWhatTotalLists(t *testing.T) {
	total := Sub(list("cpu", "4", "memory", "1Gi"), list("cpu", "1500m", "nvidia.com/gpu", "1"), 2)
	assert.Equal(t, map[string]string{"cpu": "1", "memory": "1Gi"}, asStrings(total))
}

func TestClampLeavesNothingBelowZero(t *testing.T) {
	assert.Equal(t, map[string]string{"cpu": "0", "memory": "1Gi"}, asStrings(Clamp(list("cpu", "-2", "memory", "1Gi"))))
}

func TestARoomLosesWhatIsPlacedOnItAndItsClonesDoNot(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: list("cpu", "4", "pods", "110")}}
	room := EmptyRoom(node)
	clone := room.Clone()
	room.Place(list("cpu", "3", "pods", "1"))
	assert.Equal(t, map[string]string{"cpu": "1", "pods": "109"}, asStrings(room.Free))
	assert.Equal(t, map[string]string{"cpu": "4", "pods": "110"}, asStrings(clone.Free))
	assert.Equal(t, map[string]string{"cpu": "4", "pods": "110"}, asStrings(node.Status.Allocatable), "the node is not changed")
}

func asStrings(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for name, quantity := range l {
		out[string(name)] = quantity.String()
	}
	return out
}

func TestFillIsTheShareOfTheScarcestResourceNeedTakes(t *testing.T) {
	free := func(cpu, memory int64) Amounts {
		return Amounts{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}
	}
	assert.InDelta(t, 0.75, Fill(list("cpu", "3", "memory", "1Gi"), free(4000, 4<<30)), 1e-9, "CPU is the scarcer")
	assert.InDelta(t, 1.0, Fill(list("cpu", "4"), free(4000, 0)), 1e-9, "exactly full")
	assert.Greater(t, Fill(list("cpu", "5"), free(4000, 0)), 1.0, "does not fit")
	assert.True(t, math.IsInf(Fill(list("nvidia.com/gpu", "1"), free(4000, 0)), 1), "a resource free has none of")
	assert.Zero(t, Fill(list("nvidia.com/gpu", "0"), free(4000, 0)), "asking none of it")
}

func TestAddFreeSumsWhatNodesHaveLeftOfTheListedResources(t *testing.T) {
	node := func(cpu, gpus string, pods ...*corev1.Pod) fwk.NodeInfo {
		info := framework.NewNodeInfo(pods...)
		info.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{"cpu": cpu, "memory": "8Gi", "nvidia.com/gpu": gpus}).Obj())
		return info
	}
	used := st.MakePod().Req(map[corev1.ResourceName]string{"cpu": "1500m", "nvidia.com/gpu": "1"}).Obj()
	free := Amounts{corev1.ResourceCPU: 0, "nvidia.com/gpu": 0}
	free.AddFree(node("4", "8", used))
	free.AddFree(node("2", "0"))
	assert.Equal(t, Amounts{corev1.ResourceCPU: 4500, "nvidia.com/gpu": 7}, free, "memory is not listed: not summed")
	assert.Equal(t, int64(1536), Amount(corev1.ResourceMemory, resource.MustParse("1536")))
}
