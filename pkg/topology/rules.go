package topology

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// AnnotationPrefix is the prefix of every annotation muster reads on a
// PodGroup; one it does not know is a mistake, never silently ignored.
const AnnotationPrefix = "muster.dev/"

// frameworkSettings lists the annotations that only some frameworks read.
// Any other framework would ignore them, so they are refused there.
var frameworkSettings = map[string][]Framework{
	SlotsAnnotation:             {MPI},
	MPIImplementationAnnotation: {MPI},
	NProcPerNodeAnnotation:      {PyTorch},
	// Members that come and go need a consumer that tolerates them:
	// torchrun's elastic agent, Horovod elastic through discover_hosts.sh,
	// or the job's own code.
	ElasticAnnotation:     {PyTorch, MPI, Generic},
	TFEvaluatorAnnotation: {TensorFlow},
	// MPI reaches its workers with ssh, always on port 22.
	PortAnnotation: {TensorFlow, PyTorch, MXNet, Generic},
}

// MemberName is a member's hostname, and the name its siblings know it by:
// <group>-<role>-<index>.
func MemberName(group, role string, index int32) string {
	return fmt.Sprintf("%s-%s-%d", group, role, index)
}

// FromPodGroup reads a PodGroup's topology and checks what depends on the
// group's name as well: a group with roles gets a headless Service named
// after it, and each member a hostname that starts with it.
func FromPodGroup(pg *v1alpha1.PodGroup) (*Topology, field.ErrorList) {
	t, errs := Parse(pg.Annotations)
	// A derived group's names are the operator's, and a JobSet's members'
	// are JobSet's: muster makes none.
	if len(errs) > 0 || len(t.Roles) == 0 || t.DerivedFrom != "" || t.JobSet != "" {
		return t, errs
	}
	name := field.NewPath("metadata", "name")
	if msgs := validation.IsDNS1035Label(pg.Name); len(msgs) > 0 {
		return t, field.ErrorList{field.Invalid(name, pg.Name, fmt.Sprintf(
			"the group's headless Service is named after its PodGroup, and a Service name must be a DNS-1035 label (%s); rename the PodGroup",
			strings.Join(msgs, "; ")))}
	}
	longest, longestRole := "", ""
	for _, role := range t.Roles {
		if hostname := MemberName(pg.Name, role, t.Replicas[role]-1); len(hostname) > len(longest) {
			longest, longestRole = hostname, role
		}
	}
	if len(longest) > validation.DNS1123LabelMaxLength {
		errs = append(errs, field.Invalid(name, pg.Name, fmt.Sprintf(
			"the longest member hostname, %q, is %d characters, over the limit of %d; shorten the PodGroup's name or role %s",
			longest, len(longest), validation.DNS1123LabelMaxLength, longestRole)))
	}
	return t, errs
}

// checkAnnotations refuses a muster.dev/ annotation muster does not know,
// naming the closest one it does, and a setting the group's framework
// would ignore.
func (t *Topology) checkAnnotations(annotations map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(annotations)) {
		if !strings.HasPrefix(name, AnnotationPrefix) {
			continue
		}
		if !slices.Contains(Annotations, name) {
			errs = append(errs, field.Invalid(annotationPath(name), annotations[name], fmt.Sprintf(
				"muster has no such annotation; did you mean %s?", closest(name, Annotations))))
			continue
		}
		if readers, limited := frameworkSettings[name]; limited && slices.Contains(frameworks, t.Framework) && !slices.Contains(readers, t.Framework) {
			errs = append(errs, field.Forbidden(annotationPath(name), fmt.Sprintf(
				"framework %s does not read it, only %s; remove it%s", t.Framework, joinFrameworks(readers), whyUnread[name])))
		}
	}
	return errs
}

// whyUnread says why the frameworks that do not read a setting cannot.
var whyUnread = map[string]string{
	ElasticAnnotation: " (TF_CONFIG and MXNet's DMLC_NUM_WORKER name the whole cluster once, when a member starts, so members that come and go would leave the others with a wrong one)",
}

// ElasticRole is the role an elastic group grows and shrinks; its other
// roles, such as MPI's launcher, are fixed.
const ElasticRole = "worker"

// checkElastic refuses an elastic range the roles do not allow: the
// elastic role is listed at its max, which the group grows to.
func (t *Topology) checkElastic() field.ErrorList {
	if t.Elastic == nil {
		return nil
	}
	if workers := t.Replicas[ElasticRole]; workers != t.Elastic.Max {
		return field.ErrorList{field.Invalid(annotationPath(ElasticAnnotation), fmt.Sprintf("%d:%d", t.Elastic.Min, t.Elastic.Max), fmt.Sprintf(
			"an elastic group grows and shrinks its role %s between min and max, so %s lists it at max: set %s=%d there, or the max to %d",
			ElasticRole, RolesAnnotation, ElasticRole, t.Elastic.Max, workers))}
	}
	return nil
}

