// Package workloadapi tests muster-scheduler on a cluster that serves
// upstream's scheduling.k8s.io/v1beta1 Workloads and PodGroups
// (muster-local up --workload-api): pods grouped by those PodGroups are
// muster gangs, whether a user or the Job controller makes the group.
package workloadapi

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/plugins/gangpreemption"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, func(opts *localcluster.Options) { opts.WorkloadAPI = true })
}

// TestBothProgramsReadBothPodGroupAPIs: muster-scheduler and
// muster-controller found at start that the API server serves upstream's
// PodGroups, and say they read both.
func TestBothProgramsReadBothPodGroupAPIs(t *testing.T) {
	for program, want := range map[string]string{
		"muster-scheduler":  `"Reading groups from PodGroups" apis=["scheduling.x-k8s.io/v1alpha1","scheduling.k8s.io/v1beta1"]`,
		"muster-controller": `"Serving groups from PodGroups" apis=["scheduling.x-k8s.io/v1alpha1","scheduling.k8s.io/v1beta1"]`,
	} {
		if !strings.Contains(framework.Log(t, program), want) {
			t.Errorf("%s's log does not say %s", program, want)
		}
	}
}

// TestAnUpstreamGangThatDoesNotFitWaitsWhole: a gang of 4 in a
// scheduling.k8s.io PodGroup, where only 3 fit, binds nothing and says why
// on its PodGroup; once a node is added it is bound whole.
func TestAnUpstreamGangThatDoesNotFitWaitsWhole(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	bound := watchBound(t, ns)
	createUpstreamGang(t, ns, "job", 4)
	for i := range 4 {
		framework.CreatePods(t, upstreamMember(ns, "job", i))
	}

	event := waitForEvent(t, ns, "job", "GangRejected")
	if event.Regarding.APIVersion != topology.UpstreamPodGroupVersion.String() || event.Regarding.Kind != "PodGroup" {
		t.Errorf("GangRejected is about %s %s, want the %s PodGroup", event.Regarding.APIVersion, event.Regarding.Kind, topology.UpstreamPodGroupVersion)
	}
	if n := bound.count(); n != 0 {
		t.Fatalf("%d of 4 members were bound while only 3 fit", n)
	}
	waitForInitiallyScheduled(t, ns, "job", metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)

	framework.AddPoolNode(t, ns, ns+"-extra", "1")
	bound.waitFor(t, 4)
	waitForInitiallyScheduled(t, ns, "job", metav1.ConditionTrue, "Scheduled")
}

// waitForInitiallyScheduled waits until the upstream PodGroup's
// PodGroupInitiallyScheduled condition has the status and reason, as
// kube-scheduler's PodGroup cycle writes them.
func waitForInitiallyScheduled(t *testing.T, namespace, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("%s %s=%s (%s)", name, schedulingv1beta1.PodGroupInitiallyScheduled, status, reason), func(ctx context.Context) (*metav1.Condition, error) {
		pg, err := framework.Client.SchedulingV1beta1().PodGroups(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		c := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		if c == nil || c.Status != status || c.Reason != reason {
			return nil, fmt.Errorf("the condition is %+v", c)
		}
		return c, nil
	})
}

// TestAMemberWaitsForItsMissingUpstreamPodGroup: a pod naming a
// scheduling.k8s.io PodGroup that does not exist is kept out of the queue
// by Gang's PreEnqueue, and is bound once the PodGroup is created: the
// PodGroup's event reaches Gang through the model's upstream informer.
func TestAMemberWaitsForItsMissingUpstreamPodGroup(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	pod := upstreamMember(ns, "later", 0)
	framework.CreatePods(t, pod)

	const gated = `scheduler_pending_pods{queue="gated"}`
	framework.Eventually(t, "the pod gated", func(context.Context) (float64, error) {
		if n := framework.SchedulerMetrics(t)[gated]; n < 1 {
			return n, fmt.Errorf("%s is %v", gated, n)
		}
		return 0, nil
	})
	framework.WaitForPod(t, ns, pod.Name, "unbound", func(pod *corev1.Pod) bool { return !framework.IsBound(pod) })

	createUpstreamGang(t, ns, "later", 1)
	framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
}

// TestBadInputAboutUpstreamGroupsIsRefused: the API server, through
// muster-controller's webhooks, refuses elastic growth on a basic policy
// and a pod that names both kinds of group, each naming the field.
func TestBadInputAboutUpstreamGroupsIsRefused(t *testing.T) {
	ns := framework.NewNamespace(t)
	basic := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "basic", Annotations: map[string]string{
			topology.RolesAnnotation: "worker=4", topology.ElasticAnnotation: "2:4",
		}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}},
	}
	_, err := framework.Client.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), basic, metav1.CreateOptions{})
	if want := "metadata.annotations[muster.dev/elastic]: Forbidden: needs a gang"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("creating an elastic basic PodGroup: got %v, want an error saying %q", err, want)
	}

	createUpstreamGang(t, ns, "train", 2)
	both := upstreamMember(ns, "train", 0)
	both.Labels[topology.GroupLabel] = "job"
	_, err = framework.Client.CoreV1().Pods(ns).Create(context.Background(), both, metav1.CreateOptions{})
	if want := "spec.schedulingGroup.podGroupName: Forbidden: the pod is in two gangs"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("creating a pod in two gangs: got %v, want an error saying %q", err, want)
	}
}

