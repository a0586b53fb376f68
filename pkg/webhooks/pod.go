// Package webhooks holds muster-controller's admission webhooks: one gives
// each grouped pod its place in the group as it is created, one keeps a
// pod's place in its group from changing afterwards, and one refuses a
// PodGroup whose topology is invalid.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/jobsets"
	"github.com/muster-dev/muster/pkg/ownerscale"
	"github.com/muster-dev/muster/pkg/topology"
)

// Paths the webhooks are served at.
const (
	PodPath       = "/mutate-v1-pod"
	PodUpdatePath = "/validate-v1-pod"
	PodGroupPath  = "/validate-scheduling-x-k8s-io-v1alpha1-podgroup"
	// UpstreamPodGroupPath serves scheduling.k8s.io's PodGroups.
	UpstreamPodGroupPath = "/validate-scheduling-k8s-io-v1beta1-podgroup"
)

// PodDefaulter applies pkg/envinject to each grouped pod as it is created.
// It decides from the PodGroup and the group's other members (in an
// elastic group, also from its workers' owner's scale), and applying it to
// its own output changes nothing.
type PodDefaulter struct {
	// Client reads from the cache, and an owner's scale; Reader reads from
	// the API server: a group's members, whose indexes a member just
	// created already holds, and a PodGroup created too recently for the
	// cache to hold it.
	Client        client.Client
	Reader        client.Reader
	ClusterDomain string
}

var _ admission.CustomDefaulter = &PodDefaulter{}

// Default gives a member its environment, or refuses it with the field to
// fix. A failure that is no refusal is counted.
func (d *PodDefaulter) Default(ctx context.Context, obj runtime.Object) error {
	err := d.defaultPod(ctx, obj)
	if err != nil && !apierrors.IsInvalid(err) {
		injectionFailures.Inc()
	}
	return err
}

func (d *PodDefaulter) defaultPod(ctx context.Context, obj runtime.Object) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("expected a Pod, got %T", obj)
	}
	// A pod created by generateName has no name yet, and may have no
	// namespace in the object; the request has it.
	inRequestNamespace(ctx, pod)
	if placed, err := d.placeJobSetPod(ctx, pod); placed || err != nil {
		return err
	}
	placeKueuePodGroupPod(pod)
	key, ok := topology.GroupOf(pod)
	if !ok {
		return nil
	}
	_, labelled := topology.LabeledGroupOf(pod)
	if labelled {
		if err := d.refuseTwoGangs(ctx, pod, key); err != nil {
			return err
		}
	} else {
		labelUpstreamMember(pod, key.Name)
	}
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "generateName", pod.GenerateName, "podGroup", key)

	pg, err := d.podGroup(ctx, pod, key, labelled)
	if apierrors.IsNotFound(err) {
		if _, hasRole := topology.RoleOf(pod); hasRole {
			return invalidPod(pod, field.ErrorList{field.Invalid(groupPath(pod), key.Name,
				fmt.Sprintf("PodGroup %s does not exist, so muster cannot give this %s pod its environment; create the PodGroup before its pods", key, topology.RoleLabel))})
		}
		// A pod that asks only for gang scheduling may come first; it
		// waits in the scheduler for its PodGroup.
		return nil
	}
	if err != nil {
		return err
	}
	if pg.DeletionTimestamp != nil {
		return invalidPod(pod, field.ErrorList{field.Invalid(groupPath(pod), key.Name,
			fmt.Sprintf("PodGroup %s is being deleted, so no member joins it; create the pod once the PodGroup is gone and made again, or name another group", key))})
	}
	// The operator's members keep its hostnames, Service and environment;
	// muster adds nothing to them, even before their topology is derived.
	if owner, awaits := topology.AwaitsDerivation(pg); awaits {
		markAdded(pod, "nothing: the group's topology is being read from "+owner)
		return nil
	}
	topo, errs := topology.FromPodGroup(pg)
	if len(errs) > 0 {
		return errors.New(topology.InvalidMessage(key, errs))
	}
	if topo.DerivedFrom != "" {
		markAdded(pod, "nothing: the group's members are "+topo.DerivedFrom+"'s")
		return nil
	}
	if len(topo.Roles) == 0 {
		return nil
	}
	member, errs := topo.Identify(pod)
	if len(errs) > 0 {
		return invalidPod(pod, errs)
	}
	if errs := sameJobSet(pod, key, topo); len(errs) > 0 {
		return invalidPod(pod, errs)
	}
	names, errs, err := jobsets.Names(ctx, d.Reader, key.Namespace, topo)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return errors.New(topology.InvalidMessage(key, errs))
	}
	siblings, err := d.members(ctx, key, topology.MemberSelector(pg))
	if err != nil {
		return err
	}
	siblings = slices.DeleteFunc(siblings, func(other corev1.Pod) bool {
		return topology.NotAMember(&other, pg, func(name string) bool { return name == pod.Spec.SchedulerName }) != ""
	})
	if errs := duplicateOf(pod, member, siblings, topo); len(errs) > 0 {
		return invalidPod(pod, errs)
	}
	// Only MPI reads slots; only a non-worker needs another pod to find
	// them.
	worker := pod
	if topo.Framework == topology.MPI && member.Role != "worker" {
		worker = anyWorker(siblings)
	}
	group := envinject.Group{Name: key.Name, Namespace: key.Namespace, UID: pg.UID, Topology: topo, WorkerSlots: envinject.Slots(topo, worker), JobSet: names}
	if topo.Elastic != nil {
		if group.WorkersAtStart, err = d.workersAtStart(ctx, pod, member, siblings, topo); err != nil {
			return err
		}
	}
	if errs := envinject.Apply(pod, group, member, d.ClusterDomain); len(errs) > 0 {
		return invalidPod(pod, errs)
	}
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, topology.BuiltForAnnotation, string(pg.UID))
	added := "hostname, subdomain, environment, files"
	if !labelled {
		added += ", and the label " + topology.UpstreamMemberLabel
	}
	markAdded(pod, added)
	logger.V(2).Info("Gave a member its environment", "role", member.Role, "index", member.Index)
	return nil
}

