package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func TestGroupOf(t *testing.T) {
	upstream := func(name string) *st.PodWrapper {
		pod := st.MakePod().Namespace("team-a").Name("p")
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
		return pod
	}
	tests := []struct {
		name         string
		pod          *corev1.Pod
		want         types.NamespacedName
		wantOK       bool
		wantLabelled bool
		wantField    string
	}{
		{"labelled", st.MakePod().Namespace("team-a").Name("p").Label(GroupLabel, "job").Obj(), types.NamespacedName{Namespace: "team-a", Name: "job"}, true, true, GroupLabelField},
		{"same group name, other namespace", st.MakePod().Namespace("team-b").Name("p").Label(GroupLabel, "job").Obj(), types.NamespacedName{Namespace: "team-b", Name: "job"}, true, true, GroupLabelField},
		{"no label", st.MakePod().Namespace("team-a").Name("p").Obj(), types.NamespacedName{}, false, false, UpstreamGroupField},
		{"empty label", st.MakePod().Namespace("team-a").Name("p").Label(GroupLabel, "").Obj(), types.NamespacedName{}, false, false, UpstreamGroupField},
		{"in a scheduling.k8s.io PodGroup", upstream("train").Obj(), types.NamespacedName{Namespace: "team-a", Name: "train"}, true, false, UpstreamGroupField},
		{"the label wins over spec.schedulingGroup", upstream("train").Label(GroupLabel, "job").Obj(), types.NamespacedName{Namespace: "team-a", Name: "job"}, true, true, GroupLabelField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := GroupOf(tt.pod)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
			_, labelled := LabeledGroupOf(tt.pod)
			assert.Equal(t, tt.wantLabelled, labelled)
			assert.Equal(t, tt.wantField, GroupFieldOf(tt.pod))
		})
	}
}

func TestFromUpstream(t *testing.T) {
	gang := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team-a", Name: "train", UID: "u1",
			Annotations:     map[string]string{LaunchOrderAnnotation: "launcher>worker"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", Controller: ptr.To(true)}},
		},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 5}}},
	}
	got := FromUpstream(gang)
	assert.Equal(t, int32(5), got.Spec.MinMember, "a gang's quorum is its minCount")
	assert.Equal(t, gang.Name, got.Name)
	assert.Equal(t, gang.UID, got.UID)
	assert.Equal(t, gang.Annotations, got.Annotations)
	assert.Equal(t, gang.OwnerReferences, got.OwnerReferences)
	assert.True(t, IsUpstream(got))

	basic := gang.DeepCopy()
	basic.Spec.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	assert.Equal(t, int32(1), FromUpstream(basic).Spec.MinMember, "a basic policy is no gang")

	assert.False(t, IsUpstream(&v1alpha1.PodGroup{}), "scheduler-plugins' own PodGroup")
}

func TestIsActiveMember(t *testing.T) {
	deleting := st.MakePod().Name("p").Obj()
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"pending", st.MakePod().Name("p").Obj(), true},
		{"running", st.MakePod().Name("p").Phase(corev1.PodRunning).Obj(), true},
		{"succeeded", st.MakePod().Name("p").Phase(corev1.PodSucceeded).Obj(), false},
		{"failed", st.MakePod().Name("p").Phase(corev1.PodFailed).Obj(), false},
		{"being deleted", deleting, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsActiveMember(tt.pod))
		})
	}
}

