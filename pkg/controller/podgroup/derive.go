package podgroup

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// kindRetry is how soon an owner whose kind the client does not know yet
// is read again.
const kindRetry = time.Second

// Reasons of the events about a derived topology.
const (
	ReasonTopologyDerived = "TopologyDerived"
	ReasonNoTopology      = "TopologyNotDerived"
	// ReasonMinMemberLowered is the event on a PodGroup whose operator
	// counted pods that run before the gang, such as Trainer's
	// initializers, in its minMember.
	ReasonMinMemberLowered = "MinMemberLowered"
	// ReasonClaimTemplateMissing is the event on a PodGroup whose late
	// member's pod template names a ResourceClaimTemplate that does not
	// exist: its devices cannot be read, nor held, until it does.
	ReasonClaimTemplateMissing = "ClaimTemplateMissing"
)

// templateRetry is how soon a missing ResourceClaimTemplate is read again:
// nothing else tells the reconciler it was created.
const templateRetry = 5 * time.Second

// TopologyReconciler gives a PodGroup that an operator made, and that has
// no topology of its own, the topology of its owner: a PyTorchJob's master
// and workers, an MPIJob's launcher and workers. It reads the owner when
// it needs to, with no watch, so an operator installed after muster is
// served without a restart, and a kind whose CRD is not installed is
// never read.
type TopologyReconciler struct {
	Client client.Client
	// Reader reads owners from the API server: nothing caches their kinds.
	Reader   client.Reader
	Recorder record.EventRecorder

	reported failureReports
}

// SetupWithManager registers the reconciler for PodGroups.
func (r *TopologyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("podgroup-topology").For(&v1alpha1.PodGroup{}).Complete(r)
}

