package topology

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kueue's plain pod groups: pods that share a KueuePodGroupLabel and say
// in KueuePodGroupTotalAnnotation how many the group has, which Kueue
// admits as one workload, named after the group, once all exist. muster
// gangs them: the pod webhook puts each into the group of that name, and
// muster-controller makes its PodGroup, owned by Kueue's Workload.
const (
	KueuePodGroupLabel           = "kueue.x-k8s.io/pod-group-name"
	KueuePodGroupTotalAnnotation = "kueue.x-k8s.io/pod-group-total-count"
)

// KueueWorkloadGVK is the kind of Kueue's workloads, which own the
// PodGroups of its pod groups.
var KueueWorkloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

// KueuePodGroupOf returns the name of the Kueue pod group the pod is in,
// or "".
func KueuePodGroupOf(pod *corev1.Pod) string { return pod.Labels[KueuePodGroupLabel] }

// KueuePodGroupTotal reads how many pods the pod's Kueue pod group has:
// the gang's minMember.
func KueuePodGroupTotal(pod *corev1.Pod) (int32, error) {
	value, ok := pod.Annotations[KueuePodGroupTotalAnnotation]
	if !ok {
		return 0, fmt.Errorf("annotation %s is missing; Kueue needs it on every pod of pod group %s", KueuePodGroupTotalAnnotation, KueuePodGroupOf(pod))
	}
	total, err := strconv.ParseInt(value, 10, 32)
	if err != nil || total < 1 {
		return 0, fmt.Errorf("annotation %s is %q; it must be the group's number of pods, at least 1", KueuePodGroupTotalAnnotation, value)
	}
	return int32(total), nil
}

// Kueue's Topology Aware Scheduling: the annotations that ask it to place
// a pod set (a user's, or the one Kueue writes on every pod set it places
// without a request), as Kueue itself reads them (its util/tas.IsTAS).
const (
	KueueRequiredTopologyAnnotation      = "kueue.x-k8s.io/podset-required-topology"
	KueuePreferredTopologyAnnotation     = "kueue.x-k8s.io/podset-preferred-topology"
	KueueUnconstrainedTopologyAnnotation = "kueue.x-k8s.io/podset-unconstrained-topology"
)

// KueueTopologyGate holds a pod Kueue places by topology until its
// assignment is written into the pod's node selector.
const KueueTopologyGate = "kueue.x-k8s.io/topology"

// KueueAdmissionGate is the scheduling gate Kueue keeps on the pods of
// its pod integration until it admits their Workload.
const KueueAdmissionGate = "kueue.x-k8s.io/admission"

// KueuePlaces reports whether Kueue's Topology Aware Scheduling places the
// pod: it chose the pod's nodes when it admitted its workload, and writes
// them into the pod's node selector before letting it be scheduled. Such a
// pod goes where Kueue said; muster chooses no domain for it, which could
// only disagree.
func KueuePlaces(pod *corev1.Pod) bool {
	for _, annotation := range []string{KueueRequiredTopologyAnnotation, KueuePreferredTopologyAnnotation, KueueUnconstrainedTopologyAnnotation} {
		if _, ok := pod.Annotations[annotation]; ok {
			return true
		}
	}
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == KueueTopologyGate })
}