// TestAnUpstreamGangRunsAtItsPodGroupsPriority: a member whose priority
// is not its PodGroup's is refused, naming the field to fix; one created
// before its PodGroup, which the webhook could not check, is never
// scheduled, while a member at the group's priority is.
func TestAnUpstreamGangRunsAtItsPodGroupsPriority(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	low, high := framework.PriorityClass(t, ns, 100), framework.PriorityClass(t, ns, 1000)
	early := upstreamMember(ns, "train", 0)
	early.Spec.PriorityClassName = high
	framework.CreatePods(t, early)

	pg := upstreamGang(ns, "train", 1)
	pg.Spec.PriorityClassName = low
	createPodGroup(t, pg)
	pod := upstreamMember(ns, "train", 1)
	pod.Spec.PriorityClassName = high
	_, err := framework.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	want := fmt.Sprintf(`spec.priorityClassName: Invalid value: %q: the pod's priority 1000 differs from the priority 100 of its PodGroup %s/train`, high, ns)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("creating a member of priority 1000 in a PodGroup of priority 100: got %v, want an error saying %q", err, want)
	}
	pod.Spec.PriorityClassName = low
	framework.CreatePods(t, pod)
	framework.WaitForPod(t, ns, pod.Name, "bound", framework.IsBound)
	// The PodGroup's creation woke the early member before this one was
	// created, and there is room for both.
	says := fmt.Sprintf("the pod's priority 1000 differs from the priority 100 of its PodGroup %s/train", ns)
	got := waitToldWhy(t, ns, early.Name, says)
	if framework.IsBound(got) {
		t.Errorf("the member created at priority 1000 before its PodGroup of priority 100 was bound to %s", got.Spec.NodeName)
	}
}

// waitToldWhy waits until the pod's PodScheduled condition says why it
// waits, starting with says, and returns the pod.
func waitToldWhy(t *testing.T, namespace, name, says string) *corev1.Pod {
	t.Helper()
	return framework.WaitForPod(t, namespace, name, "told why it waits", func(pod *corev1.Pod) bool {
		c := framework.Condition(pod, corev1.PodScheduled)
		return c != nil && strings.HasPrefix(c.Message, says)
	})
}

// TestAPodGroupsTemplateClaimIsMadeOnceAndReservedForIt: a PodGroup whose
// spec.resourceClaims declares a claim from a template, which its three
// members declare alike, one of them created before the PodGroup, on 2
// nodes of one device each. kube-controller-manager makes one claim, for
// the PodGroup; muster-scheduler allocates it once, to one device, binds
// the gang whole on that device's node, and reserves the claim for the
// PodGroup, as upstream does (docs/dra.md).
func TestAPodGroupsTemplateClaimIsMadeOnceAndReservedForIt(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 2, "4", 1)
	framework.CreateDeviceClaimTemplate(t, ns)
	bound := watchBound(t, ns)
	var members []*corev1.Pod
	for i := range 3 {
		members = append(members, framework.ClaimOneDevice(upstreamMember(ns, "train", i)))
	}
	framework.CreatePods(t, members[0])

	pg := upstreamGang(ns, "train", 3)
	pg.Spec.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(framework.DeviceClaimTemplate)}}
	created := createPodGroupAsServed(t, pg)
	framework.CreatePods(t, members[1:]...)
	bound.waitFor(t, 3)

	claims, err := framework.Client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 {
		t.Fatalf("%d ResourceClaims in the namespace, want the one made for the PodGroup", len(claims.Items))
	}
	claim := claims.Items[0]
	if owner := metav1.GetControllerOf(&claim); owner == nil || owner.Kind != "PodGroup" || owner.UID != created.UID {
		t.Errorf("ResourceClaim %s is owned by %v, not by the PodGroup", claim.Name, owner)
	}
	checkReservedForTheGroup(t, &claim, created, members, true)
}

// checkReservedForTheGroup checks that the claim is allocated one device,
// that its only consumer is the PodGroup and, for a device of one node,
// that every member is bound on that node.
func checkReservedForTheGroup(t *testing.T, claim *resourcev1.ResourceClaim, pg *schedulingv1beta1.PodGroup, members []*corev1.Pod, nodeLocal bool) {
	t.Helper()
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("the PodGroup's claim is allocated %v, want one device", claim.Status.Allocation)
	}
	want := []resourcev1.ResourceClaimConsumerReference{{APIGroup: schedulingv1beta1.GroupName, Resource: "podgroups", Name: pg.Name, UID: pg.UID}}
	if !apiequality.Semantic.DeepEqual(claim.Status.ReservedFor, want) {
		t.Errorf("the PodGroup's claim is reserved for %v, want the PodGroup alone", claim.Status.ReservedFor)
	}
	if !nodeLocal {
		return
	}
	device := claim.Status.Allocation.Devices.Results[0]
	for _, member := range members {
		pod, err := framework.Client.CoreV1().Pods(member.Namespace).Get(context.Background(), member.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != device.Pool {
			t.Errorf("%s is bound to %s, but the device its PodGroup's claim holds is %s/%s", pod.Name, pod.Spec.NodeName, device.Pool, device.Device)
		}
	}
}