// ElasticMinMember is the gang an elastic group is admitted at: min
// members of the elastic role and every member of the others.
func (t *Topology) ElasticMinMember() int32 {
	var n int32
	for role := range t.Replicas {
		n += t.AdmittedReplicas(role)
	}
	return n
}

// AdmittedReplicas is how many members of role a group is admitted with,
// and so how many a later role in the launch order waits for: an elastic
// role's min, which is all it is sure to get, and every member of any
// other role.
func (t *Topology) AdmittedReplicas(role string) int32 {
	if t.Elastic != nil && role == ElasticRole {
		return t.Elastic.Min
	}
	return t.Replicas[role]
}

// Fulfillment is Paddle EDL's fulfillment score of an elastic role with cur
// members: 0 at min, 1 at max.
func (r Range) Fulfillment(cur int32) float64 {
	if r.Max == r.Min {
		return 1
	}
	return float64(cur-r.Min) / float64(r.Max-r.Min)
}

// checkRequiredRoles refuses a topology from which the framework could not
// form its cluster.
func (t *Topology) checkRequiredRoles() field.ErrorList {
	if len(t.Roles) == 0 {
		return nil
	}
	path := annotationPath(RolesAnnotation)
	roles := strings.Join(t.Roles, ",")
	has := func(role string) bool { _, ok := t.Replicas[role]; return ok }
	var problem string
	switch t.Framework {
	case PyTorch:
		if !has("master") && !(t.Elastic != nil && has("worker")) {
			problem = "PyTorch needs a master (master=1), or workers with muster.dev/elastic, whose worker 0 hosts the rendezvous"
		}
	case TensorFlow:
		if has("master") && has("chief") {
			problem = "TensorFlow has one chief, and muster writes role master as chief; keep only one of master and chief"
		}
	case MXNet:
		if !has("scheduler") {
			problem = "MXNet's servers and workers find each other through a scheduler; add scheduler=1"
		}
	case MPI:
		if !has("worker") {
			problem = "MPI runs its ranks on workers, and the hostfile lists them; add worker=N"
		}
	}
	if problem == "" {
		return nil
	}
	return field.ErrorList{field.Invalid(path, roles, problem)}
}

func joinFrameworks(fs []Framework) string {
	names := make([]string, 0, len(fs))
	for _, f := range fs {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// closest returns the candidate with the fewest single-character edits
// from name.
func closest(name string, candidates []string) string {
	best, bestDistance := "", -1
	for _, c := range candidates {
		if d := editDistance(name, c); bestDistance < 0 || d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	previous := make([]int, len(b)+1)
	current := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current[0] = i
		for j := 1; j <= len(b); j++ {
			substitution := previous[j-1]
			if a[i-1] != b[j-1] {
				substitution++
			}
			current[j] = min(previous[j]+1, current[j-1]+1, substitution)
		}
		previous, current = current, previous
	}
	return previous[len(b)]
}

// MaxScheduleTimeoutSeconds is the longest schedule timeout a gang may
// have: the scheduler framework caps a Permit wait at 15 minutes, and a
// longer one would be cut to it without a word.
const MaxScheduleTimeoutSeconds = 900

// CheckSpec refuses what a PodGroup's spec asks that no gang could be
// given, naming the field and the fix: a schedule timeout the scheduler
// would not keep, and minResources no minMember members could use.
func CheckSpec(spec v1alpha1.PodGroupSpec) field.ErrorList {
	var errs field.ErrorList
	// 0 is the default, as scheduler-plugins reads it: mpi-operator and
	// Trainer write it when their job sets none.
	if s := spec.ScheduleTimeoutSeconds; s != nil && (*s < 0 || *s > MaxScheduleTimeoutSeconds) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "scheduleTimeoutSeconds"), *s, fmt.Sprintf(
			"must be between 0 and %d: the scheduler caps a gang's wait for its members at 15 minutes; 0 or unset is muster-scheduler's default", MaxScheduleTimeoutSeconds)))
	}
	path := field.NewPath("spec", "minResources")
	for _, name := range slices.Sorted(maps.Keys(spec.MinResources)) {
		q := spec.MinResources[name]
		switch {
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(path.Key(string(name)), q.String(), "a resource is never negative"))
		case name == corev1.ResourceCPU && spec.MinMember > 0 && q.Cmp(multiply(MaxNodeCPU, spec.MinMember)) > 0:
			most := multiply(MaxNodeCPU, spec.MinMember)
			errs = append(errs, field.Invalid(path.Key(string(name)), q.String(), fmt.Sprintf(
				"%d members use at most %s CPUs, no node having more than %s: the gang could never start; write what its minMember members request in all",
				spec.MinMember, most.String(), MaxNodeCPU.String())))
		}
	}
	return errs
}

// multiply is q times n.
func multiply(q resource.Quantity, n int32) resource.Quantity {
	return *resource.NewMilliQuantity(q.MilliValue()*int64(n), q.Format)
}
