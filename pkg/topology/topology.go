package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/resources"
)

// Annotations of a PodGroup that describe its topology.
const (
	FrameworkAnnotation         = "muster.dev/framework"
	RolesAnnotation             = "muster.dev/roles"
	LaunchOrderAnnotation       = "muster.dev/launch-order"
	StartAfterAnnotation        = "muster.dev/start-after"
	PortAnnotation              = "muster.dev/port"
	SlotsAnnotation             = "muster.dev/slots"
	MPIImplementationAnnotation = "muster.dev/mpi-implementation"
	NProcPerNodeAnnotation      = "muster.dev/nproc-per-node"
	ElasticAnnotation           = "muster.dev/elastic"
	TFEvaluatorAnnotation       = "muster.dev/tf-evaluator"
	// LateMembersAnnotation names the roles whose pods the owner creates
	// only after others are Ready, each with what its pod template says of
	// where it runs (LateMember), as JSON:
	// {"launcher":{"requests":{"cpu":"1"}}}. The gang is admitted with
	// room reserved for them.
	LateMembersAnnotation = "muster.dev/late-members"
	// JobSetAnnotation names the JobSet whose pods are the members of a
	// PodGroup made by hand: each role is one of its replicated jobs, and
	// the members keep JobSet's hostnames and Service, which every address
	// muster writes uses.
	JobSetAnnotation = "muster.dev/jobset"
	// DomainRequiredAnnotation names a node label whose one value every
	// member shares: the gang is placed inside one rack, block or NVLink
	// domain, and nodes without the label are never its candidates. An
	// upstream PodGroup's spec.schedulingConstraints.topology[0].key says
	// the same (FromUpstream).
	DomainRequiredAnnotation = "muster.dev/topology-required"
	// DomainPreferredAnnotation names a node label, finer than the
	// required one, whose one value the members share if they fit in one.
	DomainPreferredAnnotation = "muster.dev/topology-preferred"
)

// QuorumReachedAnnotation is muster-scheduler's record, on a
// scheduler-plugins PodGroup, that its gang was admitted with its quorum:
// the time, written once. Such a gang is admitted for good, through a
// restart or a change of leader: a minMember raised later never makes it
// partly bound. An upstream PodGroup's PodGroupInitiallyScheduled
// condition says the same. It is a record muster writes, not a setting
// it reads, so it is outside AnnotationPrefix: the topology's checks pass
// over it, and writing it wakes no member.
const QuorumReachedAnnotation = "scheduling.muster.dev/quorum-reached"

// ReachedQuorum reports whether the PodGroup records that its gang was
// admitted with its quorum (QuorumReachedAnnotation).
func ReachedQuorum(pg *v1alpha1.PodGroup) bool {
	_, reached := pg.Annotations[QuorumReachedAnnotation]
	return reached
}

// Annotations lists every topology annotation, in the order the design
// documents them.
var Annotations = []string{
	FrameworkAnnotation, RolesAnnotation, LaunchOrderAnnotation, StartAfterAnnotation, PortAnnotation,
	SlotsAnnotation, MPIImplementationAnnotation, NProcPerNodeAnnotation, ElasticAnnotation, TFEvaluatorAnnotation,
	DerivedFromAnnotation, LateMembersAnnotation, JobSetAnnotation, DomainRequiredAnnotation, DomainPreferredAnnotation,
}

// Framework is the training framework a group runs.
type Framework string

const (
	TensorFlow Framework = "tensorflow"
	PyTorch    Framework = "pytorch"
	MPI        Framework = "mpi"
	MXNet      Framework = "mxnet"
	Generic    Framework = "generic"
)

var frameworks = []Framework{TensorFlow, PyTorch, MPI, MXNet, Generic}

// StartAfter is the state every pod of a predecessor role must reach
// before its successors may bind.
type StartAfter string

const (
	StartAfterReady     StartAfter = "Ready"
	StartAfterRunning   StartAfter = "Running"
	StartAfterScheduled StartAfter = "Scheduled"
)

// Range is an inclusive range of node counts, for PyTorch elastic.
type Range struct{ Min, Max int32 }

