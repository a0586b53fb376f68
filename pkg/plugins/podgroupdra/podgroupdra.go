// Package podgroupdra builds kube-scheduler's DynamicResources plugin for
// muster-scheduler, with the claims a scheduling.k8s.io PodGroup declares
// in spec.resourceClaims reserved for the PodGroup, as upstream reserves
// them (DRAWorkloadResourceClaims).
//
// kube-scheduler turns that on only with the DRAWorkloadResourceClaims
// gate, which needs GenericWorkload, and muster-scheduler runs
// GenericWorkload off (docs/architecture.md): with it on, the scheduler's
// PodGroup cycle would take muster's gangs. Without it a PodGroup's claim
// is reserved for each member, so at most 256 members share one, and a
// claim made for the PodGroup from a template is no member's, so no member
// may use it. This plugin is DynamicResources itself, built with that one
// feature on, and handed the PodGroups the scheduler's informer holds: the
// scheduler's snapshot holds none with GenericWorkload off. Everything
// else is upstream's code, unchanged.
//
// The profile disables DynamicResources and enables this plugin in its
// place, with the same score weight. Its statuses name it, not
// DynamicResources: kube-scheduler keys a plugin's score weight by the name
// the plugin reports.
package podgroupdra

import (
	"context"
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	schedulingv1beta1listers "k8s.io/client-go/listers/scheduling/v1beta1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedulerconfigv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
)

// Name is the plugin's name in the registry, in scheduler configurations
// and in the statuses of its Filter.
const Name = devices.FilterName

// New builds DynamicResources with the scheduler's feature gates and
// PodGroup claims reserved for the PodGroup when the API server serves
// PodGroups. Its args are DynamicResourcesArgs, defaulted as
// kube-scheduler defaults them.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, groups *group.Model) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	features := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	if podGroups := groups.UpstreamPodGroups(); podGroups != nil {
		features.EnableDRAWorkloadResourceClaims = true
		handle = withPodGroups(handle, podGroups)
	}
	built, err := dynamicresources.New(ctx, args, handle, features)
	if err != nil {
		return nil, err
	}
	return plugin{built.(*dynamicresources.DynamicResources)}, nil
}

// plugin is DynamicResources under this plugin's name, at every extension
// point DynamicResources implements.
type plugin struct {
	*dynamicresources.DynamicResources
}

var (
	_ fwk.PreEnqueuePlugin  = plugin{}
	_ fwk.PreFilterPlugin   = plugin{}
	_ fwk.FilterPlugin      = plugin{}
	_ fwk.PostFilterPlugin  = plugin{}
	_ fwk.ScorePlugin       = plugin{}
	_ fwk.ReservePlugin     = plugin{}
	_ fwk.PreBindPlugin     = plugin{}
	_ fwk.EnqueueExtensions = plugin{}
	_ fwk.SignPlugin        = plugin{}
)

func (plugin) Name() string { return Name }

// decodeArgs reads the plugin's args as kube-scheduler reads
// DynamicResources': versioned, defaulted, then converted.
func decodeArgs(obj runtime.Object) (*config.DynamicResourcesArgs, error) {
	var versioned configv1.DynamicResourcesArgs
	if err := frameworkruntime.DecodeInto(obj, &versioned); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	schedulerconfigv1.SetDefaults_DynamicResourcesArgs(&versioned)
	var args config.DynamicResourcesArgs
	if err := scheme.Scheme.Convert(&versioned, &args, nil); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	return &args, nil
}

// withPodGroups is the handle with PodGroups in its snapshot's lister.
func withPodGroups(handle fwk.Handle, podGroups schedulingv1beta1listers.PodGroupLister) fwk.Handle {
	return podGroupsHandle{Handle: handle, podGroups: podGroupLister{podGroups}}
}

type podGroupsHandle struct {
	fwk.Handle
	podGroups fwk.PodGroupLister
}

// SnapshotSharedLister is the scheduler's snapshot of this cycle, which
// changes from cycle to cycle, with the PodGroups of the informer.
func (h podGroupsHandle) SnapshotSharedLister() fwk.SharedLister {
	return snapshotWithPodGroups{SharedLister: h.Handle.SnapshotSharedLister(), podGroups: h.podGroups}
}

type snapshotWithPodGroups struct {
	fwk.SharedLister
	podGroups fwk.PodGroupLister
}

func (s snapshotWithPodGroups) PodGroups() fwk.PodGroupLister { return s.podGroups }

// podGroupLister reads the informer's PodGroups as the snapshot's lister
// reads its own.
type podGroupLister struct {
	lister schedulingv1beta1listers.PodGroupLister
}

func (l podGroupLister) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	return l.lister.PodGroups(namespace).Get(name)
}
