package topology

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// What JobSet (sigs.k8s.io/jobset) puts on the pods of its replicated
// jobs.
const (
	JobSetNameLabel          = "jobset.sigs.k8s.io/jobset-name"
	JobSetReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
)

// JobSetPodGroupAnnotation set to "none" on a JobSet keeps muster from
// grouping its pods.
const JobSetPodGroupAnnotation = "muster.dev/podgroup"

// JobSetKind is the kind a JobSet's group is derived from, as its
// DerivedFromAnnotation names it.
const JobSetKind = "JobSet"

// jobSetSpec is what muster reads of a JobSet's spec.
type jobSetSpec struct {
	ReplicatedJobs []struct {
		Name      string `json:"name"`
		Replicas  *int32 `json:"replicas"`
		DependsOn []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"dependsOn"`
		Template struct {
			Spec struct {
				Parallelism *int32                 `json:"parallelism"`
				Template    corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"replicatedJobs"`
	StartupPolicy *struct {
		StartupPolicyOrder string `json:"startupPolicyOrder"`
	} `json:"startupPolicy"`
}

// WantsNoPodGroup reports whether the JobSet opts out of muster's group.
func WantsNoPodGroup(js *unstructured.Unstructured) bool {
	return js.GetAnnotations()[JobSetPodGroupAnnotation] == "none"
}

// FromJobSet reads the group of a JobSet's pods: the PodGroup annotations
// of its topology and its minMember. Each replicated job is a role of
// replicas × parallelism pods. A replicated job that JobSet creates only
// after others (dependsOn, or startupPolicyOrder InOrder) is a late member,
// with what its pod template requests and where it may run; when it waits
// for the others to be Ready, the launch order says so too.
func FromJobSet(js *unstructured.Unstructured) (map[string]string, int32, error) {
	raw, _, _ := unstructured.NestedMap(js.Object, "spec")
	spec := jobSetSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, 0, fmt.Errorf("reading the spec of JobSet %s: %w", js.GetName(), err)
	}
	if len(spec.ReplicatedJobs) == 0 {
		return nil, 0, fmt.Errorf("JobSet %s has no replicated jobs", js.GetName())
	}
	inOrder := spec.StartupPolicy != nil && spec.StartupPolicy.StartupPolicyOrder == "InOrder"
	var roles, chains []string
	late := map[string]LateMember{}
	var minMember int32
	for i, rjob := range spec.ReplicatedJobs {
		pods := ptr.Deref(rjob.Replicas, 1) * ptr.Deref(rjob.Template.Spec.Parallelism, 1)
		roles = append(roles, fmt.Sprintf("%s=%d", rjob.Name, pods))
		minMember += pods
		waits := len(rjob.DependsOn) > 0 || (inOrder && i > 0)
		if waits {
			late[rjob.Name] = LateMemberOf(&rjob.Template.Spec.Template.Spec)
		}
		for _, dependency := range rjob.DependsOn {
			if dependency.Status != "Ready" {
				// Its predecessors finish before it exists: they cannot be
				// placed together, and muster's gang would wait for ever.
				return nil, 0, fmt.Errorf("replicated job %s of JobSet %s waits for %s to be %s; muster groups only JobSets whose replicated jobs wait for others to be Ready",
					rjob.Name, js.GetName(), dependency.Name, dependency.Status)
			}
			chains = append(chains, dependency.Name+">"+rjob.Name)
		}
		if inOrder && i > 0 {
			chains = append(chains, spec.ReplicatedJobs[i-1].Name+">"+rjob.Name)
		}
	}
	order := "none"
	if len(chains) > 0 {
		order = strings.Join(chains, ",")
	}
	annotations := map[string]string{
		FrameworkAnnotation:   string(Generic),
		RolesAnnotation:       strings.Join(roles, ","),
		LaunchOrderAnnotation: order,
		DerivedFromAnnotation: JobSetKind + "/" + js.GetName(),
	}
	if len(late) > 0 {
		data, err := json.Marshal(late)
		if err != nil {
			return nil, 0, err
		}
		annotations[LateMembersAnnotation] = string(data)
	}
	return annotations, minMember, nil
}

// JobSetGVK is the JobSet API muster reads.
var JobSetGVK = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: JobSetKind}
