package podgroup

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// ReasonJobSetGrouped is the reason of the event on a JobSet whose
// PodGroup muster made.
const ReasonJobSetGrouped = "PodGroupCreated"

// JobSetGroupReconciler makes the PodGroup of a JobSet whose pods the pod
// webhook put into a group named after it: owned by the JobSet, with the
// JobSet's topology and minMember. It reads the JobSet when a member
// appears, with no watch, so JobSet installed after muster is served
// without a restart.
type JobSetGroupReconciler struct {
	Client client.Client
	// Reader reads JobSets from the API server: nothing caches their kind.
	Reader   client.Reader
	Recorder record.EventRecorder

	reported failureReports
}

// SetupWithManager registers the reconciler for the groups of JobSets'
// pods.
func (r *JobSetGroupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("jobset-podgroup").
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
				key, ok := topology.LabeledGroupOf(obj.(*corev1.Pod))
				return ok && obj.GetLabels()[topology.JobSetNameLabel] == key.Name
			}))).
		Complete(r)
}

// trainJobGroup is the group of a JobSet that Trainer made of a TrainJob
// whose runtime asks for no PodGroup: the same, with the framework of the
// TrainJob's runtime. A TrainJob that is gone, or whose runtime is, leaves
// the JobSet's own group.
func (r *JobSetGroupReconciler) trainJobGroup(ctx context.Context, js *unstructured.Unstructured, name string, jobSetGroup topology.JobSetGroup) (topology.JobSetGroup, error) {
	trainJob := &unstructured.Unstructured{}
	trainJob.SetGroupVersionKind(topology.TrainJobGVK)
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: js.GetNamespace(), Name: name}, trainJob)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return jobSetGroup, nil
	}
	if err != nil {
		return jobSetGroup, fmt.Errorf("reading TrainJob %s/%s of JobSet %s: %w", js.GetNamespace(), name, js.GetName(), err)
	}
	group, problem, err := readTrainJobGroup(ctx, r.Reader, trainJob, js)
	if err != nil || group == nil {
		klog.FromContext(ctx).V(2).Info("Grouping a TrainJob's JobSet as a JobSet", "jobSet", klog.KObj(js), "reason", problem)
		return jobSetGroup, err
	}
	return *group, nil
}

// Reconcile creates the JobSet's PodGroup if it does not exist.
func (r *JobSetGroupReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	err := r.Client.Get(ctx, req.NamespacedName, &v1alpha1.PodGroup{})
	if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	js := &unstructured.Unstructured{}
	js.SetGroupVersionKind(topology.JobSetGVK)
	err = r.Reader.Get(ctx, req.NamespacedName, js)
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case meta.IsNoMatchError(err):
		return reconcile.Result{RequeueAfter: kindRetry}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading JobSet %s: %w", req.NamespacedName, err)
	}
	if topology.WantsNoPodGroup(js) || js.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	group, err := topology.FromJobSet(js)
	if err != nil {
		// The webhook groups no pod of such a JobSet.
		return reconcile.Result{}, nil
	}
	if owner := metav1.GetControllerOfNoCopy(js); owner != nil && owner.Kind == topology.TrainJobKind {
		if group, err = r.trainJobGroup(ctx, js, owner.Name, group); err != nil {
			return reconcile.Result{}, err
		}
	}
	templates, missing, err := readClaimTemplates(ctx, r.Reader, req.Namespace, group.LateClaimTemplates(), "JobSet "+req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if missing != "" {
		if r.reported.isNew(req.NamespacedName, missing) {
			r.Recorder.Event(js, corev1.EventTypeWarning, ReasonClaimTemplateMissing, missing)
		}
		return reconcile.Result{RequeueAfter: templateRetry}, nil
	}
	if err := group.WithLateDevices(templates); err != nil {
		if r.reported.isNew(req.NamespacedName, err.Error()) {
			r.Recorder.Event(js, corev1.EventTypeWarning, ReasonNoTopology, fmt.Sprintf("%v; its pods wait for their group", err))
		}
		return reconcile.Result{}, nil
	}
	r.reported.clear(req.NamespacedName)
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: req.Namespace, Name: req.Name, Annotations: group.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, topology.JobSetGVK)},
		},
		Spec: v1alpha1.PodGroupSpec{MinMember: group.MinMember},
	}
	if err := r.Client.Create(ctx, pg); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("creating the PodGroup of JobSet %s: %w", req.NamespacedName, err)
	}
	klog.FromContext(ctx).V(2).Info("Created the PodGroup of a JobSet", "jobSet", req.NamespacedName, "minMember", group.MinMember, "roles", group.Annotations[topology.RolesAnnotation])
	note := fmt.Sprintf("PodGroup %s: minMember %d, roles %s, launch order %s", pg.Name, group.MinMember, group.Annotations[topology.RolesAnnotation], group.Annotations[topology.LaunchOrderAnnotation])
	if len(group.Ungrouped) > 0 {
		note += fmt.Sprintf("; %s run first, alone", strings.Join(group.Ungrouped, ", "))
	}
	r.Recorder.Event(js, corev1.EventTypeNormal, ReasonJobSetGrouped, note)
	return reconcile.Result{}, nil
}
