package gangview

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

var (
	now  = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	key  = types.NamespacedName{Namespace: "ns", Name: "g"}
	mpi  = map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}
	late = map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2",
		topology.LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"}}}`,
	}
)

func podGroup(minMember int32, annotations map[string]string) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "pg", Annotations: maps.Clone(annotations), CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// member is a pod of the group: state is one of pending, unschedulable,
// bound, running, ready, succeeded, failed.
func member(name, role, state string) corev1.Pod {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name, UID: types.UID(name), Labels: map[string]string{topology.GroupLabel: key.Name}},
		Spec:       corev1.PodSpec{SchedulerName: topology.SchedulerName},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if role != "" {
		pod.Labels[topology.RoleLabel] = role
		pod.Labels[topology.IndexLabel] = name[len(name)-1:]
	}
	switch state {
	case "unschedulable":
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient cpu."}}
	case "bound", "running", "ready", "succeeded", "failed":
		pod.Spec.NodeName = "n1"
	}
	switch state {
	case "running":
		pod.Status.Phase = corev1.PodRunning
	case "ready":
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	case "succeeded":
		pod.Status.Phase = corev1.PodSucceeded
	case "failed":
		pod.Status.Phase = corev1.PodFailed
	}
	return pod
}

func event(kind, name, reason, note string, age time.Duration) eventsv1.Event {
	return eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: fmt.Sprintf("%s.%s", name, reason)},
		Regarding:  corev1.ObjectReference{Kind: kind, Name: name},
		Reason:     reason, Note: note,
		EventTime: metav1.NewMicroTime(now.Add(-age)),
	}
}

func workload(admitted bool, message string) *unstructured.Unstructured {
	status := "False"
	if admitted {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "job-g", "namespace": key.Namespace},
		"spec":     map[string]any{"queueName": "lq"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "QuotaReserved", "status": status, "message": message},
			map[string]any{"type": "Admitted", "status": status, "message": message},
		}},
	}}
}

func published(pg *v1alpha1.PodGroup, record string) *v1alpha1.PodGroup {
	pg.Annotations[PublishedAnnotation] = record
	return pg
}

func gatedByKueue(pod corev1.Pod) corev1.Pod {
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: topology.KueueAdmissionGate}}
	return pod
}

func withQuorum(pg *v1alpha1.PodGroup) *v1alpha1.PodGroup {
	if pg.Annotations == nil {
		pg.Annotations = map[string]string{}
	}
	pg.Annotations[topology.QuorumReachedAnnotation] = now.Format(time.RFC3339)
	return pg
}

