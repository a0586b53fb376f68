// Package topology is the pure model of one group of pods: who belongs to
// it and, from its PodGroup's annotations, its roles and their order. It
// reads API objects and never talks to an API server.
package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// GroupLabel names the PodGroup a pod belongs to.
const GroupLabel = v1alpha1.PodGroupLabel

// GroupOf returns the key of the group the pod belongs to, in the pod's
// own namespace: the scheduler-plugins PodGroup its GroupLabel names, or
// else the scheduling.k8s.io PodGroup its spec.schedulingGroup names. A
// group never reaches across namespaces, and a name is one group in its
// namespace, whichever API holds it.
func GroupOf(pod *corev1.Pod) (types.NamespacedName, bool) {
	if key, ok := LabeledGroupOf(pod); ok {
		return key, true
	}
	if name := UpstreamGroupName(pod); name != "" {
		return types.NamespacedName{Namespace: pod.Namespace, Name: name}, true
	}
	return types.NamespacedName{}, false
}

// LabeledGroupOf returns the key of the scheduler-plugins PodGroup the
// pod's GroupLabel names.
func LabeledGroupOf(pod *corev1.Pod) (types.NamespacedName, bool) {
	name := pod.Labels[GroupLabel]
	if name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: pod.Namespace, Name: name}, true
}

// UpstreamGroupName is the name of the scheduling.k8s.io PodGroup the pod
// names in spec.schedulingGroup, or "".
func UpstreamGroupName(pod *corev1.Pod) string {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return *g.PodGroupName
	}
	return ""
}

// UpstreamMemberLabel is given by muster-controller to each member of a
// scheduling.k8s.io PodGroup, its value UpstreamMemberValue of the group's
// name, so that a label selects the group's members as GroupLabel selects
// a scheduler-plugins group's: its Service, and muster-controller's cache.
const UpstreamMemberLabel = "muster.dev/upstream-pod-group"

// UpstreamMemberValue is UpstreamMemberLabel's value for the members of
// the PodGroup name: the name itself when it is a label value (at most 63
// characters), else its first 30 characters, an underscore and 32 hex
// digits of its SHA-256. A PodGroup's name may be 253 characters (the Job
// controller names one from its Job's name twice); the value depends on
// the name alone, so every member, and a member created before its
// PodGroup, gets the same one; and no name has an underscore, so a
// shortened value is never another PodGroup's whole name.
func UpstreamMemberValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:30] + "_" + hex.EncodeToString(sum[:16])
}

// SchedulerName is the name pods give muster-scheduler's profile
// (spec.schedulerName); muster-controller's webhooks match it
// (manifests/webhook-configurations.yaml).
const SchedulerName = "muster-scheduler"

// BuiltForAnnotation records on a member the UID of the PodGroup muster
// built it for: its environment, files and mounts come from that
// PodGroup's topology.
const BuiltForAnnotation = "muster.dev/pod-group-uid"

// NotAMember says why a pod that names a group does not count as one of
// its members, or returns "" when it does. A group has one scheduler, as
// upstream requires (ours says which names are its): a pod for another
// one is left out of every count. And a member muster built for an
// earlier PodGroup of the same name (pg, nil when there is none now)
// carries that topology's environment and mounts, so it is not taken into
// the new one.
func NotAMember(pod *corev1.Pod, pg *v1alpha1.PodGroup, ours func(schedulerName string) bool) string {
	// Asked for every member on the scheduler's hot paths: the group is
	// read only for a message.
	if !ours(pod.Spec.SchedulerName) {
		group, _ := GroupOf(pod)
		return fmt.Sprintf("pod %s is for scheduler %q (spec.schedulerName), so it is not counted in group %s, whose members are muster-scheduler's", pod.Name, pod.Spec.SchedulerName, group)
	}
	if uid, ok := pod.Annotations[BuiltForAnnotation]; ok && pg != nil && uid != string(pg.UID) {
		group, _ := GroupOf(pod)
		return fmt.Sprintf("pod %s was built for an earlier PodGroup %s (UID %s, annotation %s), deleted since; its environment and mounts are that group's, so it does not join the new one (UID %s): delete the pod and create it again",
			pod.Name, group, uid, BuiltForAnnotation, pg.UID)
	}
	return ""
}

