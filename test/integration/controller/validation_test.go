package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/controller/podgroup"
	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// TestBadPodGroupsAreRefused: every PodGroup that muster could not serve
// is refused at creation, with the field and the fix, and none is stored.
func TestBadPodGroupsAreRefused(t *testing.T) {
	ns := framework.NewNamespace(t)
	fw := func(framework, roles string, more ...string) map[string]string {
		a := map[string]string{topology.FrameworkAnnotation: framework, topology.RolesAnnotation: roles}
		for i := 0; i+1 < len(more); i += 2 {
			a[more[i]] = more[i+1]
		}
		return a
	}
	tests := []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{"1job", fw("mpi", "launcher=1,worker=2"), []string{`metadata.name: Invalid value: "1job"`, "must be a DNS-1035 label", "rename the PodGroup"}},
		{"a.b", fw("mpi", "launcher=1,worker=2"), []string{`metadata.name: Invalid value: "a.b"`, "must be a DNS-1035 label"}},
		{strings.Repeat("g", 60), fw("mpi", "launcher=1,worker=2"), []string{"the longest member hostname", "-launcher-0", "over the limit of 63"}},
		{"role", fw("generic", strings.Repeat("r", 63)+"=1"), []string{"over the limit of 63; shorten the PodGroup's name or role " + strings.Repeat("r", 63)}},
		{"trainer", fw("pytorch", "trainer=2"), []string{`metadata.annotations[muster.dev/roles]: Invalid value: "trainer"`, "PyTorch needs a master"}},
		{"chief", fw("tensorflow", "master=1,chief=1,worker=1"), []string{"keep only one of master and chief"}},
		{"noscheduler", fw("mxnet", "server=1,worker=2"), []string{"add scheduler=1"}},
		{"noworker", fw("mpi", "launcher=1"), []string{"add worker=N"}},
		{"huge", fw("tensorflow", "ps=1,worker=99999"), []string{"metadata.annotations[muster.dev/roles]", "over the limit of 262144; run fewer replicas per group"}},
		{"typo", map[string]string{"muster.dev/framwork": "mpi"}, []string{"metadata.annotations[muster.dev/framwork]", "did you mean muster.dev/framework?"}},
		{"elastic", fw("tensorflow", "ps=1,worker=2", topology.ElasticAnnotation, "1:2"), []string{"metadata.annotations[muster.dev/elastic]: Forbidden: framework tensorflow does not read it", "TF_CONFIG"}},
		{"port", fw("mpi", "launcher=1,worker=2", topology.PortAnnotation, "2222"), []string{"metadata.annotations[muster.dev/port]: Forbidden: framework mpi does not read it"}},
	}
	podGroups := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns)
	for _, tt := range tests {
		t.Run(tt.name[:min(len(tt.name), 12)], func(t *testing.T) {
			pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Annotations: tt.annotations}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}
			_, err := podGroups.Create(context.Background(), pg, metav1.CreateOptions{})
			wantRefused(t, err, tt.want...)
		})
	}
	stored, err := podGroups.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(stored.Items) != 0 {
		t.Errorf("want no PodGroup stored, have %d (err %v)", len(stored.Items), err)
	}
}

// TestBadMembersAreRefused: a second pod with a role and index already
// taken, a pod labelled into a group after it was created, and a member
// moved to another index are refused, naming the field.
func TestBadMembersAreRefused(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.CreatePodGroup(t, ns, "d", 3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	first := create(t, member(ns, "d", "worker", 0).Obj())

	second := member(ns, "d", "worker", 0).Name("d-worker-again").Obj()
	_, err := framework.Client.CoreV1().Pods(ns).Create(context.Background(), second, metav1.CreateOptions{})
	wantRefused(t, err, "metadata.labels[muster.dev/index]: Duplicate value", "worker 0 of group d is pod "+first.Name+" already")

	// A pod that joins by a later label would bypass the pod webhook: no
	// hostname, no environment.
	unlabelled := create(t, st.MakePod().Namespace(ns).Name("plain").SchedulerName(localcluster.SchedulerName).Container("registry.k8s.io/pause:3.10").
		SchedulingGates([]string{"test.muster.dev/hold"}).Obj())
	unlabelled.Labels = map[string]string{topology.GroupLabel: "d", topology.RoleLabel: "worker", topology.IndexLabel: "1"}
	_, err = framework.Client.CoreV1().Pods(ns).Update(context.Background(), unlabelled, metav1.UpdateOptions{})
	wantRefused(t, err, "metadata.labels[scheduling.x-k8s.io/pod-group]: Forbidden: a pod joins a group only when it is created")

	// The member's status may change meanwhile: each change is applied to
	// the pod as it is, again after a conflict, so that only the webhook
	// can refuse it.
	relabel := func(key, value string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pod, err := framework.Client.CoreV1().Pods(ns).Get(context.Background(), first.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pod.Labels[key] = value
			_, err = framework.Client.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{})
			return err
		})
	}
	wantRefused(t, relabel(topology.IndexLabel, "1"), "metadata.labels[muster.dev/index]: Forbidden: a member keeps the index it was created with")

	// Other changes to a member pass.
	if err := relabel("team", "a"); err != nil {
		t.Errorf("a label muster does not read was refused: %v", err)
	}

	clash := member(ns, "d", "worker", 1).Obj()
	clash.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: envinject.PortName, ContainerPort: 9000}}
	_, err = framework.Client.CoreV1().Pods(ns).Create(context.Background(), clash, metav1.CreateOptions{})
	wantRefused(t, err, `spec.containers[0].ports[0].name: Invalid value: "muster"`, "rename this port, or make it 22")
}