// placeJobSetPod settles which group a pod of a JobSet belongs to, and
// reports whether it did; the pod's members are JobSet's, so muster adds
// nothing else to them.
//
// A pod that names no group joins the group muster-controller makes for
// its JobSet, named after it: the webhook configuration sends only the
// pods of JobSets scheduled by muster-scheduler. A JobSet that opts out or
// that muster cannot group is left alone.
//
// Kubeflow Trainer names its TrainJob's group, the JobSet and the
// TrainJob alike, and puts every pod into it; the pods of a replicated job
// that others wait for to Complete (an initializer) leave it.
//
// Either way, such a replicated job runs, and finishes, before the group
// does, so its pods are in no group. A pod that names a scheduling.k8s.io
// PodGroup is left to that group.
func (d *PodDefaulter) placeJobSetPod(ctx context.Context, pod *corev1.Pod) (bool, error) {
	name := pod.Labels[topology.JobSetNameLabel]
	// A pod that names a scheduling.k8s.io PodGroup is in that group.
	if name == "" || topology.UpstreamGroupName(pod) != "" {
		return false, nil
	}
	if group := pod.Labels[topology.GroupLabel]; group != "" && group != name {
		return false, nil
	}
	js := &unstructured.Unstructured{}
	js.SetGroupVersionKind(topology.JobSetGVK)
	err := d.Reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: name}, js)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading JobSet %s/%s: %w", pod.Namespace, name, err)
	}
	if pod.Labels[topology.GroupLabel] != "" {
		return leaveTrainJobGroup(pod, js), nil
	}
	if topology.WantsNoPodGroup(js) {
		return false, nil
	}
	group, err := topology.FromJobSet(js)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Leaving a JobSet's pod out of any group", "jobSet", klog.KObj(js), "reason", err.Error())
		return false, nil
	}
	if !group.Groups(pod.Labels[topology.JobSetReplicatedJobLabel]) {
		return false, nil
	}
	pod.Labels[topology.GroupLabel] = name
	markAdded(pod, fmt.Sprintf("the group label %s: the group's members are %s/%s's", topology.GroupLabel, topology.JobSetKind, name))
	return true, nil
}

// placeKueuePodGroupPod puts a pod of a Kueue pod group that names no
// group into the group of the pod group's name, whose PodGroup
// muster-controller makes once Kueue's Workload of it exists: a Kueue pod
// group is a gang with no PodGroup written by hand. A pod that names a
// group, either API's, stays in it.
func placeKueuePodGroupPod(pod *corev1.Pod) {
	name := topology.KueuePodGroupOf(pod)
	if name == "" || topology.UpstreamGroupName(pod) != "" || pod.Labels[topology.GroupLabel] != "" {
		return
	}
	pod.Labels[topology.GroupLabel] = name
	markAdded(pod, fmt.Sprintf("the group label %s: the group's members are Kueue pod group %s's (%s)", topology.GroupLabel, name, topology.KueuePodGroupLabel))
}