// Reconcile records the owner's topology on the PodGroup.
func (r *TopologyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pg := &v1alpha1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if _, awaits := topology.AwaitsDerivation(pg); (!awaits && !minMemberReset(pg)) || pg.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	ref := metav1.GetControllerOfNoCopy(pg)
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: ref.Name}, owner)
	switch {
	case apierrors.IsNotFound(err):
		// No such owner any more: the group stays a plain gang.
		return reconcile.Result{}, nil
	case meta.IsNoMatchError(err):
		// The owner exists, so its kind does: its CRD was installed after
		// the client last learnt the API's kinds, which it does again.
		return reconcile.Result{RequeueAfter: kindRetry}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading %s %s/%s, the owner of PodGroup %s: %w", ref.Kind, pg.Namespace, ref.Name, pg.Name, err)
	}
	if owner.GetUID() != ref.UID {
		return reconcile.Result{}, nil
	}
	minMember := pg.Spec.MinMember
	var derived map[string]string
	var runFirst []string
	var runFirstRequests corev1.ResourceList
	if ref.Kind == topology.TrainJobKind {
		group, result, err := r.trainJobGroup(ctx, pg, owner)
		if group == nil {
			return result, err
		}
		templates, missing, err := readClaimTemplates(ctx, r.Reader, pg.Namespace, group.LateClaimTemplates(), ref.Kind+" "+ref.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if missing != "" {
			r.reportMissingTemplate(pg, missing)
			return reconcile.Result{RequeueAfter: templateRetry}, nil
		}
		if err := group.WithLateDevices(templates); err != nil {
			r.report(pg, err.Error())
			return reconcile.Result{}, nil
		}
		derived, minMember, runFirst, runFirstRequests = group.Annotations, group.MinMember, group.Ungrouped, group.UngroupedRequests
	} else {
		spec, _, _ := unstructured.NestedMap(owner.Object, "spec")
		templates, missing, err := r.lateClaimTemplates(ctx, pg.Namespace, ref, spec)
		if err != nil {
			return reconcile.Result{}, err
		}
		if missing != "" {
			r.reportMissingTemplate(pg, missing)
			return reconcile.Result{RequeueAfter: templateRetry}, nil
		}
		derived, err = topology.FromOwner(ref.APIVersion, ref.Kind, ref.Name, spec, templates)
	}
	if err == nil {
		err = withOwnersDomain(derived, owner.GetAnnotations())
	}
	if err != nil {
		r.report(pg, err.Error())
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(pg.DeepCopy())
	if pg.Annotations == nil {
		pg.Annotations = map[string]string{}
	}
	for name, value := range derived {
		pg.Annotations[name] = value
	}
	operatorMinMember := pg.Spec.MinMember
	if minMember != operatorMinMember {
		pg.Spec.MinMember = minMember
		pg.Spec.MinResources = withoutRequests(pg.Spec.MinResources, runFirstRequests)
	}
	if err := r.Client.Patch(ctx, pg, patch); err != nil {
		return requeueOnConflict(fmt.Errorf("recording the topology of PodGroup %s/%s: %w", pg.Namespace, pg.Name, err))
	}
	r.reported.clear(req.NamespacedName)
	klog.FromContext(ctx).V(2).Info("Derived a topology", "podGroup", klog.KObj(pg), "owner", derived[topology.DerivedFromAnnotation], "roles", derived[topology.RolesAnnotation])
	r.Recorder.Eventf(pg, corev1.EventTypeNormal, ReasonTopologyDerived, "read from %s: framework %s, roles %s",
		derived[topology.DerivedFromAnnotation], derived[topology.FrameworkAnnotation], derived[topology.RolesAnnotation])
	if minMember != operatorMinMember {
		r.Recorder.Eventf(pg, corev1.EventTypeNormal, ReasonMinMemberLowered,
			"minMember %d → %d, and minResources less their requests: %s run first, and finish, outside the gang; the gang is the replicated jobs after them", operatorMinMember, minMember, strings.Join(runFirst, ", "))
	}
	return reconcile.Result{}, nil
}

// minMemberReset reports whether the operator has written a derived
// PodGroup's minMember again, above its roles' pods: Trainer does so when
// it resumes a suspended TrainJob (as Kueue does at admission), counting
// again the replicated jobs that run first, outside the gang. Left so, the
// gang would wait for members that never join it; derived again, it is
// lowered again.
func minMemberReset(pg *v1alpha1.PodGroup) bool {
	if !strings.HasPrefix(pg.Annotations[topology.DerivedFromAnnotation], topology.TrainJobKind+"/") {
		return false
	}
	topo, errs := topology.FromPodGroup(pg)
	if len(errs) > 0 {
		return false
	}
	var members int32
	for _, pods := range topo.Replicas {
		members += pods
	}
	return !topology.QuorumOf(pg).EnoughMembers(members, 0)
}

// withoutRequests is total less requests, none below zero; an empty total
// stays empty.
func withoutRequests(total, requests corev1.ResourceList) corev1.ResourceList {
	if len(total) == 0 {
		return total
	}
	return resources.Clamp(resources.Sub(total.DeepCopy(), requests, 1))
}

// trainJobGroup reads the group of a TrainJob from the JobSet Trainer runs
// it as, which has the runtime's replicated jobs merged with the job's,
// and the framework from its runtime. It returns no group while the
// JobSet does not exist yet (Trainer makes it right after the PodGroup),
// and none, with an event, when the TrainJob makes no group muster can
// serve.
func (r *TopologyReconciler) trainJobGroup(ctx context.Context, pg *v1alpha1.PodGroup, trainJob *unstructured.Unstructured) (*topology.JobSetGroup, reconcile.Result, error) {
	key := types.NamespacedName{Namespace: trainJob.GetNamespace(), Name: trainJob.GetName()}
	jobSet := &unstructured.Unstructured{}
	jobSet.SetGroupVersionKind(topology.JobSetGVK)
	err := r.Reader.Get(ctx, key, jobSet)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, reconcile.Result{RequeueAfter: kindRetry}, nil
	}
	if err != nil {
		return nil, reconcile.Result{}, fmt.Errorf("reading JobSet %s of TrainJob %s: %w", key, key.Name, err)
	}
	group, problem, err := readTrainJobGroup(ctx, r.Reader, trainJob, jobSet)
	if problem != "" {
		r.report(pg, problem)
	}
	return group, reconcile.Result{}, err
}