// Topology is the model of one group, from its PodGroup's annotations.
type Topology struct {
	Framework Framework
	// Roles lists the roles in the order the roles annotation names them.
	Roles []string
	// Replicas is the number of pods of each role.
	Replicas map[string]int32
	// predecessors maps a role to the roles that must reach StartAfter
	// before it binds.
	predecessors map[string][]string
	StartAfter   StartAfter
	// Port is the framework's port; 0 for generic.
	Port int32
	// Slots is the MPI slots per worker; 0 means the worker's GPU count,
	// else 1.
	Slots             int32
	MPIImplementation string
	// NProcPerNode is "auto" or a positive number.
	NProcPerNode string
	// Elastic is the range of ElasticRole's members; nil when the group is
	// rigid.
	Elastic *Range
	// EvaluatorInCluster lists the TensorFlow evaluator in every pod's
	// TF_CONFIG rather than only in its own.
	EvaluatorInCluster bool
	// DerivedFrom names the owner (Kind/name) the topology was read from;
	// its members are the operator's, and muster adds nothing to them.
	DerivedFrom string
	// Late holds, for each role whose pods are created only after others
	// are Ready, what its pod template says of where one of them runs.
	Late map[string]LateMember
	// JobSet names the JobSet whose pods are the members, named as JobSet
	// names them; empty when muster names them.
	JobSet string
	// DomainKey is the node label whose one value every member shares;
	// empty when the gang may span domains.
	DomainKey string
	// PreferredDomainKey is a finer node label whose one value the members
	// share when they fit in one; empty for none.
	PreferredDomainKey string
}

// LateMember is what a pod created late requests and where it may run,
// from its owner's pod template: room for it is held on a node it may use.
type LateMember struct {
	Requests     corev1.ResourceList  `json:"requests"`
	NodeSelector map[string]string    `json:"nodeSelector,omitempty"`
	NodeAffinity *corev1.NodeAffinity `json:"nodeAffinity,omitempty"`
	Tolerations  []corev1.Toleration  `json:"tolerations,omitempty"`
	// Devices are what one pod of the role claims through Dynamic Resource
	// Allocation: the room held for it includes them (LateDevices).
	Devices []LateDevices `json:"devices,omitempty"`
}

// LateMemberOf is what a pod of this template tells of a late member.
func LateMemberOf(spec *corev1.PodSpec) LateMember {
	late := LateMember{
		Requests:     resources.OfPod(&corev1.Pod{Spec: *spec}),
		NodeSelector: spec.NodeSelector,
		Tolerations:  spec.Tolerations,
	}
	if spec.Affinity != nil {
		late.NodeAffinity = spec.Affinity.NodeAffinity
	}
	return late
}

// MayRunOn reports whether the pod's node selector, required node affinity
// and tolerations let it run on the node, which must be schedulable.
func MayRunOn(pod *corev1.Pod, node *corev1.Node) bool {
	if node.Spec.Unschedulable {
		return false
	}
	if match, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !match {
		return false
	}
	// Numeric toleration operators (Gt, Lt) are alpha and off by default
	// in 1.37; without them the logger is never written to.
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// Pod is a pod of the late member as far as the scheduler's node checks
// read it.
func (l LateMember) Pod() *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		NodeSelector: l.NodeSelector,
		Tolerations:  l.Tolerations,
		Containers:   []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: l.Requests}}},
	}}
	if l.NodeAffinity != nil {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: l.NodeAffinity}
	}
	return pod
}

// defaultOrders are the launch orders a framework gets when its PodGroup
// names none, as chains; roles that are absent drop out of a chain.
var defaultOrders = map[Framework][][]string{
	MPI:        {{"worker", "launcher"}},
	TensorFlow: {{"ps", "chief"}, {"ps", "worker"}, {"ps", "evaluator"}},
	MXNet:      {{"scheduler", "server", "worker"}},
	PyTorch:    {{"master", "worker"}},
}

var defaultPorts = map[Framework]int32{TensorFlow: 2222, PyTorch: 23456, MXNet: 9091, MPI: 22}

var mpiImplementations = []string{"openmpi", "intel", "mpich"}

// MaxRoles bounds the roles of a group: every member's environment lists
// the hosts of every role.
const MaxRoles = 32

func annotationPath(name string) *field.Path {
	return field.NewPath("metadata", "annotations").Key(name)
}