// leaveTrainJobGroup takes a pod of a TrainJob's JobSet out of the
// TrainJob's group when its replicated job runs first, and reports whether
// it did.
func leaveTrainJobGroup(pod *corev1.Pod, js *unstructured.Unstructured) bool {
	owner := metav1.GetControllerOfNoCopy(js)
	if owner == nil || owner.Kind != topology.TrainJobKind || owner.Name != pod.Labels[topology.GroupLabel] {
		return false
	}
	group, err := topology.FromJobSet(js)
	rjob := pod.Labels[topology.JobSetReplicatedJobLabel]
	if err != nil || group.Groups(rjob) {
		return false
	}
	delete(pod.Labels, topology.GroupLabel)
	markAdded(pod, fmt.Sprintf("nothing, and removed the group label %s: replicated job %s runs, and finishes, before the rest of %s/%s starts, so it is not part of the gang",
		topology.GroupLabel, rjob, topology.TrainJobKind, owner.Name))
	return true
}

// sameJobSet refuses a JobSet's pod in a group that does not name its
// JobSet, and a pod of no JobSet, or another, in a group that does: the
// names muster writes would not be the pod's.
func sameJobSet(pod *corev1.Pod, key types.NamespacedName, t *topology.Topology) field.ErrorList {
	jobSet := pod.Labels[topology.JobSetNameLabel]
	switch {
	case jobSet == t.JobSet:
		return nil
	case t.JobSet == "":
		return field.ErrorList{field.Invalid(labelPath(topology.JobSetNameLabel), jobSet, fmt.Sprintf(
			"the pod is JobSet %s's, which names its pods itself; set the annotation %s: %s on PodGroup %s so that muster uses JobSet's hostnames and Service", jobSet, topology.JobSetAnnotation, jobSet, key))}
	}
	return field.ErrorList{field.Invalid(labelPath(topology.JobSetNameLabel), jobSet, fmt.Sprintf(
		"PodGroup %s's members are the pods of JobSet %s (%s); put only that JobSet's pods into it", key, t.JobSet, topology.JobSetAnnotation))}
}

// AddedAnnotation says on a member what muster added to it.
const AddedAnnotation = "muster.dev/added"

func markAdded(pod *corev1.Pod, what string) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AddedAnnotation] = what
}

// podGroup reads the group's PodGroup in the one shape: scheduler-plugins'
// when its members are labelled, else scheduling.k8s.io's
// (topology.FromUpstream), whose members must be ones muster can run
// (topology.RefusedMember). It is
// NotFound when missing, and when the cluster does not serve upstream's
// API.
func (d *PodDefaulter) podGroup(ctx context.Context, pod *corev1.Pod, key types.NamespacedName, labelled bool) (*v1alpha1.PodGroup, error) {
	if labelled {
		pg := &v1alpha1.PodGroup{}
		if err := d.read(ctx, key, pg); err != nil {
			return nil, err
		}
		return pg, nil
	}
	upstream := &schedulingv1beta1.PodGroup{}
	if err := d.read(ctx, key, upstream); err != nil {
		return nil, err
	}
	if refused := topology.RefusedMember(pod, upstream); refused != nil {
		return nil, invalidPod(pod, field.ErrorList{refused})
	}
	return topology.FromUpstream(upstream), nil
}

// read reads a PodGroup from the cache, or from the API server when the
// cache has not seen it yet (one created a moment ago); NotFound when
// neither holds it, or its API is not served.
func (d *PodDefaulter) read(ctx context.Context, key types.NamespacedName, pg client.Object) error {
	err := d.Client.Get(ctx, key, pg)
	if apierrors.IsNotFound(err) {
		err = d.Reader.Get(ctx, key, pg)
	}
	switch {
	case meta.IsNoMatchError(err):
		return apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), key.Name)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading PodGroup %s: %w", key, err)
	}
	return err
}

// labelUpstreamMember gives a member of a scheduling.k8s.io PodGroup the
// label that selects its group's members (topology.UpstreamMemberLabel).
func labelUpstreamMember(pod *corev1.Pod, name string) {
	value := topology.UpstreamMemberValue(name)
	if pod.Labels[topology.UpstreamMemberLabel] == value {
		return
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[topology.UpstreamMemberLabel] = value
	markAdded(pod, "the label "+topology.UpstreamMemberLabel+", by which the group's Service and muster-controller select the members of the PodGroup of "+topology.UpstreamGroupField)
}

// members lists the pods the group's selector selects.
func (d *PodDefaulter) members(ctx context.Context, key types.NamespacedName, selector map[string]string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	// From the API server, not the cache: a member created a moment ago
	// must already hold its index against the next one.
	if err := d.Reader.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels(selector)); err != nil {
		return nil, fmt.Errorf("listing the members of %s: %w", key, err)
	}
	return pods.Items, nil
}

