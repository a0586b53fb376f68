// Package ownerscale reads and sets how many workers the controller of an
// elastic group's workers runs: through its scale subresource (a
// StatefulSet, a CRD with one such as PyTorchJob), or the replica field of
// a known operator's job that has none (MPIJob).
package ownerscale

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/muster-dev/muster/pkg/topology"
)

// Scale is how many workers the controller of an elastic group's workers
// runs, and where that number is written. A group whose workers' owner has
// neither a scale subresource nor a known replica field gives members back
// by eviction, and grows only into pods that already exist.
type Scale struct {
	// object is the owner, as its scale or as itself (replicasPath).
	object       *unstructured.Unstructured
	scale        *unstructured.Unstructured
	replicasPath []string
	Replicas     int32
}

// String names the owner as Kind namespace/name.
func (s *Scale) String() string {
	return fmt.Sprintf("%s %s/%s", s.object.GetKind(), s.object.GetNamespace(), s.object.GetName())
}

// Of reads the scale of ref, the controller of a group's workers; it is
// nil when that owner cannot be scaled. The scale subresource is read
// through c; an operator's job through reader, not to start an informer on
// every kind of owner.
func Of(ctx context.Context, c client.Client, reader client.Reader, namespace string, ref *metav1.OwnerReference) (*Scale, error) {
	if ref == nil {
		return nil, nil
	}
	object := &unstructured.Unstructured{}
	object.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	object.SetNamespace(namespace)
	object.SetName(ref.Name)
	scale := &unstructured.Unstructured{}
	scale.SetGroupVersionKind(schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"})
	err := c.SubResource("scale").Get(ctx, object, scale)
	switch {
	case err == nil:
		replicas, _, err := unstructured.NestedInt64(scale.Object, "spec", "replicas")
		if err != nil {
			return nil, fmt.Errorf("reading the scale of %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
		}
		return &Scale{object: object, scale: scale, Replicas: int32(replicas)}, nil
	case meta.IsNoMatchError(err):
		return nil, nil
	case !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) && !apierrors.IsForbidden(err):
		return nil, fmt.Errorf("reading the scale of %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	}
	// No scale subresource, no such owner, or a kind muster is not granted
	// the scale of (its RBAC lists the kinds it scales).
	path, known := topology.RoleReplicasPath(ref.APIVersion, ref.Kind, topology.ElasticRole)
	if !known {
		return nil, nil
	}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, object); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	replicas, found, err := unstructured.NestedInt64(object.Object, path...)
	if err != nil {
		return nil, fmt.Errorf("reading %s of %s %s/%s: %w", strings.Join(path, "."), ref.Kind, namespace, ref.Name, err)
	}
	if !found {
		// The operators' default.
		replicas = 1
	}
	return &Scale{object: object, replicasPath: path, Replicas: int32(replicas)}, nil
}

// Set has the owner run n workers, through c. Both ways carry the
// resourceVersion read, so a change made since is not overwritten.
func (s *Scale) Set(ctx context.Context, c client.Client, n int32) error {
	if s.scale != nil {
		scale := s.scale.DeepCopy()
		if err := unstructured.SetNestedField(scale.Object, int64(n), "spec", "replicas"); err != nil {
			return err
		}
		if err := c.SubResource("scale").Update(ctx, s.object, client.WithSubResourceBody(scale)); err != nil {
			return fmt.Errorf("scaling %s to %d: %w", s, n, err)
		}
		return nil
	}
	changed := s.object.DeepCopy()
	if err := unstructured.SetNestedField(changed.Object, int64(n), s.replicasPath...); err != nil {
		return err
	}
	if err := c.Patch(ctx, changed, client.MergeFromWithOptions(s.object, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("setting %s of %s to %d: %w", strings.Join(s.replicasPath, "."), s, n, err)
	}
	return nil
}

// Shrinker lowers owners' workers directly through the API, with no
// informer: for muster-scheduler's GangPreemption, which shrinks an
// elastic owner before taking one of its members, too rarely for an
// informer on every kind of owner to pay.
type Shrinker struct {
	client client.Client
}

// NewShrinker builds a Shrinker on the client configuration.
func NewShrinker(config *rest.Config) (*Shrinker, error) {
	c, err := client.New(config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating the client that scales elastic owners: %w", err)
	}
	return &Shrinker{client: c}, nil
}

// ShrinkTo has the owner run at most n workers. It reads the owner again
// after a conflict: the owner's controller writes its status as members
// go, and each write is a conflict for a scale read before it. An owner
// that already runs n or fewer, or has no scale, is left as it is.
func (s *Shrinker) ShrinkTo(ctx context.Context, namespace string, owner *metav1.OwnerReference, n int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := Of(ctx, s.client, s.client, namespace, owner)
		if err != nil || scale == nil || scale.Replicas <= n {
			return err
		}
		return scale.Set(ctx, s.client, n)
	})
}
