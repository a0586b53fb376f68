package group

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// HolderOf returns the member that holds the pod's role and index in its
// group key, of topology topo as already read, when another does: an active member with the same place that is
// bound, holds a reservation, or was created first (then by name), while
// the pod itself is neither bound nor reserved. Two
// pods created in the same instant can both pass muster-controller's
// webhook, which reads the members stored before it; the scheduler, which
// places one pod at a time, lets only one of them run.
func (m *Model) HolderOf(key types.NamespacedName, topo *topology.Topology, pod *corev1.Pod) (*corev1.Pod, bool) {
	if topo == nil || len(topo.Roles) == 0 {
		return nil, false
	}
	// A member bound or reserved holds its place itself.
	if pod.Spec.NodeName != "" || m.Attempts().IsReserved(key, pod.UID) {
		return nil, false
	}
	place, errs := topo.Identify(pod)
	if len(errs) > 0 || !m.mayShare(key, pod) {
		return nil, false
	}
	members, err := m.Members(key)
	if err != nil {
		return nil, false
	}
	for _, other := range members {
		if other.UID == pod.UID || !topology.IsActiveMember(other) {
			continue
		}
		// Most members differ in role or raw index; Identify only those
		// that may not.
		if otherRole, _ := topology.RoleOf(other); otherRole != place.Role {
			continue
		}
		if otherPlace, errs := topo.Identify(other); len(errs) > 0 || otherPlace != place {
			continue
		}
		if other.Spec.NodeName != "" || m.Attempts().IsReserved(key, other.UID) || createdBefore(other, pod) {
			return other, true
		}
	}
	return nil, false
}

// HasTwins reports whether another active member of the pod's group has
// its role and index as their labels say.
func (m *Model) HasTwins(pod *corev1.Pod) bool {
	key, ok := topology.GroupOf(pod)
	return ok && groupstate.PlaceOf(pod) != "" && m.mayShare(key, pod)
}

// mayShare reports whether another active member may hold the pod's place:
// one has its role and index as their labels say. Most members share it
// with none, and are answered without a scan of their group.
func (m *Model) mayShare(key types.NamespacedName, pod *corev1.Pod) bool {
	if groupstate.PlaceOf(pod) == "" {
		return true
	}
	return m.OthersInPlace(key, pod) > 0
}

func createdBefore(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return strings.Compare(a.Name, b.Name) < 0
}

// HeldByMessage says why a member waits while another holds its place.
func HeldByMessage(pod, holder *corev1.Pod) string {
	role, _ := topology.RoleOf(pod)
	return fmt.Sprintf("pod %s has the same role (%s) and index in group %s and holds them; this pod waits until it finishes or is deleted: give it another index, or delete one of the two",
		holder.Name, role, holder.Labels[topology.GroupLabel])
}

// told remembers the pods a warning was recorded for, so that a pod that
// waits is told once, not on every retry.
type told struct {
	mu   sync.Mutex
	pods sets.Set[types.UID]
}

// first reports whether uid is told for the first time.
func (t *told) first(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pods.Has(uid) {
		return false
	}
	t.pods.Insert(uid)
	return true
}

func (t *told) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods.Delete(uid)
}

// TellHeld records, once per pod, a Warning event on a member whose place
// another holds.
func (m *Model) TellHeld(handle fwk.Handle, pod, holder *corev1.Pod) {
	if m.heldTold.first(pod.UID) {
		handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, "DuplicateMember", "Scheduling", "%s", HeldByMessage(pod, holder))
	}
}