// TestAPodGroupsNamedClaimIsAllocatedOnceForItsGang: a PodGroup whose
// spec.resourceClaims names one ResourceClaim, which its three members
// name alike, on 2 nodes of one device each: the claim is allocated once,
// to one device, the gang is bound whole on that device's node, and the
// claim is reserved once, for the PodGroup (docs/dra.md).
func TestAPodGroupsNamedClaimIsAllocatedOnceForItsGang(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 2, "4", 1)
	bindGangSharingItsPodGroupsClaim(t, ns, 3, true)
}

// TestThreeHundredMembersShareTheirPodGroupsClaim: a gang of 300 whose
// PodGroup declares one ResourceClaim, of a device every node reaches, is
// bound whole: a claim holds at most 256 consumers, and it has one, the
// PodGroup.
func TestThreeHundredMembersShareTheirPodGroupsClaim(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 4, "100", 0)
	framework.PublishNetworkDevice(t, ns)
	bindGangSharingItsPodGroupsClaim(t, ns, 300, false)
}

// bindGangSharingItsPodGroupsClaim makes the ResourceClaim "shared", the
// PodGroup "train" of that many members declaring it by name, and its
// members naming it alike; it waits until all are bound and checks that
// the claim is the PodGroup's alone (checkReservedForTheGroup).
func bindGangSharingItsPodGroupsClaim(t *testing.T, namespace string, size int, nodeLocal bool) {
	t.Helper()
	framework.CreateDeviceClaim(t, namespace, "shared")
	pg := upstreamGang(namespace, "train", int32(size))
	pg.Spec.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}
	created := createPodGroupAsServed(t, pg)
	bound := watchBound(t, namespace)
	members := membersNamingClaim(namespace, "train", size, "shared")
	framework.CreatePods(t, members...)
	bound.waitFor(t, size)

	got, err := framework.Client.ResourceV1().ResourceClaims(namespace).Get(context.Background(), "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkReservedForTheGroup(t, got, created, members, nodeLocal)
}

// createPodGroupAsServed creates the PodGroup and returns it as the API
// server keeps it, which must be with its claims.
func createPodGroupAsServed(t *testing.T, pg *schedulingv1beta1.PodGroup) *schedulingv1beta1.PodGroup {
	t.Helper()
	created, err := framework.Client.SchedulingV1beta1().PodGroups(pg.Namespace).Create(context.Background(), pg, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", pg.Namespace, pg.Name, err)
	}
	if len(created.Spec.ResourceClaims) != len(pg.Spec.ResourceClaims) {
		t.Fatal("the API server dropped the PodGroup's spec.resourceClaims: muster-local runs it with DRAWorkloadResourceClaims on")
	}
	return created
}

// membersNamingClaim are count members of the upstream group that declare
// the claim as "gpu" by name.
func membersNamingClaim(namespace, group string, count int, claim string) []*corev1.Pod {
	var members []*corev1.Pod
	for i := range count {
		pod := framework.ClaimOneDevice(upstreamMember(namespace, group, i))
		pod.Spec.ResourceClaims[0].ResourceClaimTemplateName, pod.Spec.ResourceClaims[0].ResourceClaimName = nil, ptr.To(claim)
		members = append(members, pod)
	}
	return members
}

// TestAnUpstreamGangsDisruptionModeDecidesItsVictims: on two nodes of one
// CPU, each held by a member of a low-priority upstream gang of two, a
// high-priority gang of one needs one node. A victim gang whose
// disruptionMode is single loses only the member on that node; one whose
// mode is all goes whole, as muster's own gangs do.
func TestAnUpstreamGangsDisruptionModeDecidesItsVictims(t *testing.T) {
	for _, tc := range []struct {
		mode    schedulingv1beta1.DisruptionMode
		victims int
	}{
		{schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}}, 1},
		{schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}, 2},
	} {
		name := "single"
		if tc.mode.All != nil {
			name = "all"
		}
		t.Run(name, func(t *testing.T) {
			framework.LogTailOnFailure(t, "muster-scheduler")
			ns := framework.NewNamespace(t)
			framework.NodePool(t, ns, 2, "1")
			low, high := framework.PriorityClass(t, ns, 100), framework.PriorityClass(t, ns, 1000)
			victim := upstreamGang(ns, "victim", 2)
			victim.Spec.PriorityClassName, victim.Spec.DisruptionMode = low, &tc.mode
			createPodGroup(t, victim)
			var members []*corev1.Pod
			for i := range 2 {
				member := upstreamMember(ns, "victim", i)
				member.Spec.PriorityClassName = low
				members = append(members, member)
			}
			framework.CreatePods(t, members...)
			for _, m := range members {
				framework.WaitForPod(t, ns, m.Name, "bound", framework.IsBound)
			}

			preemptor := upstreamGang(ns, "urgent", 1)
			preemptor.Spec.PriorityClassName = high
			createPodGroup(t, preemptor)
			urgent := upstreamMember(ns, "urgent", 0)
			urgent.Spec.PriorityClassName = high
			framework.CreatePods(t, urgent)
			framework.WaitForPod(t, ns, urgent.Name, "bound", framework.IsBound)

			// Every victim's deletion is sent at once, before the room
			// they free lets the preemptor bind: once it is bound, the
			// victims taken are gone or going.
			framework.Eventually(t, fmt.Sprintf("%d victims gone", tc.victims), func(ctx context.Context) (int, error) {
				gone, err := goneMembers(ctx, ns, members)
				if err == nil && gone != tc.victims {
					err = fmt.Errorf("%d of the victim gang's 2 members are gone or going", gone)
				}
				return gone, err
			})
			if tc.mode.Single != nil {
				note := waitForEvent(t, ns, "victim", gangpreemption.ReasonPreempted).Note
				if want := "one by one as its PodGroup's disruptionMode single allows"; !strings.Contains(note, want) {
					t.Errorf("the victim gang is told %q; want it to say it was taken %s", note, want)
				}
			}
		})
	}
}

