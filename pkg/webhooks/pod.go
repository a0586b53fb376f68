// Package webhooks holds muster-controller's admission webhooks: one gives
// each grouped pod its place in the group as it is created, the other
// refuses a PodGroup whose topology is invalid.
package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/topology"
)

// Paths the webhooks are served at.
const (
	PodPath      = "/mutate-v1-pod"
	PodGroupPath = "/validate-scheduling-x-k8s-io-v1alpha1-podgroup"
)

// PodMutator applies pkg/envinject to each grouped pod it is asked about.
// It decides from the PodGroup alone, so the same pod always gets the same
// result, and applying it to its own output changes nothing.
type PodMutator struct {
	// Client reads from the cache; Reader reads from the API server, for a
	// PodGroup created too recently for the cache to hold it.
	Client        client.Reader
	Reader        client.Reader
	Decoder       admission.Decoder
	ClusterDomain string
}

var _ admission.Handler = &PodMutator{}

// Handle admits a pod with its environment, or refuses it with the field
// to fix.
func (m *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := m.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	// A pod created by generateName has no name yet, and may have no
	// namespace in the object; the request has it.
	pod.Namespace = req.Namespace
	key, ok := topology.GroupOf(pod)
	if !ok {
		return admission.Allowed("not a member of a group")
	}
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "generateName", pod.GenerateName, "podGroup", key)

	pg, err := m.podGroup(ctx, key)
	if apierrors.IsNotFound(err) {
		if _, hasRole := topology.RoleOf(pod); hasRole {
			return denied(field.ErrorList{field.Invalid(field.NewPath("metadata", "labels").Key(topology.GroupLabel), key.Name,
				fmt.Sprintf("PodGroup %s does not exist, so muster cannot give this %s pod its environment; create the PodGroup before its pods", key, topology.RoleLabel))})
		}
		// A pod that asks only for gang scheduling may come first; it
		// waits in the scheduler for its PodGroup.
		return admission.Allowed("no PodGroup yet; the pod waits for it")
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	topo, errs := topology.Parse(pg.Annotations)
	if len(errs) > 0 {
		return admission.Denied(topology.InvalidMessage(key, errs))
	}
	if len(topo.Roles) == 0 {
		return admission.Allowed("the group has no roles: gang scheduling only")
	}
	member, errs := topo.Identify(pod)
	if len(errs) > 0 {
		return denied(errs)
	}
	// Only MPI reads slots; only a non-worker needs another pod to find
	// them.
	worker := pod
	if topo.Framework == topology.MPI && member.Role != "worker" {
		if worker, err = m.anyWorker(ctx, key); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	group := envinject.Group{Name: key.Name, Namespace: key.Namespace, UID: pg.UID, Topology: topo, WorkerSlots: envinject.Slots(topo, worker)}
	if errs := envinject.Apply(pod, group, member, m.ClusterDomain); len(errs) > 0 {
		return denied(errs)
	}
	mutated, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encoding the pod: %w", err))
	}
	logger.V(2).Info("Gave a member its environment", "role", member.Role, "index", member.Index)
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

func (m *PodMutator) podGroup(ctx context.Context, key types.NamespacedName) (*v1alpha1.PodGroup, error) {
	pg := &v1alpha1.PodGroup{}
	err := m.Client.Get(ctx, key, pg)
	if apierrors.IsNotFound(err) {
		err = m.Reader.Get(ctx, key, pg)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading PodGroup %s: %w", key, err)
	}
	return pg, err
}

// anyWorker returns a worker of the group, whose GPU limit gives the MPI
// slots when the PodGroup does not name them; nil when none exists yet.
func (m *PodMutator) anyWorker(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := m.Client.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels{topology.GroupLabel: key.Name}); err != nil {
		return nil, fmt.Errorf("listing the members of %s: %w", key, err)
	}
	for i := range pods.Items {
		if role, _ := topology.RoleOf(&pods.Items[i]); role == "worker" {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
}

// denied refuses a request with every problem, each naming its field and
// the fix.
func denied(errs field.ErrorList) admission.Response {
	return admission.Denied(errs.ToAggregate().Error())
}
