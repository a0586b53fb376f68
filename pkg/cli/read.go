package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/topology"
)

// reader reads the objects that make gangs from the API server, and
// nothing else: what only muster-scheduler knows it has published on the
// PodGroups.
type reader struct {
	kube          kubernetes.Interface
	podGroups     schedulingclient.Interface
	dynamic       dynamic.Interface
	schedulerName string
	now           func() time.Time
}

// snapshot is every object of one namespace, or of all, that gangs are
// made of.
type snapshot struct {
	podGroups map[types.NamespacedName]*v1alpha1.PodGroup
	pods      []corev1.Pod
	events    []eventsv1.Event
	workloads []unstructured.Unstructured
	claims    []resourcev1.ResourceClaim
	nodes     map[string]*corev1.Node
	now       time.Time
	// warnings say what could not be read, and what that leaves out.
	warnings []string
}

// notServed reports whether err says the API server does not serve a
// kind: Kueue, DRA or upstream's PodGroups may be absent, and then no gang
// has them.
func notServed(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// read takes a snapshot of namespace ("" for all).
func (r *reader) read(ctx context.Context, namespace string) (*snapshot, error) {
	s := &snapshot{podGroups: map[types.NamespacedName]*v1alpha1.PodGroup{}, nodes: map[string]*corev1.Node{}, now: r.now()}
	pgs, err := r.podGroups.SchedulingV1alpha1().PodGroups(namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !notServed(err) {
		return nil, fmt.Errorf("listing PodGroups (scheduling.x-k8s.io): %w", err)
	}
	if err == nil {
		for i := range pgs.Items {
			pg := &pgs.Items[i]
			s.podGroups[types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}] = pg
		}
	}
	upstream, err := r.kube.SchedulingV1beta1().PodGroups(namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !notServed(err) {
		return nil, fmt.Errorf("listing PodGroups (scheduling.k8s.io): %w", err)
	}
	if err == nil {
		for i := range upstream.Items {
			pg := topology.FromUpstream(&upstream.Items[i])
			s.podGroups[types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}] = pg
		}
	}
	pods, err := r.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	s.pods = pods.Items
	events, err := r.kube.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	s.events = events.Items
	workloads, err := r.dynamic.Resource(workloadResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !notServed(err) {
		return nil, fmt.Errorf("listing Kueue's Workloads: %w", err)
	}
	if err == nil {
		s.workloads = workloads.Items
	}
	claims, err := r.kube.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !notServed(err) {
		return nil, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	if err == nil {
		s.claims = claims.Items
	}
	nodes, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		s.warnings = append(s.warnings, "you may not list nodes, so the DOMAIN column shows only what muster-scheduler published")
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing nodes, for the members' topology domains: %w", err)
	}
	for i := range nodes.Items {
		s.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	return s, nil
}

// workloadResource is Kueue's Workload.
var workloadResource = topology.KueueWorkloadGVK.GroupVersion().WithResource("workloads")

// keys are the groups of the snapshot: every PodGroup, and every group
// its pods name, sorted.
func (s *snapshot) keys() []types.NamespacedName {
	seen := map[types.NamespacedName]bool{}
	for key := range s.podGroups {
		seen[key] = true
	}
	for i := range s.pods {
		if key, ok := topology.GroupOf(&s.pods[i]); ok {
			seen[key] = true
		}
	}
	keys := make([]types.NamespacedName, 0, len(seen))
	for key := range seen {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		if a.Namespace != b.Namespace {
			return compare(a.Namespace, b.Namespace)
		}
		return compare(a.Name, b.Name)
	})
	return keys
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// objects gathers what makes the group key.
func (s *snapshot) objects(key types.NamespacedName, schedulerName string) gangview.Objects {
	o := gangview.Objects{Key: key, PodGroup: s.podGroups[key], Nodes: s.nodes, SchedulerName: schedulerName, Now: s.now}
	related := map[types.UID]bool{}
	names := map[string]bool{key.Name: true}
	if o.PodGroup != nil {
		related[o.PodGroup.UID] = true
		for _, ref := range o.PodGroup.OwnerReferences {
			related[ref.UID] = true
		}
	}
	for i := range s.pods {
		pod := &s.pods[i]
		if group, ok := topology.GroupOf(pod); !ok || group != key {
			continue
		}
		o.Pods = append(o.Pods, *pod)
		names[pod.Name] = true
		related[pod.UID] = true
		for _, ref := range pod.OwnerReferences {
			related[ref.UID] = true
		}
	}
	for i := range s.workloads {
		w := &s.workloads[i]
		if w.GetNamespace() == key.Namespace && workloadOf(w, key.Name, related) {
			o.Workload = w
			names[w.GetName()] = true
			break
		}
	}
	for i := range s.events {
		e := &s.events[i]
		if e.Namespace == key.Namespace && names[e.Regarding.Name] && slices.Contains([]string{"PodGroup", "Pod", "Workload"}, e.Regarding.Kind) {
			o.Events = append(o.Events, *e)
		}
	}
	for i := range s.claims {
		if s.claims[i].Namespace == key.Namespace {
			o.Claims = append(o.Claims, s.claims[i])
		}
	}
	return o
}

// workloadOf reports whether Kueue's Workload w is the gang's: it is
// controlled by the gang's PodGroup's owner or by its pods, or controls
// its PodGroup, or one of its pod sets' templates names the group (a
// suspended Job has no pods yet).
func workloadOf(w *unstructured.Unstructured, group string, related map[types.UID]bool) bool {
	if related[w.GetUID()] {
		return true
	}
	for _, ref := range w.GetOwnerReferences() {
		if related[ref.UID] {
			return true
		}
	}
	podSets, _, _ := unstructured.NestedSlice(w.Object, "spec", "podSets")
	for _, ps := range podSets {
		m, _ := ps.(map[string]any)
		labels, _, _ := unstructured.NestedStringMap(m, "template", "metadata", "labels")
		if labels[topology.GroupLabel] == group {
			return true
		}
	}
	return false
}

// gangs views every gang of the snapshot.
func (s *snapshot) gangs(schedulerName string) []gangview.Gang {
	keys := s.keys()
	gangs := make([]gangview.Gang, 0, len(keys))
	for _, key := range keys {
		gangs = append(gangs, gangview.View(s.objects(key, schedulerName)))
	}
	return gangs
}