// workersAtStart are an elastic group's workers as a member is created:
// the active ones, the member itself when it is one, and every index
// below the replicas their owner is scaled to, whose pods it is creating
// now, so that the members one scaling creates agree.
func (d *PodDefaulter) workersAtStart(ctx context.Context, pod *corev1.Pod, member topology.Member, siblings []corev1.Pod, topo *topology.Topology) ([]int32, error) {
	workers := sets.New[int32]()
	var owner *metav1.OwnerReference
	if member.Role == topology.ElasticRole {
		workers.Insert(member.Index)
		owner = metav1.GetControllerOf(pod)
	}
	for i := range siblings {
		other := &siblings[i]
		if other.Name == pod.Name || !topology.IsActiveMember(other) {
			continue
		}
		if sibling, errs := topo.Identify(other); len(errs) == 0 && sibling.Role == topology.ElasticRole {
			workers.Insert(sibling.Index)
			if owner == nil {
				owner = metav1.GetControllerOf(other)
			}
		}
	}
	scale, err := ownerscale.Of(ctx, d.Client, d.Reader, pod.Namespace, owner)
	if err != nil {
		group, _ := topology.GroupOf(pod)
		return nil, fmt.Errorf("reading how many workers group %s runs: %w", group, err)
	}
	if scale != nil {
		for i := range min(scale.Replicas, topo.Replicas[topology.ElasticRole]) {
			workers.Insert(i)
		}
	}
	return sets.List(workers), nil
}

// duplicateOf refuses a member whose role and index an active sibling
// already has: the two would share a hostname, and the hostfile and
// TF_CONFIG would name one of them only.
func duplicateOf(pod *corev1.Pod, member topology.Member, siblings []corev1.Pod, topo *topology.Topology) field.ErrorList {
	group, _ := topology.GroupOf(pod)
	for i := range siblings {
		other := &siblings[i]
		if other.Name == pod.Name || !topology.IsActiveMember(other) {
			continue
		}
		// Identified as the pod is: a JobSet's pods are numbered across
		// its Jobs, not by their completion index alone.
		sibling, errs := topo.Identify(other)
		if len(errs) == 0 && sibling == member {
			return field.ErrorList{field.Duplicate(labelPath(topology.IndexLabel), fmt.Sprintf(
				"%s %d of group %s is pod %s already; give this pod another index, or delete that pod first", member.Role, member.Index, group.Name, other.Name))}
		}
	}
	return nil
}

// anyWorker returns a worker of the group, whose GPU limit gives the MPI
// slots when the PodGroup does not name them; nil when none exists yet.
func anyWorker(pods []corev1.Pod) *corev1.Pod {
	for i := range pods {
		if role, _ := topology.RoleOf(&pods[i]); role == "worker" {
			return &pods[i]
		}
	}
	return nil
}

// refuseTwoGangs refuses a member of a labelled group that also names, in
// spec.schedulingGroup, a scheduling.k8s.io PodGroup with a gang policy:
// two quorums for one pod. A basic PodGroup asks nothing of a scheduler,
// and where WorkloadWithJob is on the Job controller gives one to the pods
// of every Job no controller owns: beside it, the label names the group.
func (d *PodDefaulter) refuseTwoGangs(ctx context.Context, pod *corev1.Pod, key types.NamespacedName) error {
	name := topology.UpstreamGroupName(pod)
	if name == "" {
		return nil
	}
	upstream := &schedulingv1beta1.PodGroup{}
	err := d.Reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: name}, upstream)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		// Not created yet, or the API is not served: nothing to hold the
		// pod but its label's group.
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading PodGroup %s/%s of %s: %w", pod.Namespace, name, topology.UpstreamGroupField, err)
	}
	if gang := upstream.Spec.SchedulingPolicy.Gang; gang != nil {
		return invalidPod(pod, field.ErrorList{field.Forbidden(field.NewPath("spec", "schedulingGroup", "podGroupName"), fmt.Sprintf(
			"the pod is in two gangs: scheduler-plugins PodGroup %q by label %s, and scheduling.k8s.io PodGroup %q, a gang of %d, here; a pod waits for one quorum: remove the label, or the gang policy (a Job's spec.scheduling)",
			key.Name, topology.GroupLabel, name, gang.MinCount))})
	}
	return nil
}

// groupPath is where the pod names its group.
func groupPath(pod *corev1.Pod) *field.Path {
	if _, labelled := topology.LabeledGroupOf(pod); labelled {
		return labelPath(topology.GroupLabel)
	}
	return field.NewPath("spec", "schedulingGroup", "podGroupName")
}

func labelPath(label string) *field.Path {
	return field.NewPath("metadata", "labels").Key(label)
}

// invalidPod is the refusal of a pod, with every problem naming its field.
func invalidPod(pod *corev1.Pod, errs field.ErrorList) error {
	countRefusal("Pod", errs)
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), name, errs)
}