func TestRoleOf(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		want   string
		wantOK bool
	}{
		{"muster's label", st.MakePod().Label(RoleLabel, "worker").Obj(), "worker", true},
		{"Kubeflow's, lower-cased", st.MakePod().Label(KubeflowRoleLabel, "Worker").Obj(), "worker", true},
		{"muster's label wins", st.MakePod().Label(RoleLabel, "launcher").Label(KubeflowRoleLabel, "Worker").Obj(), "launcher", true},
		{"none", st.MakePod().Obj(), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RoleOf(tt.pod)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestIndexOf(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    int32
		wantOK  bool
		wantErr string
	}{
		{"muster's label", st.MakePod().Label(IndexLabel, "3").Obj(), 3, true, ""},
		{"an Indexed Job", st.MakePod().Annotation(JobCompletionIndex, "2").Obj(), 2, true, ""},
		{"a StatefulSet", st.MakePod().Label(StatefulSetIndexLabel, "1").Obj(), 1, true, ""},
		{"Kubeflow", st.MakePod().Label(KubeflowIndexLabel, "4").Obj(), 4, true, ""},
		{"the first source wins", st.MakePod().Label(IndexLabel, "0").Annotation(JobCompletionIndex, "5").Obj(), 0, true, ""},
		{"none", st.MakePod().Obj(), 0, false, ""},
		{"not a number", st.MakePod().Label(IndexLabel, "one").Obj(), 0, true, `label muster.dev/index is "one"; it must be a whole number from 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := IndexOf(tt.pod)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tt.wantErr)
			}
		})
	}
}

func TestIdentify(t *testing.T) {
	topo, errs := Parse(map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2"})
	if len(errs) > 0 {
		t.Fatalf("parsing: %v", errs)
	}
	member := func() *st.PodWrapper { return st.MakePod().Namespace("team-a").Name("p").Label(GroupLabel, "job") }
	tests := []struct {
		name      string
		pod       *corev1.Pod
		want      Member
		wantField []string
		wantFix   string
	}{
		{"muster labels", member().Label(RoleLabel, "worker").Label(IndexLabel, "1").Obj(), Member{Role: "worker", Index: 1}, nil, ""},
		{"indexed job", member().Label(RoleLabel, "launcher").Annotation(JobCompletionIndex, "0").Obj(), Member{Role: "launcher", Index: 0}, nil, ""},
		{"kubeflow", member().Label(KubeflowRoleLabel, "Worker").Label(KubeflowIndexLabel, "0").Obj(), Member{Role: "worker", Index: 0}, nil, ""},
		{"mpi-operator's worker", member().Label(KubeflowJobRoleLabel, "worker").Label(KubeflowIndexLabel, "1").Obj(), Member{Role: "worker", Index: 1}, nil, ""},
		{"mpi-operator's launcher has no index: one replica is index 0", member().Label(KubeflowJobRoleLabel, "launcher").Obj(), Member{Role: "launcher", Index: 0}, nil, ""},
		{"the replica type wins over training-operator's job role", member().Label(KubeflowRoleLabel, "Launcher").Label(KubeflowJobRoleLabel, "master").Obj(), Member{Role: "launcher", Index: 0}, nil, ""},
		{"no role", member().Label(IndexLabel, "0").Obj(), Member{Index: 0}, []string{"metadata.labels[muster.dev/role]"}, "[launcher worker]"},
		{"unknown role", member().Label(RoleLabel, "ps").Label(IndexLabel, "0").Obj(), Member{Role: "ps"}, []string{"metadata.labels[muster.dev/role]"}, `"launcher", "worker"`},
		{"no index", member().Label(RoleLabel, "worker").Obj(), Member{Role: "worker"}, []string{"metadata.labels[muster.dev/index]"}, "Indexed Job"},
		{"index not a number", member().Label(RoleLabel, "worker").Label(IndexLabel, "one").Obj(), Member{Role: "worker"}, []string{"metadata.labels[muster.dev/index]"}, "whole number"},
		{"index out of range", member().Label(RoleLabel, "worker").Label(IndexLabel, "2").Obj(), Member{Role: "worker", Index: 2}, []string{"metadata.labels[muster.dev/index]"}, "from 0 to 1"},
		{"neither", member().Obj(), Member{}, []string{"metadata.labels[muster.dev/role]", "metadata.labels[muster.dev/index]"}, "set it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := topo.Identify(tt.pod)
			assert.Equal(t, tt.want, got)
			var fields []string
			for _, err := range errs {
				fields = append(fields, err.Field)
			}
			assert.Equal(t, tt.wantField, fields)
			if tt.wantFix != "" {
				assert.Contains(t, errs.ToAggregate().Error(), tt.wantFix)
			}
		})
	}
}

func TestUpstreamMemberValue(t *testing.T) {
	jobs := "distributed-training-run-7db8b58bb-distributed-training-run-pgt-0-5fdcb7f699"
	tests := []struct {
		name string
		want string
	}{
		{"mpi", "mpi"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		{jobs, jobs[:30] + "_" + hashOf(jobs)},
		{strings.Repeat("b", 253), strings.Repeat("b", 30) + "_" + hashOf(strings.Repeat("b", 253))},
	}
	for _, tt := range tests {
		got := UpstreamMemberValue(tt.name)
		assert.Equal(t, tt.want, got, "the value for %q", tt.name)
		assert.Empty(t, validation.IsValidLabelValue(got), "%q is a label value", got)
	}
	assert.NotEqual(t, UpstreamMemberValue(jobs), UpstreamMemberValue(jobs+"x"), "two long names that share a start")
	short := UpstreamMemberValue(jobs)
	assert.NotEqual(t, short, UpstreamMemberValue(strings.ReplaceAll(short, "_", "-")), "a shortened value is no name's own")
}

func hashOf(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

func TestNotAMember(t *testing.T) {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "spd", UID: "new"}}
	musters := func(name string) bool { return name == SchedulerName }
	member := func() *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name("spd-worker-0").SchedulerName(SchedulerName).Label(GroupLabel, "spd")
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		pg   *v1alpha1.PodGroup
		want string
	}{
		{"muster's pod", member().Obj(), pg, ""},
		{"built for this PodGroup", member().Annotation(BuiltForAnnotation, "new").Obj(), pg, ""},
		{"of no PodGroup yet", member().Annotation(BuiltForAnnotation, "old").Obj(), nil, ""},
		{"another scheduler's pod", member().SchedulerName("default-scheduler").Obj(), pg, `is for scheduler "default-scheduler" (spec.schedulerName)`},
		{"built for an earlier PodGroup", member().Annotation(BuiltForAnnotation, "old").Obj(), pg, "built for an earlier PodGroup ns/spd (UID old, annotation muster.dev/pod-group-uid), deleted since"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NotAMember(tt.pod, tt.pg, musters)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
		})
	}
}