// goneMembers counts the members deleted or being deleted.
func goneMembers(ctx context.Context, namespace string, members []*corev1.Pod) (int, error) {
	gone := 0
	for _, m := range members {
		pod, err := framework.Client.CoreV1().Pods(namespace).Get(ctx, m.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone++
		case err != nil:
			return 0, err
		case pod.DeletionTimestamp != nil:
			gone++
		}
	}
	return gone, nil
}

// TestALabelledJobKeepsItsGroupBesideTheJobControllersBasicPodGroup: with
// WorkloadWithJob on, the Job controller gives every Job no controller
// owns a Workload and a basic PodGroup, and names it in each pod. An Indexed Job whose pods carry
// muster's group label runs as that group's gang all the same: the basic
// PodGroup asks nothing of the scheduler.
func TestALabelledJobKeepsItsGroupBesideTheJobControllersBasicPodGroup(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	framework.CreatePodGroup(t, ns, "job", 2, nil)
	bound := watchBound(t, ns)
	createJob(t, indexedJob(framework.InPool(framework.MemberPod(ns, "job", 0, "1").Obj(), ns), "job", 2))

	bound.waitFor(t, 2)
	pods, err := framework.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if topology.UpstreamGroupName(&pod) == "" {
			t.Errorf("pod %s names no scheduling.k8s.io PodGroup: the Job controller made none, so this test shows nothing", pod.Name)
		}
	}
	framework.WaitForEvent(t, ns, "job", "GangAdmitted")
}

// TestAJobWithAGangPolicyIsAMusterGang: an Indexed Job with
// spec.scheduling's gang policy, for muster-scheduler. The real Job
// controller makes its Workload and PodGroup and names the PodGroup in its
// pods; muster-scheduler binds none of them while only 2 of 3 fit, and all
// once there is room.
func TestAJobWithAGangPolicyIsAMusterGang(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	bound := watchBound(t, ns)
	template := framework.InPool(framework.MemberPod(ns, "unused", 0, "1").Obj(), ns)
	delete(template.Labels, topology.GroupLabel)
	job := asGang(indexedJob(template, "train", 3), 3)
	createJob(t, job)

	pg := framework.Eventually(t, "the Job's PodGroup", func(ctx context.Context) (*schedulingv1beta1.PodGroup, error) {
		list, err := framework.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		if len(list.Items) != 1 {
			return nil, fmt.Errorf("%d PodGroups", len(list.Items))
		}
		return &list.Items[0], nil
	})
	if gang := pg.Spec.SchedulingPolicy.Gang; gang == nil || gang.MinCount != 3 {
		t.Fatalf("the Job's PodGroup %s has policy %+v, want a gang of 3", pg.Name, pg.Spec.SchedulingPolicy)
	}
	waitForEvent(t, ns, pg.Name, "GangRejected")
	if n := bound.count(); n != 0 {
		t.Fatalf("%d of the Job's 3 pods were bound while only 2 fit", n)
	}

	framework.AddPoolNode(t, ns, ns+"-extra", "1")
	bound.waitFor(t, 3)
	waitForInitiallyScheduled(t, ns, pg.Name, metav1.ConditionTrue, "Scheduled")
}

