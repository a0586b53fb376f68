package dra

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestAGangOfDeviceClaimsIsBoundWholeOnDistinctDevices: 8 members, each
// claiming one device, on 4 nodes of 2 devices: every member is bound, and
// the 8 claims hold 8 different devices, each on its member's node.
func TestAGangOfDeviceClaimsIsBoundWholeOnDistinctDevices(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 4, "8", 2)
	framework.CreateDeviceClaimTemplate(t, ns)
	framework.CreatePodGroup(t, ns, "job", 8, nil)
	createClaimingGang(t, ns, "job", 8)

	pods := waitForBound(t, ns, "job", 8)
	devices := sets.New[string]()
	for _, pod := range pods {
		claim := allocatedClaimOf(t, pod)
		result := claim.Status.Allocation.Devices.Results
		if len(result) != 1 {
			t.Fatalf("the claim of %s holds %d devices, want 1", pod.Name, len(result))
		}
		if result[0].Pool != pod.Spec.NodeName {
			t.Errorf("%s is bound to %s but its device is %s/%s", pod.Name, pod.Spec.NodeName, result[0].Pool, result[0].Device)
		}
		devices.Insert(result[0].Pool + "/" + result[0].Device)
		if !reservedFor(claim, pod) {
			t.Errorf("the claim of %s is not reserved for it: %v", pod.Name, claim.Status.ReservedFor)
		}
	}
	if devices.Len() != 8 {
		t.Errorf("the 8 members hold %d distinct devices: %v", devices.Len(), sets.List(devices))
	}
}

// TestAGangLargerThanTheFreeDevicesBindsNothingAndAllocatesNoClaim: 10
// members, each claiming a device, where there are 8: no member is bound,
// no claim is allocated, and the gang says why, naming the devices it
// lacks. Given two more devices, it is bound whole.
func TestAGangLargerThanTheFreeDevicesBindsNothingAndAllocatesNoClaim(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 4, "8", 2)
	framework.CreateDeviceClaimTemplate(t, ns)
	watch := watchBinds(t, ns)
	allocated := watchAllocations(t, ns)
	framework.CreatePodGroup(t, ns, "job", 10, nil)
	createClaimingGang(t, ns, "job", 10)

	note := framework.WaitForEvent(t, ns, "job", "GangRejected")
	if want := "fits on no node (4 nodes: cannot allocate all claims"; !strings.Contains(note, want) {
		t.Errorf("GangRejected says %q, want it to say %q", note, want)
	}
	// The last member's claim may not be made from its template yet: the
	// claims made ask for 9 or 10.
	lacking := regexp.MustCompile(`the claims ask for (9|10) devices of class ` + regexp.QuoteMeta(localcluster.DeviceClassName) + `, and 8 of its 8 are free`)
	if !lacking.MatchString(note) {
		t.Errorf("GangRejected says %q, want it to name the devices lacking: %s", note, lacking)
	}
	if n := watch.everBound(); n != 0 {
		t.Fatalf("%d of 10 members were bound with 8 devices", n)
	}
	if claims := allocated.claims(); len(claims) > 0 {
		t.Errorf("claims of a gang that was never admitted were allocated or reserved: %v", claims)
	}

	framework.AddPoolNode(t, ns, ns+"-extra", "8")
	framework.PublishDevices(t, ns+"-extra", 2)
	waitForBound(t, ns, "job", 10)
}

// TestTwoGangsCompetingForTheSameDevicesDoNotDeadlock: two gangs of 6
// device claims, created member by member in turn, where there are 8
// devices. One is bound whole and the other not at all; once the first's
// pods finish, the second is bound whole on the devices they freed.
func TestTwoGangsCompetingForTheSameDevicesDoNotDeadlock(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 4, "8", 2)
	framework.CreateDeviceClaimTemplate(t, ns)
	watch := watchBinds(t, ns)
	framework.CreatePodGroup(t, ns, "a", 6, nil)
	framework.CreatePodGroup(t, ns, "b", 6, nil)
	for i := range 6 {
		for _, group := range []string{"a", "b"} {
			framework.CreatePods(t, claimingMember(ns, group, i).Annotation(localcluster.SimRunForAnnotation, "5s").Obj())
		}
	}

	var winner, loser string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(context.Context) (bool, error) {
		switch {
		case watch.boundOf("a") == 6:
			winner, loser = "a", "b"
		case watch.boundOf("b") == 6:
			winner, loser = "b", "a"
		}
		return winner != "", nil
	})
	if err != nil {
		t.Fatalf("neither gang was bound whole: a has %d, b has %d", watch.boundOf("a"), watch.boundOf("b"))
	}
	if n := watch.boundOf(loser); n != 0 {
		t.Errorf("gang %s had %d members bound when %s was bound whole", loser, n, winner)
	}
	waitForBound(t, ns, loser, 6)
}

