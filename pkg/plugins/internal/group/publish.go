package group

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/topology"
)

const (
	// publishDelay gathers a group's changes into one write: a gang's
	// attempt chooses its domain, holds its rooms and is admitted within
	// one round of its members' cycles.
	publishDelay = time.Second
	// publishQPS and publishBurst bound the writes of every group
	// together, so that a burst of gangs never crowds the API server.
	publishQPS   = 10
	publishBurst = 50
)

// publisher writes gangview.PublishedAnnotation on a group's PodGroup, of
// either API, when what only the scheduler knows of the gang changes: its
// held rooms, its attempt's domain, its last attempt's result. It runs
// off the scheduling path, in a goroutine of its own: a change only
// queues the group, and the write reads the model as it is then, so
// changes within publishDelay are one write, and a write that would
// change nothing is not sent.
type publisher struct {
	queue     workqueue.TypedRateLimitingInterface[types.NamespacedName]
	limiter   flowcontrol.RateLimiter
	kube      kubernetes.Interface
	podGroups schedulingclient.Interface
	model     *Model
}

func newPublisher(m *Model, kube kubernetes.Interface, podGroups schedulingclient.Interface) *publisher {
	return &publisher{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "muster_published"}),
		limiter:   flowcontrol.NewTokenBucketRateLimiter(publishQPS, publishBurst),
		kube:      kube,
		podGroups: podGroups,
		model:     m,
	}
}

// ReadHeldFrom names where the record reads the members held at Permit
// for their predecessors: LaunchOrder, which owns the holds.
func (m *Model) ReadHeldFrom(held func(types.NamespacedName) []string) { m.held = held }

// Publish queues the group's record to be written: a plugin whose state
// the record shows calls it when that changes.
func (m *Model) Publish(key types.NamespacedName) { m.publish(key) }

// publish queues the group's record to be written.
func (m *Model) publish(key types.NamespacedName) {
	if m.publisher != nil {
		m.publisher.queue.AddAfter(key, publishDelay)
	}
}

// run writes queued records until ctx ends.
func (p *publisher) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for {
		key, quit := p.queue.Get()
		if quit {
			return
		}
		if err := p.write(ctx, key); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Publishing what the scheduler knows of a gang", "podGroup", key, "annotation", gangview.PublishedAnnotation)
			p.queue.AddRateLimited(key)
		} else {
			p.queue.Forget(key)
		}
		p.queue.Done(key)
	}
}

// write brings the PodGroup's record in line with the model.
func (p *publisher) write(ctx context.Context, key types.NamespacedName) error {
	pg := p.model.PodGroup(key)
	if pg == nil {
		return nil
	}
	record := p.model.Published(key)
	var value *string
	if record.HeldRooms != nil || record.Held != nil || record.Domain != "" || record.NoDomain != "" || record.LastAttempt != nil {
		encoded, err := json.Marshal(record)
		if err != nil {
			return fmt.Errorf("encoding the record: %w", err)
		}
		s := string(encoded)
		value = &s
	}
	current, has := pg.Annotations[gangview.PublishedAnnotation]
	if (value == nil && !has) || (value != nil && has && current == *value) {
		return nil
	}
	// The UID is a precondition: a PodGroup made again under the name is
	// never given the old one's record.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pg.UID,
		"annotations": map[string]*string{gangview.PublishedAnnotation: value},
	}})
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	if err := p.limiter.Wait(ctx); err != nil {
		return err
	}
	if topology.IsUpstream(pg) {
		_, err = p.kube.SchedulingV1beta1().PodGroups(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = p.podGroups.SchedulingV1alpha1().PodGroups(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", gangview.PublishedAnnotation, err)
	}
	reportPublished()
	return nil
}

// Published is what the scheduler publishes of the group now: the rooms
// it holds for late members, the domain of its attempt or why none fits,
// and its last attempt's result.
func (m *Model) Published(key types.NamespacedName) gangview.Published {
	var p gangview.Published
	for _, r := range m.Rooms().Of(key) {
		p.HeldRooms = append(p.HeldRooms, gangview.HeldRoom{Role: r.Role, Node: r.Node, Expires: metav1.NewTime(r.Expires)})
	}
	if m.held != nil {
		if held := m.held(key); len(held) > 0 {
			p.Held = held
		}
	}
	domain, last := m.Store.Published(key)
	p.LastAttempt = last
	if domain == nil {
		return p
	}
	if domain.Unplaceable != "" && !domain.WaitsForClaims {
		p.NoDomain = domain.Unplaceable
	}
	if topo, err := m.Topology(key); err == nil && topo != nil && domain.IsSet() {
		switch {
		case domain.Name != "" && domain.Preferred != "":
			p.Domain = topo.DomainKey + "=" + domain.Name + "," + topo.PreferredDomainKey + "=" + domain.Preferred
		case domain.Name != "":
			p.Domain = topo.DomainKey + "=" + domain.Name
		default:
			p.Domain = topo.PreferredDomainKey + "=" + domain.Preferred
		}
	}
	return p
}