// TestAnUpstreamMPIGroupsLauncherGetsMustersHostfile: an MPI group of a
// scheduling.k8s.io PodGroup, with muster's annotations, is served as a
// labelled one is: a member that waits for the others says why; the
// launcher, created first, is bound only after both workers are Ready,
// with muster's hostfile environment and its DNS name; and the group's
// Service, files and keys belong to that PodGroup.
func TestAnUpstreamMPIGroupsLauncherGetsMustersHostfile(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	framework.LogTailOnFailure(t, "muster-controller")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	seen := framework.WatchTimeline(t, ns)
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpi", Annotations: map[string]string{
			topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
		}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
	}
	pg, err := framework.Client.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodGroup mpi: %v", err)
	}

	framework.CreatePods(t, upstreamRolePod(ns, "mpi", "launcher", 0))
	framework.WaitForPod(t, ns, "mpi-launcher-0", "told why it waits", func(pod *corev1.Pod) bool {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated && c.Message == "waiting for 2 more pods of group "+ns+"/mpi (1/3)" {
				return true
			}
		}
		return false
	})
	for i := range 2 {
		worker := upstreamRolePod(ns, "mpi", "worker", i)
		worker.Annotations = map[string]string{"muster.dev/sim-ready-after": "3s"}
		framework.CreatePods(t, worker)
	}
	launcher := framework.WaitForPod(t, ns, "mpi-launcher-0", "bound", framework.IsBound)
	seen.BoundAfterReady(t, "mpi-worker-0", "mpi-launcher-0")
	seen.BoundAfterReady(t, "mpi-worker-1", "mpi-launcher-0")

	if got := launcher.Labels[topology.UpstreamMemberLabel]; got != "mpi" {
		t.Errorf("the launcher's label %s is %q, want mpi", topology.UpstreamMemberLabel, got)
	}
	if launcher.Spec.Hostname != "mpi-launcher-0" || launcher.Spec.Subdomain != "mpi" {
		t.Errorf("the launcher's hostname and subdomain are %q and %q, want mpi-launcher-0 and mpi", launcher.Spec.Hostname, launcher.Spec.Subdomain)
	}
	hostfile := ""
	for _, e := range launcher.Spec.Containers[0].Env {
		if e.Name == "OMPI_MCA_orte_default_hostfile" {
			hostfile = e.Value
		}
	}
	if hostfile != "/etc/mpi/hostfile" {
		t.Errorf("the launcher's OMPI_MCA_orte_default_hostfile is %q, want muster's /etc/mpi/hostfile", hostfile)
	}

	files := framework.Eventually(t, "ConfigMap mpi-muster", func(ctx context.Context) (*corev1.ConfigMap, error) {
		return framework.Client.CoreV1().ConfigMaps(ns).Get(ctx, "mpi-muster", metav1.GetOptions{})
	})
	if want := fmt.Sprintf("mpi-worker-0.mpi.%[1]s.svc slots=1\nmpi-worker-1.mpi.%[1]s.svc slots=1\n", ns); files.Data["hostfile"] != want {
		t.Errorf("the hostfile is %q, want %q", files.Data["hostfile"], want)
	}
	svc, err := framework.Client.CoreV1().Services(ns).Get(context.Background(), "mpi", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Service mpi: %v", err)
	}
	if got := svc.Spec.Selector[topology.UpstreamMemberLabel]; got != "mpi" || len(svc.Spec.Selector) != 1 {
		t.Errorf("Service mpi selects %v, want %s=mpi", svc.Spec.Selector, topology.UpstreamMemberLabel)
	}
	keys, err := framework.Client.CoreV1().Secrets(ns).Get(context.Background(), "mpi-muster-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Secret mpi-muster-ssh: %v", err)
	}
	for _, obj := range []metav1.Object{svc, files, keys} {
		if owner := metav1.GetControllerOf(obj); owner == nil || owner.UID != pg.UID || owner.APIVersion != topology.UpstreamPodGroupVersion.String() {
			t.Errorf("%s is controlled by %v, not by the %s PodGroup mpi", obj.GetName(), owner, topology.UpstreamPodGroupVersion)
		}
	}

	// The label the Service selects by stays.
	unlabel := []byte(`{"metadata":{"labels":{"` + topology.UpstreamMemberLabel + `":null}}}`)
	_, err = framework.Client.CoreV1().Pods(ns).Patch(context.Background(), "mpi-worker-0", types.MergePatchType, unlabel, metav1.PatchOptions{})
	if want := "Forbidden: muster gave this member the label " + topology.UpstreamMemberLabel + "=mpi"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("removing the label %s: got %v, want an error saying %q", topology.UpstreamMemberLabel, err, want)
	}
}

// TestAnUpstreamElasticGroupGrowsAndShrinksThroughItsStatefulSet: an
// elastic group of 1 to 3 workers in a scheduling.k8s.io PodGroup, its
// workers the pods of a StatefulSet at 1, on a node of 3 CPUs: the
// elastic scaler grows the set to 3 into the idle room, and when an
// upstream gang of two then waits for its min, scales it back to 1, and
// the gang is bound whole.
func TestAnUpstreamElasticGroupGrowsAndShrinksThroughItsStatefulSet(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-controller")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "3")
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "el", Annotations: map[string]string{
			topology.RolesAnnotation: "worker=3", topology.ElasticAnnotation: "1:3",
		}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}}},
	}
	if _, err := framework.Client.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup el: %v", err)
	}
	template := upstreamMember(ns, "el", 0)
	template.Labels = map[string]string{"app": "el", topology.RoleLabel: "worker"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "el-worker"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			ServiceName:         "el",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "el"}},
			Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
		},
	}
	if _, err := framework.Client.AppsV1().StatefulSets(ns).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating StatefulSet el-worker: %v", err)
	}
	// Before the node pool's cleanup deletes the pods, which the set
	// would create again.
	t.Cleanup(func() {
		if err := framework.Client.AppsV1().StatefulSets(ns).Delete(context.Background(), set.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting StatefulSet %s: %v", set.Name, err)
		}
	})
	sized := func(want int32) {
		t.Helper()
		framework.Eventually(t, fmt.Sprintf("el-worker at %d replicas, all bound", want), func(ctx context.Context) (bool, error) {
			set, err := framework.Client.AppsV1().StatefulSets(ns).Get(ctx, "el-worker", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			bound, err := framework.BoundActive(ctx, ns, "app=el")
			if err != nil {
				return false, err
			}
			if *set.Spec.Replicas != want || len(bound) != int(want) {
				return false, fmt.Errorf("%d replicas, bound %v", *set.Spec.Replicas, bound)
			}
			return true, nil
		})
	}
	sized(3)
	grown := waitForEvent(t, ns, "el", "ElasticGrown")
	if want := "scaled StatefulSet " + ns + "/el-worker worker replicas 1 → 3 into idle room; fulfillment 0.00 → 1.00"; grown.Note != want || grown.Regarding.APIVersion != topology.UpstreamPodGroupVersion.String() {
		t.Errorf("ElasticGrown says %q about %s; want %q about the upstream PodGroup", grown.Note, grown.Regarding.APIVersion, want)
	}

	createUpstreamGang(t, ns, "rigid", 2)
	bound := watchBound(t, ns)
	for i := range 2 {
		framework.CreatePods(t, upstreamMember(ns, "rigid", i))
	}
	sized(1)
	framework.Eventually(t, "gang rigid bound whole", func(context.Context) (bool, error) {
		for i := range 2 {
			if !bound.has(fmt.Sprintf("rigid-%d", i)) {
				return false, fmt.Errorf("rigid-%d not bound", i)
			}
		}
		return true, nil
	})
}