// claimingMember is a member of group on the test's pool whose container
// claims one device through the template.
func claimingMember(namespace, group string, index int) *podWrapper {
	return &podWrapper{framework.ClaimOneDevice(framework.InPool(framework.MemberPod(namespace, group, index, "1").Obj(), namespace))}
}

type podWrapper struct{ *corev1.Pod }

func (p *podWrapper) Annotation(key, value string) *podWrapper {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
	return p
}

func (p *podWrapper) Obj() *corev1.Pod { return p.Pod }

func createClaimingGang(t *testing.T, namespace, group string, size int) {
	t.Helper()
	for i := range size {
		framework.CreatePods(t, claimingMember(namespace, group, i).Obj())
	}
}

// waitForBound waits until want pods of the group are bound and returns
// them.
func waitForBound(t *testing.T, namespace, group string, want int) []corev1.Pod {
	t.Helper()
	var bound []corev1.Pod
	var waiting []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := framework.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=" + group})
		if err != nil {
			return false, nil
		}
		bound, waiting = bound[:0], waiting[:0]
		for _, pod := range pods.Items {
			if framework.IsBound(&pod) {
				bound = append(bound, pod)
			} else if c := framework.Condition(&pod, corev1.PodScheduled); c != nil {
				waiting = append(waiting, pod.Name+": "+c.Message)
			}
		}
		return len(bound) == want, nil
	})
	if err != nil {
		t.Fatalf("group %s/%s never had %d pods bound (has %d; %s): %v", namespace, group, want, len(bound), strings.Join(waiting, "; "), err)
	}
	return bound
}

// allocatedClaimOf returns the pod's claim, made from the template, once it
// is allocated.
func allocatedClaimOf(t *testing.T, pod corev1.Pod) *resourcev1.ResourceClaim {
	t.Helper()
	var claim *resourcev1.ResourceClaim
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		current, err := framework.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(current.Status.ResourceClaimStatuses) == 0 || current.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, nil
		}
		claim, err = framework.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *current.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		return err == nil && claim.Status.Allocation != nil, nil
	})
	if err != nil {
		t.Fatalf("the claim of %s was never allocated: %v", pod.Name, err)
	}
	return claim
}

func reservedFor(claim *resourcev1.ResourceClaim, pod corev1.Pod) bool {
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.Resource == "pods" && consumer.UID == pod.UID {
			return true
		}
	}
	return false
}

// allocationWatch records the namespace's claims ever seen allocated or
// reserved.
type allocationWatch struct {
	mu   sync.Mutex
	seen sets.Set[string]
}

