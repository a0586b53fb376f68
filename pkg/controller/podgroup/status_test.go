package podgroup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

const ns = "team-a"

var (
	epoch   = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	earlier = metav1.NewTime(epoch.Add(-time.Hour))
)

func member(name string) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(name).UID(name).SchedulerName(topology.SchedulerName).Label(topology.GroupLabel, "job")
}

func pods(wrappers ...*st.PodWrapper) []corev1.Pod {
	out := make([]corev1.Pod, 0, len(wrappers))
	for _, w := range wrappers {
		out = append(out, *w.Obj())
	}
	return out
}

func podGroup(minMember int32, status v1alpha1.PodGroupStatus) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember},
		Status:     status,
	}
}

func TestDesiredStatus(t *testing.T) {
	tests := []struct {
		name    string
		pg      *v1alpha1.PodGroup
		members []corev1.Pod
		want    v1alpha1.PodGroupStatus
	}{
		{
			name:    "short of minMember",
			pg:      podGroup(3, v1alpha1.PodGroupStatus{}),
			members: pods(member("a"), member("b")),
			want:    v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupPending},
		},
		{
			name:    "complete, nothing bound: scheduling starts now",
			pg:      podGroup(2, v1alpha1.PodGroupStatus{}),
			members: pods(member("a"), member("b")),
			want:    v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupPending, ScheduleStartTime: epoch},
		},
		{
			name:    "bound, not yet running; the start time stays",
			pg:      podGroup(2, v1alpha1.PodGroupStatus{ScheduleStartTime: earlier}),
			members: pods(member("a").Node("n"), member("b").Node("n")),
			want:    v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupScheduling, ScheduleStartTime: earlier},
		},
		{
			name:    "running",
			pg:      podGroup(2, v1alpha1.PodGroupStatus{ScheduleStartTime: earlier}),
			members: pods(member("a").Node("n").Phase(corev1.PodRunning), member("b").Node("n").Phase(corev1.PodRunning), member("c")),
			want:    v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupRunning, Running: 2, ScheduleStartTime: earlier},
		},
		{
			// The report: 2 scheduled, 2 running, 1 succeeded of minMember 3.
			name: "members finishing at different times: still running",
			pg:   podGroup(3, v1alpha1.PodGroupStatus{ScheduleStartTime: earlier}),
			members: pods(member("a").Node("n").Phase(corev1.PodRunning), member("b").Node("n").Phase(corev1.PodRunning),
				member("c").Node("n").Phase(corev1.PodSucceeded)),
			want: v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupRunning, Running: 2, Succeeded: 1, ScheduleStartTime: earlier},
		},
		{
			name:    "one bound, one succeeded, none running: scheduling",
			pg:      podGroup(2, v1alpha1.PodGroupStatus{ScheduleStartTime: earlier}),
			members: pods(member("a").Node("n"), member("b").Node("n").Phase(corev1.PodSucceeded)),
			want:    v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupScheduling, Succeeded: 1, ScheduleStartTime: earlier},
		},
		{
			name:    "finished",
			pg:      podGroup(2, v1alpha1.PodGroupStatus{ScheduleStartTime: earlier}),
			members: pods(member("a").Node("n").Phase(corev1.PodSucceeded), member("b").Node("n").Phase(corev1.PodSucceeded)),
			want:    v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupFinished, Succeeded: 2, ScheduleStartTime: earlier},
		},
		{
			name:    "a member failed",
			pg:      podGroup(2, v1alpha1.PodGroupStatus{ScheduleStartTime: earlier}),
			members: pods(member("a").Node("n").Phase(corev1.PodFailed), member("b").Node("n").Phase(corev1.PodRunning)),
			want:    v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupFailed, Running: 1, Failed: 1, ScheduleStartTime: earlier},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, desiredStatus(tt.pg, countMembers(tt.members), epoch))
		})
	}
}

func TestWaitingMessage(t *testing.T) {
	key := types.NamespacedName{Namespace: ns, Name: "job"}
	tests := []struct {
		name    string
		pg      *v1alpha1.PodGroup
		members []corev1.Pod
		want    string
	}{
		{"no PodGroup", nil, pods(member("a")), topology.WaitingForPodGroupMessage(key, topology.GroupLabelField)},
		{"no upstream PodGroup", nil, pods(upstreamMember("a")), topology.WaitingForPodGroupMessage(key, topology.UpstreamGroupField)},
		{"short of minMember", podGroup(8, v1alpha1.PodGroupStatus{}), pods(member("a"), member("b"), member("c"), member("d"), member("e")), "waiting for 3 more pods of group team-a/job (5/8)"},
		{"complete", podGroup(1, v1alpha1.PodGroupStatus{}), pods(member("a")), ""},
		{
			"an invalid topology",
			func() *v1alpha1.PodGroup {
				pg := podGroup(1, v1alpha1.PodGroupStatus{})
				pg.Annotations = map[string]string{topology.RolesAnnotation: "a=1,b=1", topology.LaunchOrderAnnotation: "a>b>a"}
				return pg
			}(),
			pods(member("a")),
			`invalid topology in PodGroup team-a/job: metadata.annotations[muster.dev/launch-order]: Invalid value: "a>b>a": the order has a cycle, a>b>a; a role cannot wait for itself`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, waitingMessage(tt.pg, tt.members, countMembers(tt.members), key))
		})
	}
}