// Parse reads a topology from a PodGroup's annotations. It returns every
// problem it finds, each naming the annotation and how to fix it; the
// topology is meaningful only when there is none.
func Parse(annotations map[string]string) (*Topology, field.ErrorList) {
	t := &Topology{Replicas: map[string]int32{}, predecessors: map[string][]string{}}
	var errs field.ErrorList

	t.Framework = Generic
	if v, ok := annotations[FrameworkAnnotation]; ok {
		t.Framework = Framework(v)
		if !slices.Contains(frameworks, t.Framework) {
			errs = append(errs, field.NotSupported(annotationPath(FrameworkAnnotation), v, frameworkNames()))
		}
	}
	errs = append(errs, t.parseRoles(annotations)...)
	errs = append(errs, t.parseOrder(annotations)...)

	t.StartAfter = StartAfterReady
	if v, ok := annotations[StartAfterAnnotation]; ok {
		t.StartAfter = StartAfter(v)
		if !slices.Contains([]StartAfter{StartAfterReady, StartAfterRunning, StartAfterScheduled}, t.StartAfter) {
			errs = append(errs, field.NotSupported(annotationPath(StartAfterAnnotation), v, []string{"Ready", "Running", "Scheduled"}))
		}
	}

	t.Port = defaultPorts[t.Framework]
	if v, ok := annotations[PortAnnotation]; ok {
		port, err := strconv.ParseInt(v, 10, 32)
		if err != nil || port < 1 || port > 65535 {
			errs = append(errs, field.Invalid(annotationPath(PortAnnotation), v, "must be a port number from 1 to 65535"))
		}
		t.Port = int32(port)
	}
	if v, ok := annotations[SlotsAnnotation]; ok {
		slots, err := strconv.ParseInt(v, 10, 32)
		if err != nil || slots < 1 {
			errs = append(errs, field.Invalid(annotationPath(SlotsAnnotation), v, "must be a positive number of MPI slots per worker, or absent to use the worker's nvidia.com/gpu limit"))
		}
		t.Slots = int32(slots)
	}
	t.MPIImplementation = "openmpi"
	if v, ok := annotations[MPIImplementationAnnotation]; ok {
		t.MPIImplementation = v
		if !slices.Contains(mpiImplementations, v) {
			errs = append(errs, field.NotSupported(annotationPath(MPIImplementationAnnotation), v, mpiImplementations))
		}
	}
	t.NProcPerNode = "auto"
	if v, ok := annotations[NProcPerNodeAnnotation]; ok {
		t.NProcPerNode = v
		if n, err := strconv.ParseInt(v, 10, 32); v != "auto" && (err != nil || n < 1) {
			errs = append(errs, field.Invalid(annotationPath(NProcPerNodeAnnotation), v, `must be "auto" or a positive number of processes per node`))
		}
	}
	if v, ok := annotations[ElasticAnnotation]; ok {
		r, err := parseRange(v)
		if err != nil {
			errs = append(errs, field.Invalid(annotationPath(ElasticAnnotation), v, err.Error()))
		}
		t.Elastic = r
	}
	if v, ok := annotations[TFEvaluatorAnnotation]; ok {
		t.EvaluatorInCluster = v == "cluster"
		if !t.EvaluatorInCluster {
			errs = append(errs, field.NotSupported(annotationPath(TFEvaluatorAnnotation), v, []string{"cluster"}))
		}
	}
	t.DerivedFrom = annotations[DerivedFromAnnotation]
	if v, ok := annotations[JobSetAnnotation]; ok {
		t.JobSet = v
		if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(annotationPath(JobSetAnnotation), v, "must be the name of a JobSet: "+strings.Join(msgs, "; ")))
		}
	}
	if v, ok := annotations[DomainRequiredAnnotation]; ok {
		t.DomainKey = v
		if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(annotationPath(DomainRequiredAnnotation), v,
				"must be a node label key, such as topology.kubernetes.io/rack: "+strings.Join(msgs, "; ")))
		}
	}
	errs = append(errs, t.parsePreferredDomain(annotations)...)
	errs = append(errs, t.parseLate(annotations)...)
	errs = append(errs, t.checkAnnotations(annotations)...)
	// A derived group's roles are named by its operator, and muster
	// writes none of the framework's environment for them.
	if len(errs) == 0 && t.DerivedFrom == "" {
		errs = append(t.checkRequiredRoles(), t.checkElastic()...)
	}
	return t, errs
}

// BlockLabel and RackLabel are node labels of a block of racks and of a
// rack, as upstream's topology-aware scheduling names them.
const (
	BlockLabel = "topology.kubernetes.io/block"
	RackLabel  = "topology.kubernetes.io/rack"
)

// domainLevels are the well-known node labels of topology domains,
// coarsest first: a preferred domain must be finer than a required one.
var domainLevels = []string{corev1.LabelTopologyRegion, corev1.LabelTopologyZone, BlockLabel, RackLabel, corev1.LabelHostname}

