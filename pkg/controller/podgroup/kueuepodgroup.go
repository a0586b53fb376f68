package podgroup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// ReasonKueuePodGroupGrouped is the reason of the event on Kueue's
// Workload of a pod group whose PodGroup muster made.
const ReasonKueuePodGroupGrouped = "PodGroupCreated"

// ReasonKueuePodGroupInvalid is the reason of the event on a pod of a Kueue
// pod group whose total count muster cannot read.
const ReasonKueuePodGroupInvalid = "InvalidPodGroupCount"

// workloadRetry is how soon a Kueue pod group's Workload is looked for
// again: Kueue makes it once the group's pods all exist, and keeps them
// gated until it admits it.
const workloadRetry = time.Second

// KueuePodGroupReconciler makes the PodGroup of a Kueue pod group whose
// pods the pod webhook put into a group of its name: a gang of the
// group's total count, owned by Kueue's Workload of the group, so that it
// goes when the Workload does. It reads the Workload when a member
// appears, with no watch, so Kueue installed after muster is served
// without a restart.
type KueuePodGroupReconciler struct {
	Client client.Client
	// Reader reads Workloads from the API server: nothing caches their
	// kind.
	Reader   client.Reader
	Recorder record.EventRecorder

	reported failureReports
}

// SetupWithManager registers the reconciler for the groups of Kueue pod
// groups' pods.
func (r *KueuePodGroupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("kueue-podgroup").
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
				key, ok := topology.LabeledGroupOf(obj.(*corev1.Pod))
				return ok && topology.KueuePodGroupOf(obj.(*corev1.Pod)) == key.Name
			}))).
		Complete(r)
}

// Reconcile creates the pod group's PodGroup if it does not exist.
func (r *KueuePodGroupReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	err := r.Client.Get(ctx, req.NamespacedName, &v1alpha1.PodGroup{})
	if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(req.Namespace), client.MatchingLabels{topology.GroupLabel: req.Name, topology.KueuePodGroupLabel: req.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pods of Kueue pod group %s: %w", req.NamespacedName, err)
	}
	if len(pods.Items) == 0 {
		return reconcile.Result{}, nil
	}
	member := &pods.Items[0]
	total, err := topology.KueuePodGroupTotal(member)
	if err != nil {
		if r.reported.isNew(req.NamespacedName, err.Error()) {
			r.Recorder.Event(member, corev1.EventTypeWarning, ReasonKueuePodGroupInvalid, fmt.Sprintf("%v; its group has no PodGroup, and its pods wait", err))
		}
		return reconcile.Result{}, nil
	}
	workload := &unstructured.Unstructured{}
	workload.SetGroupVersionKind(topology.KueueWorkloadGVK)
	err = r.Reader.Get(ctx, req.NamespacedName, workload)
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{RequeueAfter: workloadRetry}, nil
	case meta.IsNoMatchError(err):
		return reconcile.Result{RequeueAfter: kindRetry}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading Kueue's Workload %s: %w", req.NamespacedName, err)
	}
	r.reported.clear(req.NamespacedName)
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: req.Namespace, Name: req.Name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(workload, topology.KueueWorkloadGVK)},
		},
		Spec: v1alpha1.PodGroupSpec{MinMember: total},
	}
	if err := r.Client.Create(ctx, pg); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("creating the PodGroup of Kueue pod group %s: %w", req.NamespacedName, err)
	}
	klog.FromContext(ctx).V(2).Info("Created the PodGroup of a Kueue pod group", "podGroup", req.NamespacedName, "minMember", total)
	r.Recorder.Event(workload, corev1.EventTypeNormal, ReasonKueuePodGroupGrouped, fmt.Sprintf("PodGroup %s: minMember %d, the pod group's %s", pg.Name, total, topology.KueuePodGroupTotalAnnotation))
	return reconcile.Result{}, nil
}