// upstreamRolePod is the member of role and index of the
// scheduling.k8s.io PodGroup group, named as muster names its hosts.
func upstreamRolePod(namespace, group, role string, index int) *corev1.Pod {
	pod := upstreamMember(namespace, group, index)
	pod.Name = fmt.Sprintf("%s-%s-%d", group, role, index)
	pod.Labels[topology.RoleLabel] = role
	pod.Labels[topology.IndexLabel] = strconv.Itoa(index)
	return pod
}

// upstreamMember is a pod of the test's pool, asking for 1 CPU, that
// names the scheduling.k8s.io PodGroup group.
func upstreamMember(namespace, group string, index int) *corev1.Pod {
	pod := framework.MemberPod(namespace, group, index, "1").Obj()
	delete(pod.Labels, topology.GroupLabel)
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return framework.InPool(pod, namespace)
}

// indexedJob is an Indexed Job named name of pods like template, all of
// them at once.
func indexedJob(template *corev1.Pod, name string, pods int32) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: template.Namespace, Name: name},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(pods),
			Parallelism:    ptr.To(pods),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: template.Labels},
				Spec:       *template.Spec.DeepCopy(),
			},
		},
	}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	return job
}

// asGang gives the Job spec.scheduling's gang policy of minCount.
func asGang(job *batchv1.Job, minCount int32) *batchv1.Job {
	job.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{
		SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To(minCount)},
		},
	}
	return job
}

func createJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	if _, err := framework.Client.BatchV1().Jobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s: %v", job.Name, err)
	}
}

func createUpstreamGang(t *testing.T, namespace, name string, minCount int32) {
	t.Helper()
	createPodGroup(t, upstreamGang(namespace, name, minCount))
}

// upstreamGang is a scheduling.k8s.io PodGroup with a gang policy.
func upstreamGang(namespace, name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}},
		},
	}
}

func createPodGroup(t *testing.T, pg *schedulingv1beta1.PodGroup) {
	t.Helper()
	if _, err := framework.Client.SchedulingV1beta1().PodGroups(pg.Namespace).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", pg.Namespace, pg.Name, err)
	}
}

// boundWatch counts the namespace's pods ever seen bound.
type boundWatch struct {
	mu    sync.Mutex
	names sets.Set[string]
}

func watchBound(t *testing.T, namespace string) *boundWatch {
	w := &boundWatch{names: sets.New[string]()}
	framework.WatchPods(t, namespace, func(_, pod *corev1.Pod) {
		if framework.IsBound(pod) {
			w.mu.Lock()
			w.names.Insert(pod.Name)
			w.mu.Unlock()
		}
	})
	return w
}

func (w *boundWatch) has(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.names.Has(name)
}

func (w *boundWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.names.Len()
}

func (w *boundWatch) waitFor(t *testing.T, want int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, framework.Timeout, true, func(context.Context) (bool, error) {
		return w.count() == want, nil
	})
	if err != nil {
		t.Fatalf("%d pods were bound, want %d: %v", w.count(), want, err)
	}
}

// waitForEvent waits for an event with the reason about the named object.
func waitForEvent(t *testing.T, namespace, regarding, reason string) eventsv1.Event {
	t.Helper()
	return framework.Eventually(t, reason+" about "+regarding, func(ctx context.Context) (eventsv1.Event, error) {
		events, err := framework.Client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", reason).String(),
		})
		if err != nil {
			return eventsv1.Event{}, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == regarding {
				return e, nil
			}
		}
		return eventsv1.Event{}, fmt.Errorf("no %s event about %s/%s", reason, namespace, regarding)
	})
}

// TestJobsWithLongNamesStart: the Job controller names a Job's PodGroup
// from the Job's name twice, plus hashes, past the 63 characters of a
// label value. A gang Job and a plain Job of muster-scheduler, each with a
// name of 24 or more characters, start: every pod is created, labelled
// for its group's Service with one value of at most 63 characters, and
// bound.
func TestJobsWithLongNamesStart(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-controller")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	template := framework.InPool(framework.MemberPod(ns, "unused", 0, "1").Obj(), ns)
	delete(template.Labels, topology.GroupLabel)
	gang := asGang(indexedJob(template, "distributed-training-run", 2), 2)
	createJob(t, gang)
	createJob(t, indexedJob(template, "nightly-data-preprocessing", 2))

	for _, job := range []string{gang.Name, "nightly-data-preprocessing"} {
		pods := framework.Eventually(t, "Job "+job+"'s pods bound", func(ctx context.Context) ([]corev1.Pod, error) {
			list, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
			if err != nil {
				return nil, err
			}
			if bound := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return !framework.IsBound(&p) }); len(bound) != 2 {
				return nil, fmt.Errorf("%d of 2 pods bound; %s", len(bound), jobFailure(ctx, ns, job))
			}
			return list.Items, nil
		})
		group := topology.UpstreamGroupName(&pods[0])
		if len(group) <= 63 {
			t.Errorf("Job %s's PodGroup %q fits a label value: the test shows nothing", job, group)
		}
		for _, pod := range pods {
			if got, want := pod.Labels[topology.UpstreamMemberLabel], topology.UpstreamMemberValue(group); got != want || len(got) > 63 {
				t.Errorf("pod %s is labelled %s=%q, want %q", pod.Name, topology.UpstreamMemberLabel, got, want)
			}
		}
	}
}

