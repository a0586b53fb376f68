// Package jobsets reads what muster needs of a JobSet whose pods are the
// members of a PodGroup made by hand (muster.dev/jobset): how JobSet names
// them. The pod webhook and the group's objects use the same names.
package jobsets

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/muster-dev/muster/pkg/topology"
)

// Names reads how the JobSet of the topology names its pods. It returns
// nil and no problem when the topology names no JobSet; problems the
// PodGroup's owner must fix (no such JobSet, roles that are not its
// replicated jobs) as field errors; and a failure to read as an error.
func Names(ctx context.Context, reader client.Reader, namespace string, t *topology.Topology) (*topology.JobSetNames, field.ErrorList, error) {
	if t.JobSet == "" {
		return nil, nil, nil
	}
	js := &unstructured.Unstructured{}
	js.SetGroupVersionKind(topology.JobSetGVK)
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: t.JobSet}, js)
	if meta.IsNoMatchError(err) {
		// JobSet's CRD was installed after the client last learnt the
		// API's kinds, which it does again: a retry succeeds.
		return nil, nil, fmt.Errorf("reading JobSet %s/%s: JobSet's API is not known yet: %w", namespace, t.JobSet, err)
	}
	if apierrors.IsNotFound(err) {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(topology.JobSetAnnotation), t.JobSet,
			fmt.Sprintf("there is no JobSet %s in namespace %s; name the JobSet whose pods are the group's members", t.JobSet, namespace))}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading JobSet %s/%s: %w", namespace, t.JobSet, err)
	}
	names, err := topology.JobSetNamesOf(js)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(topology.JobSetAnnotation), t.JobSet, err.Error())}, nil
	}
	if errs := names.CheckRoles(t); len(errs) > 0 {
		return nil, errs, nil
	}
	return &names, nil, nil
}