func (t *Topology) parsePreferredDomain(annotations map[string]string) field.ErrorList {
	v, ok := annotations[DomainPreferredAnnotation]
	if !ok {
		return nil
	}
	t.PreferredDomainKey = v
	path := annotationPath(DomainPreferredAnnotation)
	if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, v, "must be a node label key, such as topology.kubernetes.io/rack: "+strings.Join(msgs, "; "))}
	}
	if t.DomainKey == "" {
		return nil
	}
	preferred, required := slices.Index(domainLevels, v), slices.Index(domainLevels, t.DomainKey)
	if v == t.DomainKey || preferred >= 0 && required >= 0 && preferred < required {
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf(
			"must be finer than %s, %s: the members share one value of the required label, and prefer one of a label inside it", DomainRequiredAnnotation, t.DomainKey))}
	}
	return nil
}

func (t *Topology) parseLate(annotations map[string]string) field.ErrorList {
	v, ok := annotations[LateMembersAnnotation]
	if !ok {
		return nil
	}
	path := annotationPath(LateMembersAnnotation)
	decoder := json.NewDecoder(strings.NewReader(v))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&t.Late); err != nil {
		return field.ErrorList{field.Invalid(path, v, `must be JSON of the roles created late and what one pod of each requests, and where it may run, for example {"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"pool":"cpu"}}}`)}
	}
	var errs field.ErrorList
	for _, role := range slices.Sorted(maps.Keys(t.Late)) {
		if _, known := t.Replicas[role]; !known {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("names role %q, which %s does not list", role, RolesAnnotation)))
		}
		errs = append(errs, checkLateDevices(path, v, role, t.Late[role].Devices)...)
		for _, problem := range t.Late[role].problems() {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("role %s %s", role, problem)))
		}
	}
	return errs
}

// The most of a resource any node has: a larger request is a mistake (a
// count of millicores written as cores, say), not a room to hold.
var (
	MaxNodeCPU    = resource.MustParse("4096")
	maxNodeMemory = resource.MustParse("64Ti")
)

// problems lists what the late member asks that no node could give, or
// that the API server would refuse in its pod, each saying the fix: its
// room could never be held.
func (l LateMember) problems() []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(l.Requests)) {
		q := l.Requests[name]
		switch {
		case len(validation.IsQualifiedName(string(name))) > 0:
			problems = append(problems, fmt.Sprintf("requests %q, which is no resource name: %s", name, strings.Join(validation.IsQualifiedName(string(name)), "; ")))
		case q.Sign() < 0:
			problems = append(problems, fmt.Sprintf("requests %s of %s; a request is never negative", q.String(), name))
		case name == corev1.ResourceCPU && q.Cmp(MaxNodeCPU) > 0:
			problems = append(problems, fmt.Sprintf("requests %s CPUs, more than the %s any node has: its room could never be held; write what one pod of the role requests", q.String(), MaxNodeCPU.String()))
		case name == corev1.ResourceMemory && q.Cmp(maxNodeMemory) > 0:
			problems = append(problems, fmt.Sprintf("requests %s of memory, more than the %s any node has: its room could never be held; write what one pod of the role requests", q.String(), maxNodeMemory.String()))
		case isExtended(name) && q.MilliValue()%1000 != 0:
			problems = append(problems, fmt.Sprintf("requests %s of %s; an extended resource is counted in whole units: request a whole number", q.String(), name))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(l.NodeSelector)) {
		if msgs := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(l.NodeSelector[key])...); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("has nodeSelector %q: %q, which no node label can match: %s", key, l.NodeSelector[key], strings.Join(msgs, "; ")))
		}
	}
	if a := l.NodeAffinity; a != nil {
		if a.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			if _, err := nodeaffinity.NewNodeSelector(a.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
				problems = append(problems, fmt.Sprintf("has a required nodeAffinity the API server would refuse in its pod: %v; use the operators In, NotIn, Exists, DoesNotExist, Gt or Lt", err))
			}
		}
		if _, err := nodeaffinity.NewPreferredSchedulingTerms(a.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			problems = append(problems, fmt.Sprintf("has a preferred nodeAffinity the API server would refuse in its pod: %v; use the operators In, NotIn, Exists, DoesNotExist, Gt or Lt", err))
		}
	}
	for i, t := range l.Tolerations {
		if problem := tolerationProblem(t); problem != "" {
			problems = append(problems, fmt.Sprintf("has tolerations[%d] %s", i, problem))
		}
	}
	return problems
}