func TestViewPhase(t *testing.T) {
	tests := []struct {
		name       string
		objects    Objects
		phase      Phase
		waitingFor string
		launch     string
	}{
		{
			name:       "pods whose PodGroup does not exist wait for it",
			objects:    Objects{Pods: []corev1.Pod{member("g-0", "", "pending")}},
			phase:      WaitingForMembers,
			waitingFor: "waiting for PodGroup ns/g to be created",
		},
		{
			name:       "fewer pods than minMember wait for members",
			objects:    Objects{PodGroup: podGroup(3, nil), Pods: []corev1.Pod{member("g-0", "", "pending"), member("g-1", "", "pending")}},
			phase:      WaitingForMembers,
			waitingFor: "waiting for 1 more pods of group ns/g (2/3)",
		},
		{
			name:       "an invalid topology is what the gang waits for",
			objects:    Objects{PodGroup: podGroup(1, map[string]string{topology.FrameworkAnnotation: "caffe"}), Pods: []corev1.Pod{member("g-0", "", "pending")}},
			phase:      WaitingForMembers,
			waitingFor: "invalid topology",
		},
		{
			name:       "a Workload Kueue has not admitted is queued, with Kueue's word",
			objects:    Objects{PodGroup: podGroup(2, nil), Workload: workload(false, "couldn't assign flavors to pod set main: insufficient quota for cpu")},
			phase:      QueuedInKueue,
			waitingFor: "Kueue, queue lq: couldn't assign flavors to pod set main: insufficient quota for cpu",
		},
		{
			name:       "a gang not yet tried waits for room, and says so",
			objects:    Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "pending"), member("g-1", "", "pending")}},
			phase:      WaitingForRoom,
			waitingFor: "the scheduler has not tried it yet",
		},
		{
			name: "a rejected gang waits for room, with the rejection's reason",
			objects: Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "unschedulable"), member("g-1", "", "unschedulable")},
				Events: []eventsv1.Event{event("PodGroup", "g", ReasonGangRejected, "member g-1 fits on no node", time.Second)}},
			phase:      WaitingForRoom,
			waitingFor: "member g-1 fits on no node",
		},
		{
			name: "a gang taken by a preemption says by whom, then why it waits",
			objects: Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-2", "", "unschedulable"), member("g-3", "", "unschedulable")},
				Events: []eventsv1.Event{
					event("PodGroup", "g", ReasonGangAdmitted, "2/2 members placed", time.Minute),
					event("PodGroup", "g", ReasonPreempted, "all 2 members preempted by PodGroup ns/big (priority 100)", time.Second),
				}},
			phase:      WaitingForRoom,
			waitingFor: "all 2 members preempted by PodGroup ns/big (priority 100); 0/2 nodes are available",
		},
		{
			name:       "some members bound short of the quorum are partly bound",
			objects:    Objects{PodGroup: podGroup(3, nil), Pods: []corev1.Pod{member("g-0", "", "running"), member("g-1", "", "unschedulable"), member("g-2", "", "pending")}},
			phase:      PartlyBound,
			waitingFor: "1 of 3 bound; 0/2 nodes are available",
		},
		{
			name:       "a quorum bound, not yet running, is admitted",
			objects:    Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "bound"), member("g-1", "", "running")}},
			phase:      Admitted,
			waitingFor: "1 of 2 members running",
		},
		{
			name: "a launcher held for its workers is launching, its hold counted toward the quorum",
			objects: Objects{PodGroup: podGroup(3, mpi), Pods: []corev1.Pod{member("g-launcher-0", "launcher", "pending"), member("g-worker-0", "worker", "ready"), member("g-worker-1", "worker", "running")},
				Events: []eventsv1.Event{event("Pod", "g-launcher-0", ReasonLaunchHeld, "held until worker is Ready (1/2)", time.Second)}},
			phase:      Launching,
			waitingFor: "g-launcher-0 held until worker is Ready (1/2)",
			launch:     "worker 1/2 Ready, launcher held",
		},
		{
			name:       "a launcher the scheduler publishes as held is launching, with no event",
			objects:    Objects{PodGroup: published(podGroup(3, mpi), `{"held":["g-launcher-0"]}`), Pods: []corev1.Pod{member("g-launcher-0", "launcher", "pending"), member("g-worker-0", "worker", "running"), member("g-worker-1", "worker", "running")}},
			phase:      Launching,
			waitingFor: "g-launcher-0 held until its predecessors reach start-after",
			launch:     "worker 0/2 Ready, launcher held",
		},
		{
			name: "a record that holds no one outweighs a stale hold event",
			objects: Objects{PodGroup: published(podGroup(3, mpi), `{"lastAttempt":{"time":"2026-12-06T11:59:00Z","admitted":false}}`), Pods: []corev1.Pod{member("g-launcher-0", "launcher", "unschedulable"), member("g-worker-0", "worker", "unschedulable"), member("g-worker-1", "worker", "unschedulable")},
				Events: []eventsv1.Event{event("Pod", "g-launcher-0", ReasonLaunchHeld, "held until worker is Ready (1/2)", time.Minute)}},
			phase:  WaitingForRoom,
			launch: "worker 0/2 Ready, launcher waiting",
		},
		{
			name:       "pods Kueue gates are queued in Kueue",
			objects:    Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{gatedByKueue(member("g-0", "", "pending")), gatedByKueue(member("g-1", "", "pending"))}},
			phase:      QueuedInKueue,
			waitingFor: "Kueue has not admitted the pods",
		},
		{
			name: "a released launcher is no longer held",
			objects: Objects{PodGroup: podGroup(3, mpi), Pods: []corev1.Pod{member("g-launcher-0", "launcher", "running"), member("g-worker-0", "worker", "ready"), member("g-worker-1", "worker", "ready")},
				Events: []eventsv1.Event{
					event("Pod", "g-launcher-0", ReasonLaunchHeld, "held until worker is Ready (1/2)", 2*time.Second),
					event("Pod", "g-launcher-0", ReasonLaunchReleased, "released", time.Second),
				}},
			phase:  Running,
			launch: "worker 2/2 Ready, launcher started",
		},
		{
			name:       "an admitted gang whose late launcher is not created yet is launching",
			objects:    Objects{PodGroup: withQuorum(podGroup(3, late)), Pods: []corev1.Pod{member("g-worker-0", "worker", "ready"), member("g-worker-1", "worker", "running")}},
			phase:      Launching,
			waitingFor: "1 launcher not created yet by its owner",
			launch:     "worker 1/2 Ready, launcher not created",
		},
		{
			name:    "a quorum running is running",
			objects: Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "running"), member("g-1", "", "ready")}},
			phase:   Running,
		},
		{
			name:    "a quorum succeeded is finished",
			objects: Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "succeeded"), member("g-1", "", "succeeded")}},
			phase:   Finished,
		},
		{
			name:       "a failed member the gang cannot do without fails it",
			objects:    Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "failed"), member("g-1", "", "running")}},
			phase:      Failed,
			waitingFor: "1 members failed, and 1 of the 2 the gang needs are left",
		},
		{
			name:    "a failed member replaced by its owner does not fail the gang",
			objects: Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "failed"), member("g-0b", "", "running"), member("g-1", "", "running")}},
			phase:   Running,
		},
		{
			name: "another scheduler's pod is no member",
			objects: Objects{PodGroup: podGroup(2, nil), Pods: []corev1.Pod{member("g-0", "", "running"), member("g-1", "", "running"), func() corev1.Pod {
				p := member("g-2", "", "failed")
				p.Spec.SchedulerName = "default-scheduler"
				return p
			}()}},
			phase: Running,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.objects.Key, tt.objects.Now, tt.objects.SchedulerName = key, now, topology.SchedulerName
			g := View(tt.objects)
			if g.Phase != tt.phase {
				t.Errorf("phase %s, want %s (waiting for %q)", g.Phase, tt.phase, g.WaitingFor)
			}
			if !strings.Contains(g.WaitingFor, tt.waitingFor) || (tt.waitingFor == "" && g.WaitingFor != "") {
				t.Errorf("waiting for %q, want it to say %q", g.WaitingFor, tt.waitingFor)
			}
			if g.LaunchStage != tt.launch {
				t.Errorf("launch stage %q, want %q", g.LaunchStage, tt.launch)
			}
		})
	}
}