// readTrainJobGroup reads the group of a TrainJob's JobSet with the
// framework of the TrainJob's runtime. It returns no group and the
// problem when the TrainJob makes none muster can serve.
func readTrainJobGroup(ctx context.Context, reader client.Reader, trainJob, jobSet *unstructured.Unstructured) (*topology.JobSetGroup, string, error) {
	runtimeKind, runtimeName, err := topology.TrainJobRuntime(trainJob)
	if err != nil {
		return nil, err.Error(), nil
	}
	runtime := &unstructured.Unstructured{}
	runtime.SetGroupVersionKind(runtimeKind)
	runtimeKey := types.NamespacedName{Name: runtimeName}
	if runtimeKind.Kind == "TrainingRuntime" {
		runtimeKey.Namespace = trainJob.GetNamespace()
	}
	if err := reader.Get(ctx, runtimeKey, runtime); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("%s %s, the runtime of TrainJob %s, does not exist", runtimeKind.Kind, runtimeName, trainJob.GetName()), nil
		}
		return nil, "", fmt.Errorf("reading %s %s of TrainJob %s/%s: %w", runtimeKind.Kind, runtimeName, trainJob.GetNamespace(), trainJob.GetName(), err)
	}
	group, err := topology.FromTrainJob(trainJob, jobSet, topology.FrameworkOfRuntime(runtime))
	if err != nil {
		return nil, err.Error(), nil
	}
	return &group, "", nil
}

func (r *TopologyReconciler) report(pg *v1alpha1.PodGroup, message string) {
	if r.reported.isNew(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, message) {
		r.Recorder.Eventf(pg, corev1.EventTypeWarning, ReasonNoTopology, "%s; the group is scheduled as a plain gang, in no order", message)
	}
}

// lateClaimTemplates reads the ResourceClaimTemplates that the owner's late
// members' pod templates name (topology.LateClaimTemplates). missing says
// which does not exist, and what to do.
func (r *TopologyReconciler) lateClaimTemplates(ctx context.Context, namespace string, ref *metav1.OwnerReference, spec map[string]any) (topology.ClaimTemplates, string, error) {
	names, err := topology.LateClaimTemplates(ref.APIVersion, ref.Kind, spec)
	if err != nil {
		// A spec that cannot be read is FromOwner's to report.
		return nil, "", nil
	}
	return readClaimTemplates(ctx, r.Reader, namespace, names, ref.Kind+" "+ref.Name)
}

// readClaimTemplates reads the named ResourceClaimTemplates, which the
// pod templates of owner's late members name. missing says which does not
// exist, and what to do.
func readClaimTemplates(ctx context.Context, reader client.Reader, namespace string, names []string, owner string) (topology.ClaimTemplates, string, error) {
	templates := topology.ClaimTemplates{}
	for _, name := range names {
		template := &resourcev1.ResourceClaimTemplate{}
		err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, template)
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Sprintf("ResourceClaimTemplate %s/%s, named by a pod template of %s whose pods are created late, does not exist: the devices their room holds are read from it, so the group waits until it is created", namespace, name, owner), nil
		case err != nil:
			return nil, "", fmt.Errorf("reading ResourceClaimTemplate %s/%s of %s: %w", namespace, name, owner, err)
		}
		templates[name] = template.Spec
	}
	return templates, "", nil
}

// reportMissingTemplate says, once, that the group waits for a
// ResourceClaimTemplate its late members name.
func (r *TopologyReconciler) reportMissingTemplate(pg *v1alpha1.PodGroup, missing string) {
	if r.reported.isNew(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, missing) {
		r.Recorder.Eventf(pg, corev1.EventTypeWarning, ReasonClaimTemplateMissing, "%s", missing)
	}
}

// withOwnersDomain adds to the derived annotations the topology domain the
// owner's own annotations require, as a PodGroup's would: an operator that
// does not copy its job's annotations to the PodGroup (mpi-operator) loses
// none. A key that is no label key is an error naming the annotation.
func withOwnersDomain(derived, owner map[string]string) error {
	key, ok := owner[topology.DomainRequiredAnnotation]
	if !ok || derived == nil {
		return nil
	}
	derived[topology.DomainRequiredAnnotation] = key
	if _, errs := topology.Parse(map[string]string{topology.DomainRequiredAnnotation: key}); len(errs) > 0 {
		return fmt.Errorf("the owner's annotation: %w", errs.ToAggregate())
	}
	return nil
}
