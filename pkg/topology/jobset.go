package topology

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/pkg/resources"
)

// What JobSet (sigs.k8s.io/jobset) puts on the pods of its replicated
// jobs.
const (
	JobSetNameLabel          = "jobset.sigs.k8s.io/jobset-name"
	JobSetReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	// JobSetReplicasLabel is the replicas (Jobs) of the pod's replicated
	// job, and JobSetJobIndexLabel which of them the pod's Job is.
	JobSetReplicasLabel = "jobset.sigs.k8s.io/replicatedjob-replicas"
	JobSetJobIndexLabel = "jobset.sigs.k8s.io/job-index"
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
	Network *struct {
		Subdomain string `json:"subdomain"`
	} `json:"network"`
}

func readJobSetSpec(js *unstructured.Unstructured) (jobSetSpec, error) {
	raw, _, _ := unstructured.NestedMap(js.Object, "spec")
	spec := jobSetSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return spec, fmt.Errorf("reading the spec of JobSet %s: %w", js.GetName(), err)
	}
	return spec, nil
}

// JobSetNames is how JobSet names the pods of its replicated jobs: pod p
// of Job j of replicated job r is <jobset>-<r>-<j>-<p>, in the headless
// Service Subdomain. muster numbers a role's pods across its Jobs: index
// j × PodsPerJob[r] + p.
type JobSetNames struct {
	JobSet    string
	Subdomain string
	// PodsPerJob is each replicated job's parallelism.
	PodsPerJob map[string]int32
}

// JobSetNamesOf reads how the JobSet names its pods: its subdomain, by
// default its own name, and each replicated job's parallelism.
func JobSetNamesOf(js *unstructured.Unstructured) (JobSetNames, error) {
	spec, err := readJobSetSpec(js)
	if err != nil {
		return JobSetNames{}, err
	}
	names := JobSetNames{JobSet: js.GetName(), Subdomain: js.GetName(), PodsPerJob: map[string]int32{}}
	if spec.Network != nil && spec.Network.Subdomain != "" {
		names.Subdomain = spec.Network.Subdomain
	}
	for _, rjob := range spec.ReplicatedJobs {
		names.PodsPerJob[rjob.Name] = max(ptr.Deref(rjob.Template.Spec.Parallelism, 1), 1)
	}
	return names, nil
}

// Hostname is the hostname JobSet gives pod index of the role.
func (n JobSetNames) Hostname(role string, index int32) string {
	perJob := max(n.PodsPerJob[role], 1)
	return fmt.Sprintf("%s-%s-%d-%d", n.JobSet, role, index/perJob, index%perJob)
}

// CheckRoles refuses a topology whose roles are not the JobSet's
// replicated jobs, or count a role's pods otherwise than JobSet makes
// them.
func (n JobSetNames) CheckRoles(t *Topology) field.ErrorList {
	var errs field.ErrorList
	for _, role := range t.Roles {
		perJob, ok := n.PodsPerJob[role]
		switch {
		case !ok:
			errs = append(errs, field.Invalid(annotationPath(RolesAnnotation), role, fmt.Sprintf(
				"JobSet %s has no replicated job %s; name each role after a replicated job (%s)", n.JobSet, role, strings.Join(slices.Sorted(maps.Keys(n.PodsPerJob)), ", "))))
		case t.Replicas[role]%perJob != 0:
			errs = append(errs, field.Invalid(annotationPath(RolesAnnotation), role, fmt.Sprintf(
				"role %s has %d pods, but replicated job %s runs %d per Job; set it to replicas × parallelism", role, t.Replicas[role], role, perJob)))
		}
	}
	return errs
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
	// latePodSpecs are the pod templates of the late members, by role,
	// whose devices WithLateDevices records.
	latePodSpecs map[string]*corev1.PodSpec
}

// LateClaimTemplates names the ResourceClaimTemplates that the late
// members' pod templates name, which WithLateDevices reads.
func (g JobSetGroup) LateClaimTemplates() []string {
	var names []string
	for _, role := range slices.Sorted(maps.Keys(g.latePodSpecs)) {
		for _, name := range ClaimTemplateNames(g.latePodSpecs[role]) {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// WithLateDevices records, with each late member in the group's
// annotations, the devices its pod template claims through the templates
// (LateDevicesOf).
func (g JobSetGroup) WithLateDevices(templates ClaimTemplates) error {
	data, ok := g.Annotations[LateMembersAnnotation]
	if !ok {
		return nil
	}
	late := map[string]LateMember{}
	if err := json.Unmarshal([]byte(data), &late); err != nil {
		return err
	}
	for role, member := range late {
		devices, err := LateDevicesOf(g.latePodSpecs[role], templates)
		if err != nil {
			return fmt.Errorf("replicated job %s: %w", role, err)
		}
		member.Devices = devices
		late[role] = member
	}
	updated, err := json.Marshal(late)
	if err != nil {
		return err
	}
	g.Annotations[LateMembersAnnotation] = string(updated)
	return nil
}

// FromJobSet reads the group of a JobSet's pods. Each replicated job that
// no other waits for to Complete is a role of replicas × parallelism pods,
// and minMember is their sum. A replicated job that JobSet creates only
// once others are Ready (dependsOn Ready, or startupPolicyOrder InOrder)
// is ordered after them and is a late member, with what its pod template
// requests and where it may run.
func FromJobSet(js *unstructured.Unstructured) (JobSetGroup, error) {
	spec, err := readJobSetSpec(js)
	if err != nil {
		return JobSetGroup{}, err
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
			group.UngroupedRequests = resources.Add(group.UngroupedRequests, LateMemberOf(&rjob.Template.Spec.Template.Spec).Requests, pods)
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
			if group.latePodSpecs == nil {
				group.latePodSpecs = map[string]*corev1.PodSpec{}
			}
			group.latePodSpecs[rjob.Name] = &rjob.Template.Spec.Template.Spec
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

// Groups reports whether the group takes the pods of the replicated job.
func (g JobSetGroup) Groups(replicatedJob string) bool {
	return !slices.Contains(g.Ungrouped, replicatedJob)
}

// JobSetGVK is the JobSet API muster reads.
var JobSetGVK = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: JobSetKind}
