package podgroup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// Groups reads a group for the reconcilers, whichever API holds it: its
// PodGroup in the one shape (topology.FromUpstream), scheduler-plugins'
// first as muster-scheduler reads them, and its members from the cache
// of each source.
type Groups struct {
	// Client reads the PodGroups of both APIs, and the members of
	// scheduler-plugins' (the manager's cache of labelled pods).
	Client client.Client
	// UpstreamMembers caches the members of scheduling.k8s.io PodGroups,
	// which topology.UpstreamMemberLabel selects; nil where the cluster
	// does not serve that API.
	UpstreamMembers cache.Cache
	// SchedulerName is muster-scheduler's profile, whose pods are members;
	// empty means topology.SchedulerName.
	SchedulerName string
}

// NewUpstreamMemberCache returns the cache of the members of
// scheduling.k8s.io PodGroups, indexed as the manager's cache of pods is.
func NewUpstreamMemberCache(ctx context.Context, config *rest.Config, options cache.Options) (cache.Cache, error) {
	selector, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: topology.UpstreamMemberLabel, Operator: metav1.LabelSelectorOpExists},
	}})
	if err != nil {
		return nil, fmt.Errorf("building the selector of upstream members: %w", err)
	}
	options.ByObject = map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: selector}}
	members, err := cache.New(config, options)
	if err != nil {
		return nil, fmt.Errorf("creating the cache of upstream members: %w", err)
	}
	if err := SetupIndexes(ctx, members); err != nil {
		return nil, err
	}
	return members, nil
}

// ServesUpstream reports whether scheduling.k8s.io's PodGroups are groups.
func (g *Groups) ServesUpstream() bool { return g.UpstreamMembers != nil }

// PodGroup reads the group's PodGroup; it is NotFound when neither API
// holds one.
func (g *Groups) PodGroup(ctx context.Context, key types.NamespacedName) (*v1alpha1.PodGroup, error) {
	pg := &v1alpha1.PodGroup{}
	err := g.Client.Get(ctx, key, pg)
	if err == nil {
		return pg, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading PodGroup %s: %w", key, err)
	}
	if !g.ServesUpstream() {
		return nil, err
	}
	upstream := &schedulingv1beta1.PodGroup{}
	if err := g.Client.Get(ctx, key, upstream); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("reading %s PodGroup %s: %w", topology.UpstreamPodGroupVersion, key, err)
	}
	return topology.FromUpstream(upstream), nil
}

// Members lists the members of pg's group: the pods that name it, but
// those topology.NotAMember leaves out.
func (g *Groups) Members(ctx context.Context, pg *v1alpha1.PodGroup) ([]corev1.Pod, error) {
	named, err := g.named(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(named, func(pod corev1.Pod) bool { return topology.NotAMember(&pod, pg, g.Ours) != "" }), nil
}

// Scheduler is the name of muster-scheduler's profile.
func (g *Groups) Scheduler() string {
	if g.SchedulerName == "" {
		return topology.SchedulerName
	}
	return g.SchedulerName
}

// Ours reports whether the pods that name the scheduler are muster's:
// muster-controller's webhooks serve its profile.
func (g *Groups) Ours(schedulerName string) bool { return schedulerName == g.Scheduler() }

// named lists the pods that name the group, of both sources: a name is
// one group in its namespace, whichever API holds it.
func (g *Groups) named(ctx context.Context, key types.NamespacedName) ([]corev1.Pod, error) {
	var members corev1.PodList
	if err := g.Client.List(ctx, &members, client.InNamespace(key.Namespace), client.MatchingFields{groupField: key.Name}); err != nil {
		return nil, fmt.Errorf("listing members of %s: %w", key, err)
	}
	if !g.ServesUpstream() {
		return members.Items, nil
	}
	var upstream corev1.PodList
	if err := g.UpstreamMembers.List(ctx, &upstream, client.InNamespace(key.Namespace), client.MatchingFields{groupField: key.Name}); err != nil {
		return nil, fmt.Errorf("listing members of %s: %w", key, err)
	}
	return append(members.Items, upstream.Items...), nil
}

// PodGroups lists every group's PodGroup, of both APIs; an upstream one
// whose name scheduler-plugins' API also holds is not the group.
func (g *Groups) PodGroups(ctx context.Context) ([]*v1alpha1.PodGroup, error) {
	var ours v1alpha1.PodGroupList
	if err := g.Client.List(ctx, &ours); err != nil {
		return nil, fmt.Errorf("listing PodGroups: %w", err)
	}
	pgs := make([]*v1alpha1.PodGroup, 0, len(ours.Items))
	names := sets.New[types.NamespacedName]()
	for i := range ours.Items {
		pgs = append(pgs, &ours.Items[i])
		names.Insert(types.NamespacedName{Namespace: ours.Items[i].Namespace, Name: ours.Items[i].Name})
	}
	if !g.ServesUpstream() {
		return pgs, nil
	}
	var upstream schedulingv1beta1.PodGroupList
	if err := g.Client.List(ctx, &upstream); err != nil {
		return nil, fmt.Errorf("listing %s PodGroups: %w", topology.UpstreamPodGroupVersion, err)
	}
	for i := range upstream.Items {
		if !names.Has(types.NamespacedName{Namespace: upstream.Items[i].Namespace, Name: upstream.Items[i].Name}) {
			pgs = append(pgs, topology.FromUpstream(&upstream.Items[i]))
		}
	}
	return pgs, nil
}

// EachMember calls fn with each member of every group, read only: the
// caches' objects are neither copied nor to be changed.
func (g *Groups) EachMember(ctx context.Context, fn func(*corev1.Pod)) error {
	readers := []client.Reader{g.Client}
	if g.ServesUpstream() {
		readers = append(readers, g.UpstreamMembers)
	}
	for _, r := range readers {
		var members corev1.PodList
		if err := r.List(ctx, &members, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing members: %w", err)
		}
		for i := range members.Items {
			fn(&members.Items[i])
		}
	}
	return nil
}

// watchUpstream has b reconcile a group of scheduling.k8s.io when its
// PodGroup, one of its members, or an object of the kinds owned that it
// controls changes; nothing where the API is not served.
func (g *Groups) watchUpstream(b *builder.Builder, owned ...client.Object) *builder.Builder {
	if !g.ServesUpstream() {
		return b
	}
	b = b.Watches(&schedulingv1beta1.PodGroup{}, &handler.EnqueueRequestForObject{}).
		WatchesRawSource(source.Kind[client.Object](g.UpstreamMembers, &corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod)))
	for _, obj := range owned {
		b = b.Watches(obj, handler.EnqueueRequestForOwner(g.Client.Scheme(), g.Client.RESTMapper(), &schedulingv1beta1.PodGroup{}, handler.OnlyControllerOwner()))
	}
	return b
}

// owner is the object that controls pg's Service, ConfigMap and Secret,
// and that their owner references name: pg itself, or the
// scheduling.k8s.io PodGroup it was read from.
func owner(pg *v1alpha1.PodGroup) client.Object {
	if !topology.IsUpstream(pg) {
		return pg
	}
	return &schedulingv1beta1.PodGroup{ObjectMeta: pg.ObjectMeta}
}