func watchAllocations(t *testing.T, namespace string) *allocationWatch {
	t.Helper()
	w := &allocationWatch{seen: sets.New[string]()}
	observe := func(obj any) {
		claim, ok := obj.(*resourcev1.ResourceClaim)
		if !ok || (claim.Status.Allocation == nil && len(claim.Status.ReservedFor) == 0) {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.seen.Insert(claim.Name)
	}
	lw := cache.NewListWatchFromClient(framework.Client.ResourceV1().RESTClient(), "resourceclaims", namespace, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &resourcev1.ResourceClaim{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		t.Fatalf("watching the claims of %s: %v", namespace, err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go informer.Run(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		t.Fatalf("the claims of %s never synced", namespace)
	}
	return w
}

func (w *allocationWatch) claims() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sets.List(w.seen)
}

// bindWatch records each pod of the namespace ever seen bound, with its
// group.
type bindWatch struct {
	mu    sync.Mutex
	bound map[string]string // the group, by pod name
}

func watchBinds(t *testing.T, namespace string) *bindWatch {
	w := &bindWatch{bound: map[string]string{}}
	framework.WatchPods(t, namespace, func(_, pod *corev1.Pod) {
		if !framework.IsBound(pod) {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.bound[pod.Name] = pod.Labels[topology.GroupLabel]
	})
	return w
}

func (w *bindWatch) everBound() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

func (w *bindWatch) boundOf(group string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, of := range w.bound {
		if of == group {
			n++
		}
	}
	return n
}

// TestAGangKeptInOneRackGetsItsDevicesThere: two racks of 2 nodes with 2
// devices each, 2 of rack-a's devices taken. A gang of 4 that must stay in
// one rack, each member claiming a device, is bound in rack-b, the one
// rack with 4 free devices, each member on a device of its own node.
func TestAGangKeptInOneRackGetsItsDevicesThere(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2, "rack-b": 2}, "8")
	for i := range 4 {
		framework.PublishDevices(t, fmt.Sprintf("%s-%d", ns, i), 2)
	}
	framework.CreateDeviceClaimTemplate(t, ns)
	for i := range 2 {
		pod := claimingMember(ns, "none", i).Obj()
		pod.Name = fmt.Sprintf("rack-a-user-%d", i)
		delete(pod.Labels, topology.GroupLabel)
		pod.Spec.NodeSelector[framework.RackLabel] = "rack-a"
		framework.CreatePods(t, pod)
		framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
	}

	framework.CreatePodGroup(t, ns, "job", 4, map[string]string{topology.DomainRequiredAnnotation: framework.RackLabel})
	createClaimingGang(t, ns, "job", 4)
	pods := waitForBound(t, ns, "job", 4)
	names := make([]string, len(pods))
	for i, pod := range pods {
		names[i] = pod.Name
		if result := allocatedClaimOf(t, pod).Status.Allocation.Devices.Results; len(result) != 1 || result[0].Pool != pod.Spec.NodeName {
			t.Errorf("%s is bound to %s with devices %v", pod.Name, pod.Spec.NodeName, result)
		}
	}
	framework.CheckInRack(t, ns, names, "rack-b")
}

// TestAGangNoRacksDevicesHoldSaysSoOnceNamingThem: three racks of 2
// nodes with 2 devices each, and a gang of 5 that must stay in one rack,
// each member claiming a device through a template. No rack holds it: the
// gang is told so, naming the devices, and no rack is tried in turn, none
// of its members reserved. Placement's trial once counted CPU alone, chose
// each rack in turn, reserved 4 members there and failed on the fifth.
func TestAGangNoRacksDevicesHoldSaysSoOnceNamingThem(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2, "rack-b": 2, "rack-c": 2}, "8")
	for i := range 6 {
		framework.PublishDevices(t, fmt.Sprintf("%s-%d", ns, i), 2)
	}
	framework.CreateDeviceClaimTemplate(t, ns)
	framework.CreatePodGroup(t, ns, "job", 5, map[string]string{topology.DomainRequiredAnnotation: framework.RackLabel})
	createClaimingGang(t, ns, "job", 5)

	// Its first attempts may find members whose claims are not made yet,
	// and say so.
	want := fmt.Sprintf("no %s domain has room for the 5 members group %s/job lacks; the closest, rack-a, has room for 4: the claims ask for 5 devices of class %s, and 4 of rack-a's 4 are free",
		framework.RackLabel, ns, localcluster.DeviceClassName)
	notes := framework.Eventually(t, "GangRejected naming the devices", func(ctx context.Context) ([]string, error) {
		events, err := framework.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "GangRejected").String()})
		if err != nil {
			return nil, err
		}
		var notes []string
		for _, e := range events.Items {
			notes = append(notes, e.Note)
			if strings.HasPrefix(e.Note, want) {
				return notes, nil
			}
		}
		return nil, fmt.Errorf("GangRejected says %q; want one to start %q", notes, want)
	})
	for _, note := range notes {
		if !strings.Contains(note, "released 0 reservations") || strings.Contains(note, "trying another") {
			t.Errorf("GangRejected says %q; want no member reserved, and no domain tried in turn", note)
		}
	}
}

// TestAGangWhoseMembersShareAClaimIsBoundWithOneAllocation: three members
// of a gang naming one ResourceClaim, on 2 nodes of one device: the claim
// is allocated once, to one device, and all three are bound on its node,
// each reserved the claim.
func TestAGangWhoseMembersShareAClaimIsBoundWithOneAllocation(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 2, "4", 1)
	framework.CreateDeviceClaim(t, ns, "shared")
	framework.CreatePodGroup(t, ns, "job", 3, nil)
	createSharingGang(t, ns, "job", 3, "shared")

	pods := waitForBound(t, ns, "job", 3)
	claim, err := framework.Client.ResourceV1().ResourceClaims(ns).Get(context.Background(), "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("the shared claim is allocated %v, want one device", claim.Status.Allocation)
	}
	device := claim.Status.Allocation.Devices.Results[0]
	for _, pod := range pods {
		if pod.Spec.NodeName != device.Pool {
			t.Errorf("%s is bound to %s, but the device it shares is %s/%s", pod.Name, pod.Spec.NodeName, device.Pool, device.Device)
		}
		if !reservedFor(claim, pod) {
			t.Errorf("the shared claim is not reserved for %s: %v", pod.Name, claim.Status.ReservedFor)
		}
	}
}