// jobFailure says why the Job's pods are not created, from its events.
func jobFailure(ctx context.Context, namespace, job string) string {
	events, err := framework.Client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "FailedCreate").String()})
	if err != nil {
		return err.Error()
	}
	mine := slices.DeleteFunc(events.Items, func(e eventsv1.Event) bool { return e.Regarding.Name != job })
	if len(mine) == 0 {
		return "no FailedCreate event"
	}
	return mine[len(mine)-1].Note
}

// TestAPodOfAnotherSchedulerIsNoMember: a gang of 3 of a
// scheduling.k8s.io PodGroup has two pods of muster-scheduler and one of
// another scheduler. The other pod is no member: muster's two wait
// outside the queue, told 2/3, holding no room, and are bound once a
// third pod of muster-scheduler comes; the other pod is left as it was.
// A pod of another scheduler that carries muster's member label is
// refused at the door, naming spec.schedulerName.
func TestAPodOfAnotherSchedulerIsNoMember(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	createUpstreamGang(t, ns, "mixed", 3)
	const gated = `scheduler_pending_pods{queue="gated"}`
	gatedBefore := framework.SchedulerMetrics(t)[gated]
	foreign := upstreamMember(ns, "mixed", 9)
	foreign.Spec.SchedulerName = corev1.DefaultSchedulerName
	framework.CreatePods(t, foreign, upstreamMember(ns, "mixed", 0), upstreamMember(ns, "mixed", 1))

	framework.Eventually(t, "muster's two members kept out of the queue", func(context.Context) (float64, error) {
		if n := framework.SchedulerMetrics(t)[gated]; n < gatedBefore+2 {
			return n, fmt.Errorf("%s is %v, was %v", gated, n, gatedBefore)
		}
		return 0, nil
	})
	want := topology.WaitingForMembersMessage(types.NamespacedName{Namespace: ns, Name: "mixed"}, 2, 3)
	for _, name := range []string{"mixed-0", "mixed-1"} {
		framework.WaitForPod(t, ns, name, want, func(pod *corev1.Pod) bool {
			c := framework.Condition(pod, corev1.PodScheduled)
			return c != nil && c.Message == want && !framework.IsBound(pod)
		})
	}

	framework.CreatePods(t, upstreamMember(ns, "mixed", 2))
	for _, name := range []string{"mixed-0", "mixed-1", "mixed-2"} {
		framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
	}
	other, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), foreign.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, labelled := other.Labels[topology.UpstreamMemberLabel]; labelled || len(other.Status.Conditions) > 0 {
		t.Errorf("the other scheduler's pod was changed: labels %v, conditions %v", other.Labels, other.Status.Conditions)
	}

	impostor := framework.InPool(plainUpstreamless(ns, "impostor"), ns)
	impostor.Labels[topology.UpstreamMemberLabel] = topology.UpstreamMemberValue("mixed")
	impostor.Labels[topology.RoleLabel], impostor.Labels[topology.IndexLabel] = "worker", "0"
	_, err = framework.Client.CoreV1().Pods(ns).Create(context.Background(), impostor, metav1.CreateOptions{})
	if want := "spec.schedulerName"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), topology.UpstreamMemberLabel) {
		t.Errorf("creating a default-scheduler pod with %s: got %v, want a refusal naming %s", topology.UpstreamMemberLabel, err, want)
	}
}

// plainUpstreamless is a pod of the default scheduler, in no group.
func plainUpstreamless(namespace, name string) *corev1.Pod {
	pod := framework.MemberPod(namespace, name, 0, "100m").Name(name).SchedulerName(corev1.DefaultSchedulerName).Obj()
	delete(pod.Labels, topology.GroupLabel)
	return pod
}