func TestViewReadsWhatTheSchedulerPublished(t *testing.T) {
	pg := withQuorum(podGroup(3, late))
	record, err := json.Marshal(Published{
		HeldRooms:   []HeldRoom{{Role: "launcher", Node: "n2", Expires: metav1.NewTime(now.Add(time.Minute))}},
		Domain:      "rack=r1",
		LastAttempt: &Attempt{Time: metav1.NewTime(now), Admitted: true, Message: "3/3 members placed"},
	})
	if err != nil {
		t.Fatal(err)
	}
	pg.Annotations[PublishedAnnotation] = string(record)
	g := View(Objects{Key: key, Now: now, PodGroup: pg, Pods: []corev1.Pod{member("g-worker-0", "worker", "ready"), member("g-worker-1", "worker", "ready")}})
	if len(g.HeldRooms) != 1 || g.HeldRooms[0].Node != "n2" || g.HeldRooms[0].Role != "launcher" {
		t.Errorf("held rooms %+v, want the launcher's on n2", g.HeldRooms)
	}
	if g.Domain != "rack=r1" {
		t.Errorf("domain %q, want the published rack=r1 while no bound member's node says", g.Domain)
	}
	if want := "room held on n2"; !strings.Contains(g.WaitingFor, want) {
		t.Errorf("waiting for %q, want it to say %q", g.WaitingFor, want)
	}
}