// MemberSelector is the label selector of pg's members.
func MemberSelector(pg *v1alpha1.PodGroup) map[string]string {
	if IsUpstream(pg) {
		return map[string]string{UpstreamMemberLabel: UpstreamMemberValue(pg.Name)}
	}
	return map[string]string{GroupLabel: pg.Name}
}

// Where a pod names its group, for messages.
const (
	GroupLabelField    = "label " + GroupLabel
	UpstreamGroupField = "spec.schedulingGroup.podGroupName"
)

// GroupFieldOf names where the pod names its group.
func GroupFieldOf(pod *corev1.Pod) string {
	if _, ok := LabeledGroupOf(pod); ok {
		return GroupLabelField
	}
	return UpstreamGroupField
}

// IsActiveMember reports whether a member counts toward its group: it is not
// being deleted and has not finished.
func IsActiveMember(pod *corev1.Pod) bool {
	return PhaseOf(pod).IsActive()
}

// WaitingForPodGroupMessage says why a member waits when its PodGroup does
// not exist; namedBy is where its members name it (GroupFieldOf).
func WaitingForPodGroupMessage(group types.NamespacedName, namedBy string) string {
	return fmt.Sprintf("waiting for PodGroup %s to be created (named by %s)", group, namedBy)
}

// WaitingForMembersMessage says why a member waits when its group has fewer
// pods toward its quorum (Census.TowardQuorum) than minMember, for example
// "waiting for 3 more pods of group ns/name (5/8)".
func WaitingForMembersMessage(group types.NamespacedName, members, minMember int32) string {
	return fmt.Sprintf("waiting for %d more pods of group %s (%d/%d)", minMember-members, group, members, minMember)
}

// Role labels, in the order they are read: muster's own, then the
// operators': training-operator's replica type, and mpi-operator's job
// role (training-operator also sets the job role, on its master only).
const (
	RoleLabel            = "muster.dev/role"
	KubeflowRoleLabel    = "training.kubeflow.org/replica-type"
	KubeflowJobRoleLabel = "training.kubeflow.org/job-role"
)

// Index sources, in the order they are read: muster's own label, an Indexed
// Job's completion index, a StatefulSet's pod index, Kubeflow's replica
// index.
const (
	IndexLabel            = "muster.dev/index"
	JobCompletionIndex    = "batch.kubernetes.io/job-completion-index"
	StatefulSetIndexLabel = "apps.kubernetes.io/pod-index"
	KubeflowIndexLabel    = "training.kubeflow.org/replica-index"
)

// IdentityLabels are the labels a member's place (its group, role and
// index) is read from, or found by (UpstreamMemberLabel), and
// IdentityAnnotations the annotations: an update that changes none of
// them cannot move a pod within or into a group.
func IdentityLabels() []string {
	return []string{GroupLabel, UpstreamMemberLabel, RoleLabel, KubeflowRoleLabel, KubeflowJobRoleLabel, JobSetReplicatedJobLabel,
		IndexLabel, StatefulSetIndexLabel, KubeflowIndexLabel}
}

// IdentityAnnotations: see IdentityLabels.
func IdentityAnnotations() []string { return []string{JobCompletionIndex} }

// IndexOf returns the pod's index within its role from the first source
// that has one; ok is false when none has, and err names the source whose
// value is not a number.
func IndexOf(pod *corev1.Pod) (index int32, ok bool, err error) {
	sources := []struct {
		name  string
		value string
	}{
		{"label " + IndexLabel, pod.Labels[IndexLabel]},
		{"annotation " + JobCompletionIndex, pod.Annotations[JobCompletionIndex]},
		{"label " + StatefulSetIndexLabel, pod.Labels[StatefulSetIndexLabel]},
		{"label " + KubeflowIndexLabel, pod.Labels[KubeflowIndexLabel]},
	}
	for _, source := range sources {
		if source.value == "" {
			continue
		}
		n, err := strconv.ParseInt(source.value, 10, 32)
		if err != nil || n < 0 {
			return 0, true, fmt.Errorf("%s is %q; it must be a whole number from 0", source.name, source.value)
		}
		return int32(n), true, nil
	}
	return 0, false, nil
}