// TestTheLargestGroupFits creates the largest TensorFlow group the size
// check accepts here, and one of its members with four containers, each
// given the environment: the API server stores both, so the limit is safe.
// One worker more is refused.
func TestTheLargestGroupFits(t *testing.T) {
	ns := framework.NewNamespace(t)
	largest := int32(0)
	for n := int32(1); n < 1<<16; n *= 2 {
		if len(groupSize(ns, n)) > 0 {
			break
		}
		largest = n
	}
	for step := largest / 2; step > 0; step /= 2 {
		if len(groupSize(ns, largest+step)) == 0 {
			largest += step
		}
	}
	roles := fmt.Sprintf("ps=1,worker=%d", largest)
	framework.CreatePodGroup(t, ns, "big", 1, map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: roles})
	pod := member(ns, "big", "worker", int(largest-1)).Container("b").Container("c").Container("d").Obj()
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Name = fmt.Sprintf("c%d", i)
	}
	stored := create(t, pod)
	if value, ok := env(stored, "TF_CONFIG"); !ok || !strings.Contains(value, fmt.Sprintf("big-worker-%d", largest-1)) {
		t.Errorf("the largest group's member lacks its TF_CONFIG")
	}
	t.Logf("the largest TensorFlow group named big in %s has %d workers", ns, largest)

	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "bigger", Annotations: map[string]string{
		topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: fmt.Sprintf("ps=1,worker=%d", largest+16)}}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}
	_, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	wantRefused(t, err, "over the limit of")
}

func groupSize(namespace string, workers int32) []string {
	topo, errs := topology.Parse(map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: fmt.Sprintf("ps=1,worker=%d", workers)})
	if len(errs) > 0 {
		return []string{errs.ToAggregate().Error()}
	}
	var out []string
	for _, err := range envinject.CheckSize(envinject.Group{Name: "big", Namespace: namespace, Topology: topo, WorkerSlots: 1}) {
		out = append(out, err.Error())
	}
	return out
}

// TestAStoredGroupMusterCannotServeIsReportedOnce: a PodGroup stored past
// the webhook with a name that cannot name its Service gets one Warning
// event, however often it is reconciled, and its members are refused.
func TestAStoredGroupMusterCannotServeIsReportedOnce(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.WithoutPodGroupValidation(t)
	framework.CreatePodGroup(t, ns, "1job", 2, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=1"})
	note := framework.WaitForEvent(t, ns, "1job", podgroup.ReasonInvalidGroup)
	if !strings.Contains(note, `metadata.name: Invalid value: "1job"`) {
		t.Errorf("the event says %q; want the field and the fix", note)
	}
	// Each status write reconciles the group again.
	podGroups := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns)
	for i := range 5 {
		// muster-controller writes the status too: a write of ours that
		// crosses one of its is made again on the latest version.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pg, err := podGroups.Get(context.Background(), "1job", metav1.GetOptions{})
			if err != nil {
				return err
			}
			pg.Status.OccupiedBy = fmt.Sprint(i)
			_, err = podGroups.UpdateStatus(context.Background(), pg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("writing the status of PodGroup 1job: %v", err)
		}
	}
	_, err := framework.Client.CoreV1().Pods(ns).Create(context.Background(), member(ns, "1job", "worker", 0).Obj(), metav1.CreateOptions{})
	wantRefused(t, err, `metadata.name: Invalid value: "1job"`)

	events, err := framework.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	for _, e := range events.Items {
		if e.Reason == podgroup.ReasonInvalidGroup && (e.DeprecatedCount > 1 || e.Series != nil) {
			t.Errorf("the failure was told %d times; want once", e.DeprecatedCount)
		}
	}
	if _, err := framework.Client.CoreV1().Services(ns).Get(context.Background(), "1job", metav1.GetOptions{}); err == nil {
		t.Errorf("a Service was made for a group muster cannot serve")
	}
}
