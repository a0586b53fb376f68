// Package workloadapi tells whether the cluster serves upstream's Workload
// API, whose scheduling.k8s.io PodGroups are muster's second source of
// groups. Both programs ask once, at start: where the API is absent, the
// default, nothing about it runs.
package workloadapi

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

// GroupAPIs are the APIs groups are read from, as both programs log them
// at start: scheduler-plugins' always, and upstream's where it is served.
func GroupAPIs(servesPodGroups bool) []string {
	apis := []string{v1alpha1.SchemeGroupVersion.String()}
	if servesPodGroups {
		apis = append(apis, topology.UpstreamPodGroupVersion.String())
	}
	return apis
}

// ServesPodGroups reports whether the API server serves scheduling.k8s.io's
// PodGroups, as it does with the GenericWorkload gate on.
func ServesPodGroups(ctx context.Context, client discovery.ServerResourcesInterfaceWithContext) (bool, error) {
	resources, err := client.ServerResourcesForGroupVersionWithContext(ctx, topology.UpstreamPodGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves %s: %w", topology.UpstreamPodGroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "podgroups" {
			return true, nil
		}
	}
	return false, nil
}
