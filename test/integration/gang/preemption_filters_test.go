package gang

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// The tests of this file check that preemption decides fit with the
// profile's own filters: host ports, pod affinity, and Gang's room held
// for a member to come.

// fillWithLowPods creates, on each of the pool's nodes, perNode plain pods
// of 1 CPU and the class, and waits until all are bound; it returns where
// each went, by pod name.
func fillWithLowPods(t *testing.T, namespace string, count int, class string) map[string]string {
	t.Helper()
	for i := range count {
		pod := plainPod(namespace, fmt.Sprintf("low-%d", i), "1")
		pod.Spec.PriorityClassName = class
		framework.CreatePods(t, pod)
	}
	where := map[string]string{}
	for i := range count {
		name := fmt.Sprintf("low-%d", i)
		where[name] = framework.WaitForPod(t, namespace, name, "bound", framework.IsBound).Spec.NodeName
	}
	return where
}

// takenOf returns, by node, the pods of where that no longer run.
func takenOf(t *testing.T, namespace string, where map[string]string) map[string][]string {
	t.Helper()
	pods, err := framework.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taken := map[string][]string{}
	for name, node := range where {
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == name && p.DeletionTimestamp == nil }) {
			taken[node] = append(taken[node], name)
		}
	}
	return taken
}

// TestAGangOnOneHostPortTakesOneVictimPerNode: four nodes of 4 CPUs are
// full of 1-CPU low-priority pods; a high-priority gang of four 1-CPU
// members that all ask host port 9000 needs one member per node, so it
// takes exactly one pod on each node, and is bound whole, one per node.
func TestAGangOnOneHostPortTakesOneVictimPerNode(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 4, "4")
	low, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 1000)
	where := fillWithLowPods(t, ns, 16, low)

	createPortedGang(t, ns, high)

	nodes := map[string]bool{}
	for i := range 4 {
		pod := framework.WaitForPod(t, ns, fmt.Sprintf("ported-%d", i), "bound", framework.IsBound)
		nodes[pod.Spec.NodeName] = true
	}
	if len(nodes) != 4 {
		t.Errorf("the gang's members share nodes: %v", nodes)
	}
	taken := takenOf(t, ns, where)
	for node := range nodes {
		if len(taken[node]) != 1 {
			t.Errorf("node %s lost %v; want exactly one pod", node, taken[node])
		}
	}
}

// createPortedGang creates the gang ported of four 1-CPU members of the
// class, each asking host port 9000, and waits until all are bound.
func createPortedGang(t *testing.T, namespace, class string) {
	t.Helper()
	framework.CreatePodGroup(t, namespace, "ported", 4, nil)
	for i := range 4 {
		pod := framework.InPool(framework.MemberPod(namespace, "ported", i, "1").Obj(), namespace)
		pod.Spec.PriorityClassName = class
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}
		framework.CreatePods(t, pod)
	}
	waitForBound(t, namespace, "ported", 4)
}

// TestAPodWithRequiredAffinityTakesItsVictimBesideItsPeer: four full
// nodes; a high-priority pod that must run beside the pod labelled
// app=peer takes one victim, on the peer's node, and is bound there.
func TestAPodWithRequiredAffinityTakesItsVictimBesideItsPeer(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 4, "4")
	low, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 1000)
	peer := plainPod(ns, "peer", "1")
	peer.Labels["app"] = "peer"
	peer.Spec.PriorityClassName = high
	framework.CreatePods(t, peer)
	peerNode := framework.WaitForPod(t, ns, "peer", "bound", framework.IsBound).Spec.NodeName
	where := fillWithLowPods(t, ns, 15, low)

	near := plainPod(ns, "near", "1")
	near.Spec.PriorityClassName = high
	near.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "peer"}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	framework.CreatePods(t, near)
	if got := framework.WaitForPod(t, ns, "near", "bound", framework.IsBound).Spec.NodeName; got != peerNode {
		t.Errorf("the pod went to %s; its peer runs on %s", got, peerNode)
	}
	taken := takenOf(t, ns, where)
	if len(taken) != 1 || len(taken[peerNode]) != 1 {
		t.Errorf("preemption took %v; want one pod on the peer's node %s", taken, peerNode)
	}
}

// TestAPreemptorNeverTakesRoomHeldForALateMember: an MPI gang's two
// workers, of a priority between the others, run on a node of 4 CPUs,
// where room for its launcher, created later, is held; a low-priority pod
// takes the last CPU. A high-priority pod of 1 CPU then takes the
// low-priority pod, not the held room, and the launcher, when it comes,
// is bound into its room.
func TestAPreemptorNeverTakesRoomHeldForALateMember(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	low, mid, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 500), framework.PriorityClass(t, ns, 1000)
	launcher := framework.InPool(&corev1.Pod{}, ns)
	late, err := json.Marshal(map[string]topology.LateMember{"launcher": {
		Requests:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		NodeSelector: launcher.Spec.NodeSelector,
		Tolerations:  launcher.Spec.Tolerations,
	}})
	if err != nil {
		t.Fatal(err)
	}
	framework.CreatePodGroup(t, ns, "mpi", 3, map[string]string{
		topology.FrameworkAnnotation:   "mpi",
		topology.RolesAnnotation:       "launcher=1,worker=2",
		topology.LateMembersAnnotation: string(late),
	})
	for i := range 2 {
		worker := framework.InPool(rolePod(ns, "mpi", "worker", i, "1"), ns)
		worker.Spec.PriorityClassName = mid
		framework.CreatePods(t, worker)
	}
	waitForBound(t, ns, "mpi", 2)
	where := fillWithLowPods(t, ns, 1, low)

	solo := plainPod(ns, "solo", "1")
	solo.Spec.PriorityClassName = high
	framework.CreatePods(t, solo)
	framework.WaitForPod(t, ns, "solo", "bound", framework.IsBound)
	if taken := takenOf(t, ns, where); len(taken) != 1 {
		t.Errorf("preemption took %v; want the low-priority pod", taken)
	}
	if bound := boundCount(t, ns, "mpi"); bound != 2 {
		t.Errorf("the gang has %d members bound; want its 2 workers untouched", bound)
	}
	launcherPod := framework.InPool(rolePod(ns, "mpi", "launcher", 0, "1"), ns)
	launcherPod.Spec.PriorityClassName = mid
	framework.CreatePods(t, launcherPod)
	framework.WaitForPod(t, ns, "mpi-launcher-0", "bound into its held room", framework.IsBound)
}

// rolePod is member index of role in group, asking for cpu.
func rolePod(namespace, group, role string, index int, cpu string) *corev1.Pod {
	return framework.MemberPod(namespace, group, index, cpu).Name(fmt.Sprintf("%s-%s-%d", group, role, index)).
		Label(topology.RoleLabel, role).Label(topology.IndexLabel, strconv.Itoa(index)).Obj()
}