// isExtended reports whether the resource is an extended one, counted in
// whole units, as the API server reads a pod's requests.
func isExtended(name corev1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.HasPrefix(n, corev1.ResourceDefaultNamespacePrefix) && !strings.HasPrefix(n, corev1.ResourceHugePagesPrefix)
}

// tolerationProblem says what the API server would refuse in the
// toleration, and the fix, or "" when nothing.
func tolerationProblem(t corev1.Toleration) string {
	switch {
	case t.Operator != "" && t.Operator != corev1.TolerationOpEqual && t.Operator != corev1.TolerationOpExists:
		return fmt.Sprintf("with operator %q; use Equal or Exists", t.Operator)
	case t.Effect != "" && t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectPreferNoSchedule && t.Effect != corev1.TaintEffectNoExecute:
		return fmt.Sprintf("with effect %q; use NoSchedule, PreferNoSchedule or NoExecute, or none for all", t.Effect)
	case t.Key != "" && len(validation.IsQualifiedName(t.Key)) > 0:
		return fmt.Sprintf("with key %q, which no taint can have: %s", t.Key, strings.Join(validation.IsQualifiedName(t.Key), "; "))
	case t.Key == "" && t.Operator != corev1.TolerationOpExists:
		return "with no key and operator Equal; a toleration of every taint has operator Exists"
	case t.Operator == corev1.TolerationOpExists && t.Value != "":
		return fmt.Sprintf("with operator Exists and value %q; Exists takes no value", t.Value)
	}
	return ""
}

// IsLate reports whether role's pods are created only after others are
// Ready: the group holds their room until they come.
func (t *Topology) IsLate(role string) bool {
	_, late := t.Late[role]
	return late
}

// MissingLate returns how many pods of each late role do not exist yet,
// given how many active pods each role has.
func (t *Topology) MissingLate(active map[string]int32) LateToCome {
	missing := LateToCome{}
	for role := range t.Late {
		missing[role] = max(t.Replicas[role]-active[role], 0)
	}
	return missing
}

// LateToCome counts, by role, the late members their owner has yet to
// create.
type LateToCome map[string]int32

// Total is the late members to come of every role.
func (l LateToCome) Total() int32 {
	var n int32
	for _, c := range l {
		n += c
	}
	return n
}

func frameworkNames() []string {
	names := make([]string, 0, len(frameworks))
	for _, f := range frameworks {
		names = append(names, string(f))
	}
	return names
}

func (t *Topology) parseRoles(annotations map[string]string) field.ErrorList {
	path := annotationPath(RolesAnnotation)
	v, ok := annotations[RolesAnnotation]
	if !ok {
		if t.Framework != Generic && slices.Contains(frameworks, t.Framework) {
			return field.ErrorList{field.Required(path, fmt.Sprintf("framework %s needs its roles and replicas, for example ps=2,worker=3", t.Framework))}
		}
		return nil
	}
	pairs := strings.Split(v, ",")
	if len(pairs) > MaxRoles {
		return field.ErrorList{field.TooMany(path, len(pairs), MaxRoles)}
	}
	var errs field.ErrorList
	for _, pair := range pairs {
		role, count, found := strings.Cut(strings.TrimSpace(pair), "=")
		if !found {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("%q is not role=replicas; write the roles as ps=2,worker=3", pair)))
			continue
		}
		if msgs := validation.IsDNS1123Label(role); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("role %q must be a DNS label (lower-case letters, digits and '-'), as it becomes part of host names: %s", role, strings.Join(msgs, "; "))))
			continue
		}
		n, err := strconv.ParseInt(count, 10, 32)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(count, "-") {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("role %s has %s replicas, more than the %d a role may have", role, count, math.MaxInt32)))
			continue
		}
		if err != nil || n < 1 {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("role %s has replicas %q; it must be a positive whole number", role, count)))
			continue
		}
		if _, dup := t.Replicas[role]; dup {
			errs = append(errs, field.Duplicate(path, role))
			continue
		}
		t.Roles = append(t.Roles, role)
		t.Replicas[role] = int32(n)
	}
	return errs
}