// TestAControllerOutageLetsAnUpstreamPodGroupGo: with muster-controller
// paused (SIGSTOP), a scheduling.k8s.io PodGroup with muster's
// annotations is labelled, and, deleted once its last pod is gone, goes:
// kube-controller-manager removes its podgroup-protection finalizer, an
// update that muster-controller's webhook is not called for.
func TestAControllerOutageLetsAnUpstreamPodGroupGo(t *testing.T) {
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	guarded := upstreamGang(ns, "guarded", 1)
	guarded.Annotations = map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1"}
	createPodGroup(t, guarded)
	member := upstreamRolePod(ns, "guarded", "master", 0)
	framework.CreatePods(t, member)
	framework.WaitForPod(t, ns, member.Name, "bound", framework.IsBound)
	podGroups := framework.Client.SchedulingV1beta1().PodGroups(ns)
	const protection = "scheduling.k8s.io/podgroup-protection"
	framework.Eventually(t, "the PodGroup protected", func(ctx context.Context) (bool, error) {
		pg, err := podGroups.Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil || !slices.Contains(pg.Finalizers, protection) {
			return false, fmt.Errorf("finalizers %v (%v): without %s this test shows nothing", pg.GetFinalizers(), err, protection)
		}
		return true, nil
	})

	resume, err := framework.Cluster().Pause("muster-controller")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := resume(); err != nil {
			t.Error(err)
		}
	})
	if _, err := podGroups.Patch(ctx, "guarded", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("labelling the PodGroup: %v", err)
	}
	if err := podGroups.Delete(ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the PodGroup: %v", err)
	}
	if err := framework.Client.CoreV1().Pods(ns).Delete(ctx, member.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("deleting its last pod: %v", err)
	}
	framework.Eventually(t, "the PodGroup gone", func(ctx context.Context) (bool, error) {
		pg, err := podGroups.Get(ctx, "guarded", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there, finalizers %v (%v)", pg.GetFinalizers(), err)
	})
}

// TestAnUpstreamGangWithATopologyConstraintStaysInOneRack: a gang of 4 in
// a scheduling.k8s.io PodGroup whose schedulingConstraints name the rack
// label, in a pool of rack-a (2 nodes of 2 CPUs) and rack-b (3 such
// nodes), is placed whole in rack-a, the tightest rack that holds it.
func TestAnUpstreamGangWithATopologyConstraintStaysInOneRack(t *testing.T) {
	framework.LogTailOnFailure(t, "muster-scheduler")
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 2, "rack-b": 3}, "2")
	pg := upstreamGang(ns, "job", 4)
	pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: framework.RackLabel}}}
	createPodGroup(t, pg)
	stored, err := framework.Client.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the PodGroup: %v", err)
	}
	if c := stored.Spec.SchedulingConstraints; c == nil || len(c.Topology) == 0 {
		t.Fatalf("the API server dropped the PodGroup's topology constraint: is TopologyAwareWorkloadScheduling on?")
	}
	var names []string
	for i := range 4 {
		pod := upstreamMember(ns, "job", i)
		framework.CreatePods(t, pod)
		names = append(names, pod.Name)
	}
	for _, name := range names {
		framework.WaitForPod(t, ns, name, "bound", framework.IsBound)
	}
	framework.CheckInRack(t, ns, names, "rack-a")
}

// TestAJobWithAGangPolicyWaitsInKueueThenRunsAsAGang: two Indexed Jobs of
// three pods with spec.scheduling's gang policy, in a Kueue ClusterQueue
// whose quota holds one, on a pool with room for one. The second waits in
// Kueue, suspended and with no pod, until the first has completed. Each,
// once admitted, gets its Workload and PodGroup from the Job controller,
// and muster-scheduler schedules it as that PodGroup's gang of three.
func TestAJobWithAGangPolicyWaitsInKueueThenRunsAsAGang(t *testing.T) {
	ns := framework.QueuedNamespace(t, 1, "3", "3")
	framework.LogTailOnFailure(t, "kueue")
	early := framework.WatchNoneBefore(t, ns, func(pod *corev1.Pod) bool {
		return pod.Labels[batchv1.JobNameLabel] == "first" && pod.Status.Phase == corev1.PodSucceeded
	}, func(pod *corev1.Pod) bool { return pod.Labels[batchv1.JobNameLabel] == "second" })
	template := framework.InPool(framework.MemberPod(ns, "unused", 0, "1").Obj(), ns)
	delete(template.Labels, topology.GroupLabel)
	for _, name := range []string{"first", "second"} {
		job := asGang(indexedJob(template, name, 3), 3)
		job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "lq"}
		job.Spec.Template.Annotations = map[string]string{"muster.dev/sim-run-for": "2s"}
		// Kueue's webhook serves a moment after Kueue is ready.
		framework.Eventually(t, "Job "+name+" created", func(ctx context.Context) (*batchv1.Job, error) {
			return framework.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		})
		// Created in one second, the two would be queued in either order.
		if name == "first" {
			framework.WaitForAPodOf(t, ns, batchv1.JobNameLabel+"=first")
		}
	}

	for _, name := range []string{"first", "second"} {
		framework.Eventually(t, "Job "+name+" complete", func(ctx context.Context) (string, error) {
			job, err := framework.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			for _, c := range job.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					return "complete", nil
				}
			}
			return "", fmt.Errorf("conditions %v", job.Status.Conditions)
		})
	}
	pgs, err := framework.Client.SchedulingV1beta1().PodGroups(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pgs.Items) != 2 {
		t.Fatalf("%d PodGroups, want the two the Job controller made", len(pgs.Items))
	}
	for _, pg := range pgs.Items {
		if gang := pg.Spec.SchedulingPolicy.Gang; gang == nil || gang.MinCount != 3 {
			t.Errorf("PodGroup %s has policy %+v, want a gang of 3", pg.Name, pg.Spec.SchedulingPolicy)
		}
		waitForInitiallyScheduled(t, ns, pg.Name, metav1.ConditionTrue, "Scheduled")
	}
	if pod := early(); pod != "" {
		t.Errorf("the second Job, beyond the queue's quota, had pod %s before the first had completed", pod)
	}
}
