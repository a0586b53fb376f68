package topology

import (
	"encoding/json"
	"fmt"
	"slices"
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

// JobSetGroup is the group muster makes of a JobSet's pods.
type JobSetGroup struct {
	// Annotations are the PodGroup's: the topology.
	Annotations map[string]string
	MinMember   int32
	// Ungrouped are the replicated jobs that others wait for to Complete,
	// such as initializers: they run, and finish, before the group does,
	// so their pods stay out of it.
	Ungrouped []string
	// UngroupedRequests is what the pods of Ungrouped request in all.
	UngroupedRequests corev1.ResourceList
}

// FromJobSet reads the group of a JobSet's pods. Each replicated job that
// no other waits for to Complete is a role of replicas × parallelism pods,
// and minMember is their sum. A replicated job that JobSet creates only
// once others are Ready (dependsOn Ready, or startupPolicyOrder InOrder)
// is ordered after them and is a late member, with what its pod template
// requests and where it may run.
func FromJobSet(js *unstructured.Unstructured) (JobSetGroup, error) {
	raw, _, _ := unstructured.NestedMap(js.Object, "spec")
	spec := jobSetSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return JobSetGroup{}, fmt.Errorf("reading the spec of JobSet %s: %w", js.GetName(), err)
	}
	inOrder := spec.StartupPolicy != nil && spec.StartupPolicy.StartupPolicyOrder == "InOrder"
	var group JobSetGroup
	for _, rjob := range spec.ReplicatedJobs {
		for _, dependency := range rjob.DependsOn {
			if dependency.Status == "Complete" && !slices.Contains(group.Ungrouped, dependency.Name) {
				group.Ungrouped = append(group.Ungrouped, dependency.Name)
			}
		}
	}
	var roles, chains []string
	late := map[string]LateMember{}
	previous := ""
	for _, rjob := range spec.ReplicatedJobs {
		pods := ptr.Deref(rjob.Replicas, 1) * ptr.Deref(rjob.Template.Spec.Parallelism, 1)
		if slices.Contains(group.Ungrouped, rjob.Name) {
			group.UngroupedRequests = addRequests(group.UngroupedRequests, LateMemberOf(&rjob.Template.Spec.Template.Spec).Requests, pods)
			continue
		}
		roles = append(roles, fmt.Sprintf("%s=%d", rjob.Name, pods))
		group.MinMember += pods
		waitsForReady := inOrder && previous != ""
		if waitsForReady {
			chains = append(chains, previous+">"+rjob.Name)
		}
		for _, dependency := range rjob.DependsOn {
			if dependency.Status != "Ready" {
				continue
			}
			if slices.Contains(group.Ungrouped, dependency.Name) {
				return JobSetGroup{}, fmt.Errorf("replicated job %s of JobSet %s waits for %s to be Ready, which another waits for to Complete; muster cannot group both", rjob.Name, js.GetName(), dependency.Name)
			}
			waitsForReady = true
			chains = append(chains, dependency.Name+">"+rjob.Name)
		}
		if waitsForReady {
			late[rjob.Name] = LateMemberOf(&rjob.Template.Spec.Template.Spec)
		}
		previous = rjob.Name
	}
	if len(roles) == 0 {
		return JobSetGroup{}, fmt.Errorf("JobSet %s has no replicated job to group", js.GetName())
	}
	order := "none"
	if len(chains) > 0 {
		order = strings.Join(chains, ",")
	}
	group.Annotations = map[string]string{
		FrameworkAnnotation:   string(Generic),
		RolesAnnotation:       strings.Join(roles, ","),
		LaunchOrderAnnotation: order,
		DerivedFromAnnotation: JobSetKind + "/" + js.GetName(),
	}
	if len(late) > 0 {
		data, err := json.Marshal(late)
		if err != nil {
			return JobSetGroup{}, err
		}
		group.Annotations[LateMembersAnnotation] = string(data)
	}
	return group, nil
}

// addRequests adds pods × requests to total.
func addRequests(total, requests corev1.ResourceList, pods int32) corev1.ResourceList {
	if total == nil {
		total = corev1.ResourceList{}
	}
	for name, quantity := range requests {
		quantity.Mul(int64(pods))
		sum := total[name]
		sum.Add(quantity)
		total[name] = sum
	}
	return total
}

// Groups reports whether the group takes the pods of the replicated job.
func (g JobSetGroup) Groups(replicatedJob string) bool {
	return !slices.Contains(g.Ungrouped, replicatedJob)
}

// JobSetGVK is the JobSet API muster reads.
var JobSetGVK = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: JobSetKind}