// jobSetIndex numbers a JobSet's pod across the Jobs of its replicated
// job: Job j's pod p is j × (pods per Job) + p, where the pods per Job are
// the role's replicas over its replicated job's.
func jobSetIndex(pod *corev1.Pod, podIndex, roleReplicas int32) (int32, error) {
	jobIndex, errIndex := strconv.ParseInt(pod.Labels[JobSetJobIndexLabel], 10, 32)
	jobs, errJobs := strconv.ParseInt(pod.Labels[JobSetReplicasLabel], 10, 32)
	if errIndex != nil || errJobs != nil || jobIndex < 0 || jobs < 1 {
		return 0, fmt.Errorf("JobSet's labels %s=%q and %s=%q must be whole numbers", JobSetJobIndexLabel, pod.Labels[JobSetJobIndexLabel], JobSetReplicasLabel, pod.Labels[JobSetReplicasLabel])
	}
	return int32(jobIndex)*(roleReplicas/int32(jobs)) + podIndex, nil
}

// RoleOf returns the pod's role from the first of the role labels it has
// (muster's, the Kubeflow operators', JobSet's replicated job name), in
// lower case for the operators' (training-operator writes "Master").
func RoleOf(pod *corev1.Pod) (string, bool) {
	if role := pod.Labels[RoleLabel]; role != "" {
		return role, true
	}
	for _, label := range []string{KubeflowRoleLabel, KubeflowJobRoleLabel, JobSetReplicatedJobLabel} {
		if role := pod.Labels[label]; role != "" {
			return strings.ToLower(role), true
		}
	}
	return "", false
}

// InvalidMessage says why a group with an invalid topology is not
// scheduled: every problem, each naming its annotation and the fix.
func InvalidMessage(group types.NamespacedName, errs field.ErrorList) string {
	return fmt.Sprintf("invalid topology in PodGroup %s: %s", group, errs.ToAggregate().Error())
}

// Member is one pod's place in its group.
type Member struct {
	Role  string
	Index int32
}

// Identify finds the pod's role and index and checks them against the
// topology. Each problem names the label to set and how.
func (t *Topology) Identify(pod *corev1.Pod) (Member, field.ErrorList) {
	labels := field.NewPath("metadata", "labels")
	var errs field.ErrorList
	role, ok := RoleOf(pod)
	switch {
	case !ok:
		errs = append(errs, field.Required(labels.Key(RoleLabel),
			fmt.Sprintf("a member of a group with roles says which it is; set it to one of %v", t.Roles)))
	case !slices.Contains(t.Roles, role):
		errs = append(errs, field.NotSupported(labels.Key(RoleLabel), role, t.Roles))
	}
	index, ok, err := IndexOf(pod)
	if ok && err == nil && pod.Labels[IndexLabel] == "" && pod.Labels[JobSetJobIndexLabel] != "" {
		index, err = jobSetIndex(pod, index, t.Replicas[role])
	}
	if !ok && err == nil && t.Replicas[role] == 1 {
		// A role of one replica needs no index: mpi-operator's launcher
		// has none.
		index, ok = 0, true
	}
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(labels.Key(IndexLabel), index, err.Error()))
	case !ok:
		errs = append(errs, field.Required(labels.Key(IndexLabel),
			fmt.Sprintf("a member says which replica of its role it is; set it, or create the pods with an Indexed Job (%s) or a StatefulSet (%s)", JobCompletionIndex, StatefulSetIndexLabel)))
	case len(errs) == 0 && index >= t.Replicas[role]:
		errs = append(errs, field.Invalid(labels.Key(IndexLabel), index,
			fmt.Sprintf("role %s has %d replicas, so its index runs from 0 to %d; fix the index or raise %s", role, t.Replicas[role], t.Replicas[role]-1, RolesAnnotation)))
	}
	return Member{Role: role, Index: index}, errs
}

// NoDomainMessage says why a gang that must stay in one topology domain
// waits: no domain of the label has room for its members, and the closest
// has room for only some, for example "no topology.kubernetes.io/rack
// domain has room for the 8 members group ns/name lacks; the closest,
// rack-3, has room for 6".
func NoDomainMessage(group types.NamespacedName, label string, members int, closest string, room int) string {
	return fmt.Sprintf("no %s%s the %d members group %s lacks; the closest, %s, has room for %d",
		label, NoDomainMarker, members, group, closest, room)
}

// NoDomainMarker is the part of NoDomainMessage that tells it from any
// other reason a gang waits.
const NoDomainMarker = " domain has room for"