// misspelledOrderRoles refuses a role that is a likely misspelling (at
// most two edits) of a role the framework's default order names and the
// group lacks: that order would silently lose the role, and a launcher
// written "lancher" would bind before its workers.
func (t *Topology) misspelledOrderRoles() field.ErrorList {
	known := sets.New[string]()
	for _, chain := range defaultOrders[t.Framework] {
		known.Insert(chain...)
	}
	var errs field.ErrorList
	for _, role := range t.Roles {
		if known.Has(role) {
			continue
		}
		for _, want := range sets.List(known) {
			if _, has := t.Replicas[want]; !has && editDistance(role, want) <= 2 {
				errs = append(errs, field.Invalid(annotationPath(RolesAnnotation), role, fmt.Sprintf(
					"role %q is not one of %s's, and its launch order waits for a role %q the group lacks; rename the role %s, or set %s (none for no order)",
					role, t.Framework, want, want, LaunchOrderAnnotation)))
				break
			}
		}
	}
	return errs
}

func (t *Topology) parseOrder(annotations map[string]string) field.ErrorList {
	path := annotationPath(LaunchOrderAnnotation)
	v, given := annotations[LaunchOrderAnnotation]
	if given && v == "none" {
		return nil
	}
	if !given {
		for _, chain := range defaultOrders[t.Framework] {
			var present []string
			for _, role := range chain {
				if _, ok := t.Replicas[role]; ok {
					present = append(present, role)
				}
			}
			t.addChain(present)
		}
		return t.misspelledOrderRoles()
	}
	var errs field.ErrorList
	for _, spec := range strings.Split(v, ",") {
		chain := strings.Split(strings.TrimSpace(spec), ">")
		valid := len(chain) >= 2
		if !valid {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("%q is not a chain; write chains as a>b>c joined by commas, or none", spec)))
			continue
		}
		for i, role := range chain {
			chain[i] = strings.TrimSpace(role)
			if _, ok := t.Replicas[chain[i]]; !ok {
				errs = append(errs, field.Invalid(path, v, fmt.Sprintf("names role %q, which %s does not list; add it there or remove it from the order", chain[i], RolesAnnotation)))
				valid = false
			}
		}
		if valid {
			t.addChain(chain)
		}
	}
	if cycle := t.cycle(); cycle != nil {
		errs = append(errs, field.Invalid(path, v, fmt.Sprintf("the order has a cycle, %s; a role cannot wait for itself", strings.Join(cycle, ">"))))
	}
	return errs
}

func (t *Topology) addChain(chain []string) {
	for i := 1; i < len(chain); i++ {
		if !slices.Contains(t.predecessors[chain[i]], chain[i-1]) {
			t.predecessors[chain[i]] = append(t.predecessors[chain[i]], chain[i-1])
		}
	}
}

// cycle returns one cycle of the order, as the roles around it with the
// first repeated at the end, or nil when the order is a DAG.
func (t *Topology) cycle() []string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(role string) []string
	visit = func(role string) []string {
		state[role] = onPath
		path = append(path, role)
		for _, pred := range t.predecessors[role] {
			switch state[pred] {
			case onPath:
				start := slices.Index(path, pred)
				cycle := append(slices.Clone(path[start:]), pred)
				slices.Reverse(cycle)
				return cycle
			case unvisited:
				if c := visit(pred); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[role] = done
		return nil
	}
	for _, role := range t.Roles {
		if state[role] == unvisited {
			if c := visit(role); c != nil {
				return c
			}
		}
	}
	return nil
}

// Predecessors returns the roles whose pods must reach StartAfter before a
// pod of role may bind.
func (t *Topology) Predecessors(role string) []string {
	return t.predecessors[role]
}

func parseRange(v string) (*Range, error) {
	lo, hi, found := strings.Cut(v, ":")
	minNodes, errMin := strconv.ParseInt(lo, 10, 32)
	maxNodes, errMax := strconv.ParseInt(hi, 10, 32)
	if !found || errMin != nil || errMax != nil || minNodes < 1 || maxNodes < minNodes {
		return nil, fmt.Errorf("must be min:max nodes with 1 <= min <= max, for example 2:4")
	}
	return &Range{Min: int32(minNodes), Max: int32(maxNodes)}, nil
}

// HasReached reports whether a member is in a launch-order state: the
// one rule for the scheduler, which holds a successor until its
// predecessors reach StartAfter, and for whoever shows how far a gang's
// launch has come.
func HasReached(pod *corev1.Pod, state StartAfter) bool {
	switch state {
	case StartAfterScheduled:
		return pod.Spec.NodeName != ""
	case StartAfterRunning:
		return pod.Status.Phase == corev1.PodRunning
	}
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