func TestViewDomainIsTheBoundMembersNodes(t *testing.T) {
	pg := podGroup(2, map[string]string{topology.DomainRequiredAnnotation: "rack"})
	nodes := map[string]*corev1.Node{"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "r3"}}}}
	g := View(Objects{Key: key, Now: now, PodGroup: pg, Nodes: nodes, Pods: []corev1.Pod{member("g-0", "", "running"), member("g-1", "", "running")}})
	if g.Domain != "rack=r3" {
		t.Errorf("domain %q, want rack=r3", g.Domain)
	}
}

func TestSourceOf(t *testing.T) {
	owned := func(kind string) *v1alpha1.PodGroup {
		pg := podGroup(1, nil)
		pg.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "train", Controller: ptrTrue()}}
		return pg
	}
	upstream := podGroup(1, nil)
	upstream.APIVersion = topology.UpstreamPodGroupVersion.String()
	tests := []struct {
		name string
		pg   *v1alpha1.PodGroup
		want string
	}{
		{"no PodGroup: only pods name the group", nil, "pods"},
		{"a scheduler-plugins PodGroup written by hand", podGroup(1, nil), "scheduling.x-k8s.io"},
		{"an upstream PodGroup", upstream, "scheduling.k8s.io"},
		{"an operator's job's PodGroup names the job", owned("PyTorchJob"), "PyTorchJob/train"},
		{"a Kueue pod group's PodGroup names its Workload", owned("Workload"), "Kueue/train"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sourceOf(tt.pg); got != tt.want {
				t.Errorf("source %q, want %q", got, tt.want)
			}
		})
	}
}

func ptrTrue() *bool { b := true; return &b }

func TestWhy(t *testing.T) {
	gang := func(phase Phase, waitingFor string, members ...Member) *Gang {
		return &Gang{Namespace: "ns", Name: "g", Phase: phase, WaitingFor: waitingFor, Members: members}
	}
	pending := member("g-0", "", "pending")
	tests := []struct {
		name string
		pod  corev1.Pod
		gang *Gang
		want Trouble
	}{
		{"a pod of another scheduler", func() corev1.Pod { p := pending; p.Spec.SchedulerName = "default-scheduler"; return p }(), nil, TroubleNotOurs},
		{"a bound pod is held by nothing", member("g-0", "", "running"), gang(Running, ""), TroubleNone},
		{"a pod of no group", pending, nil, TroubleNoGroup},
		{"a group with no PodGroup", pending, gang(WaitingForMembers, "waiting for PodGroup ns/g to be created (named by label x)"), TroubleNoPodGroup},
		{"a group short of pods", pending, gang(WaitingForMembers, "waiting for 1 more pods of group ns/g (2/3)"), TroubleFewMembers},
		{"a group with an invalid topology", pending, gang(WaitingForMembers, "invalid topology in PodGroup ns/g: ..."), TroubleInvalidTopology},
		{"a gang queued in Kueue", pending, gang(QueuedInKueue, "Kueue, queue lq: insufficient quota"), TroubleKueue},
		{"a launcher held", pending, gang(Launching, "g-0 held until worker is Ready (1/2)", Member{Name: "g-0", State: StateHeld, WaitingFor: "held until worker is Ready (1/2)"}), TroubleLaunchHeld},
		{"a gang that fits no domain", pending, gang(WaitingForRoom, topology.NoDomainMessage(key, "rack", 4, "r1", 2)), TroubleNoDomain},
		{"a gang short of devices", pending, gang(WaitingForRoom, "the claims ask for 4 devices of class gpu, and 2 of 8 are free"), TroubleDevices},
		{"a gang preempted", pending, gang(WaitingForRoom, "all 2 members preempted by PodGroup ns/big (priority 100); the scheduler has not tried it yet"), TroublePreempted},
		{"a gang with no room", pending, gang(WaitingForRoom, "member g-1 fits on no node"), TroubleNoRoom},
		{"a gang not yet tried", pending, gang(WaitingForRoom, "the scheduler has not tried it yet"), TroubleNotTried},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Why(&tt.pod, tt.gang, topology.SchedulerName); got.Trouble != tt.want {
				t.Errorf("trouble %q, want %q", got.Trouble.Shows, tt.want.Shows)
			}
		})
	}
}