// TestFortyMembersSharingAClaimEachWriteItOnce: a gang of 40 naming one
// ResourceClaim is admitted whole, and its members bind at once, each
// adding itself to the claim's reservations. One member at a time writes
// the claim (SharedClaims' turns): no binding fails on another member's
// write, and the claim ends reserved for all 40.
func TestFortyMembersSharingAClaimEachWriteItOnce(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 1, "64", 1)
	var mu sync.Mutex
	var failed []string
	framework.WatchPods(t, ns, func(_, pod *corev1.Pod) {
		if c := framework.Condition(pod, corev1.PodScheduled); c != nil && c.Reason == corev1.PodReasonSchedulerError {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, pod.Name+": "+c.Message)
		}
	})
	framework.CreateDeviceClaim(t, ns, "shared")
	framework.CreatePodGroup(t, ns, "job", 40, nil)
	createSharingGang(t, ns, "job", 40, "shared")

	pods := waitForBound(t, ns, "job", 40)
	claim, err := framework.Client.ResourceV1().ResourceClaims(ns).Get(context.Background(), "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		if !reservedFor(claim, pod) {
			t.Errorf("the shared claim is not reserved for %s: %v", pod.Name, claim.Status.ReservedFor)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("%d bindings failed, each to be scheduled again: %s", len(failed), strings.Join(failed, "; "))
	}
}

// TestAGangOfMoreMembersThanAClaimHoldsBindsNone: a claim holds at most
// 256 consumers, and muster-scheduler reserves it for each pod. A gang of
// 257 naming one claim is turned away whole, saying why, and none of its
// members is bound: otherwise 256 would bind and the last fail at every
// try, leaving the gang bound in part.
func TestAGangOfMoreMembersThanAClaimHoldsBindsNone(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 3, "100", 0)
	framework.PublishNetworkDevice(t, ns)
	watch := watchBinds(t, ns)
	framework.CreateDeviceClaim(t, ns, "shared")
	framework.CreatePodGroup(t, ns, "job", 257, nil)
	createSharingGang(t, ns, "job", 257, "shared")

	note := framework.WaitForEvent(t, ns, "job", "GangRejected")
	if !strings.Contains(note, "needs 257 more consumers of ResourceClaim "+ns+"/shared") || !strings.Contains(note, "at most 256") {
		t.Errorf("GangRejected says %q, not that the claim cannot be reserved for the whole gang", note)
	}
	if n := watch.everBound(); n != 0 {
		t.Fatalf("%d members of a gang the claim cannot hold were bound", n)
	}
}

// TestAGangSharingAClaimWhereItCannotFitLeavesTheClaimUnallocated: three
// members of a gang naming one ResourceClaim, on 2 nodes of one device and
// room for two members each: the claim's device is on one node, which the
// three do not fit. The gang is rejected, nothing is bound, and the claim
// is never allocated, so that two pods of no group, each with a device of
// its own, are bound on both devices.
func TestAGangSharingAClaimWhereItCannotFitLeavesTheClaimUnallocated(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 2, "2", 1)
	framework.CreateDeviceClaimTemplate(t, ns)
	watch := watchBinds(t, ns)
	allocated := watchAllocations(t, ns)
	framework.CreateDeviceClaim(t, ns, "shared")
	framework.CreatePodGroup(t, ns, "job", 3, nil)
	createSharingGang(t, ns, "job", 3, "shared")

	note := framework.WaitForEvent(t, ns, "job", "GangRejected")
	if strings.Contains(note, "in the process of being allocated") {
		t.Errorf("GangRejected says %q: a member was refused the claim its gang shares, not the room it lacks", note)
	}
	if n := watch.everBound(); n != 0 {
		t.Fatalf("%d members sharing a claim were bound where the gang does not fit", n)
	}
	if claims := allocated.claims(); len(claims) > 0 {
		t.Fatalf("the claim of a gang never admitted was allocated or reserved: %v", claims)
	}
	if err := framework.Client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: topology.GroupLabel + "=job"}); err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		pod := claimingMember(ns, "solo", i).Obj()
		pod.Name, pod.Labels = fmt.Sprintf("solo-%d", i), nil
		framework.CreatePods(t, pod)
	}
	for i := range 2 {
		framework.WaitForPod(t, ns, fmt.Sprintf("solo-%d", i), "bound", framework.IsBound)
	}
}

// createSharingGang creates the group's members, each naming the claim.
func createSharingGang(t *testing.T, namespace, group string, size int, claim string) {
	t.Helper()
	for i := range size {
		pod := claimingMember(namespace, group, i).Obj()
		pod.Spec.ResourceClaims[0].ResourceClaimTemplateName, pod.Spec.ResourceClaims[0].ResourceClaimName = nil, ptr.To(claim)
		framework.CreatePods(t, pod)
	}
}
