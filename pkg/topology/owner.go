package topology

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// DerivedFromAnnotation marks a PodGroup whose topology muster-controller
// derived from its owner's spec, as Kind/name. Such a group's members are
// the operator's: they keep its hostnames, Service and environment, and
// muster adds nothing to them.
const DerivedFromAnnotation = "muster.dev/derived-from"

// ownerReader reads the topology of one kind of job from its spec.
type ownerReader struct {
	// replicaSpecs is the spec's field of replica specs by replica type.
	replicaSpecs string
	framework    Framework
	// roles lists the replica types in the order the roles are written.
	roles []string
	// order is the launch order of a generic framework ("none" for none);
	// the others have their framework's default.
	order string
	// options reads further annotations from the spec, and the claim
	// templates its late members' pod templates name.
	options func(spec map[string]any, templates ClaimTemplates, annotations map[string]string) error
}

// owners are the kinds muster reads a topology from, by "group/Kind".
// MPIJob is read alike in training-operator's v1 and mpi-operator's
// v2beta1.
var owners = map[string]ownerReader{
	"kubeflow.org/PyTorchJob": {replicaSpecs: "pytorchReplicaSpecs", framework: PyTorch, roles: []string{"Master", "Worker"}, options: pytorchOptions},
	"kubeflow.org/TFJob":      {replicaSpecs: "tfReplicaSpecs", framework: TensorFlow, roles: []string{"Chief", "Master", "PS", "Worker", "Evaluator"}},
	"kubeflow.org/MPIJob":     {replicaSpecs: "mpiReplicaSpecs", framework: MPI, roles: []string{"Launcher", "Worker"}, options: mpiOptions},
	// Paddle's master is its parameter server in PS mode: trainers start
	// after it.
	"kubeflow.org/PaddleJob":  {replicaSpecs: "paddleReplicaSpecs", framework: Generic, roles: []string{"Master", "Worker"}, order: "master>worker"},
	"kubeflow.org/XGBoostJob": {replicaSpecs: "xgbReplicaSpecs", framework: Generic, roles: []string{"Master", "Worker"}, order: "master>worker"},
	"kubeflow.org/JAXJob":     {replicaSpecs: "jaxReplicaSpecs", framework: Generic, roles: []string{"Worker"}, order: "none"},
}

// AwaitsDerivation reports whether a PodGroup has no topology of its own
// yet and a controller owner muster reads one from: muster-controller is
// about to record it. It returns the owner as Kind/name.
func AwaitsDerivation(pg *v1alpha1.PodGroup) (string, bool) {
	if _, ok := pg.Annotations[FrameworkAnnotation]; ok {
		return "", false
	}
	if _, ok := pg.Annotations[RolesAnnotation]; ok {
		return "", false
	}
	owner := metav1.GetControllerOfNoCopy(pg)
	if owner == nil || !IsKnownOwner(owner.APIVersion, owner.Kind) {
		return "", false
	}
	return owner.Kind + "/" + owner.Name, true
}

// AwaitingDerivationMessage says why a member waits while its group's
// topology is read from its owner.
func AwaitingDerivationMessage(group types.NamespacedName, owner string) string {
	return fmt.Sprintf("waiting for muster-controller to read the topology of group %s from %s", group, owner)
}

// IsKnownOwner reports whether muster reads a topology from a controller
// owner of this API version and kind.
func IsKnownOwner(apiVersion, kind string) bool {
	_, ok := owners[groupOf(apiVersion)+"/"+kind]
	return ok || isTrainJob(apiVersion, kind)
}

func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}

// FromOwner returns the topology annotations equivalent to a known
// owner's spec (its unstructured .spec), with DerivedFromAnnotation naming
// the owner. Roles are the replica types in lower case, with their
// replicas (1 when unset, as the operators default them). templates are
// the ResourceClaimTemplates that LateClaimTemplates names, which tell the
// devices of the late members.
func FromOwner(apiVersion, kind, name string, spec map[string]any, templates ClaimTemplates) (map[string]string, error) {
	reader, ok := owners[groupOf(apiVersion)+"/"+kind]
	if !ok {
		return nil, fmt.Errorf("muster reads no topology from %s %s", apiVersion, kind)
	}
	replicaSpecs, _ := spec[reader.replicaSpecs].(map[string]any)
	if len(replicaSpecs) == 0 {
		return nil, fmt.Errorf("%s %s has no spec.%s", kind, name, reader.replicaSpecs)
	}
	var roles []string
	for _, replicaType := range slices.Sorted(maps.Keys(replicaSpecs)) {
		if !slices.Contains(reader.roles, replicaType) {
			return nil, fmt.Errorf("%s %s has replica type %q, which muster does not know for %s", kind, name, replicaType, kind)
		}
	}
	for _, replicaType := range reader.roles {
		replicaSpec, present := replicaSpecs[replicaType].(map[string]any)
		if !present {
			continue
		}
		replicas, err := intField(replicaSpec, "replicas", 1)
		if err != nil {
			return nil, fmt.Errorf("%s %s: spec.%s.%s.%w", kind, name, reader.replicaSpecs, replicaType, err)
		}
		if replicas < 1 {
			continue
		}
		roles = append(roles, fmt.Sprintf("%s=%d", strings.ToLower(replicaType), replicas))
	}
	annotations := map[string]string{
		FrameworkAnnotation:   string(reader.framework),
		RolesAnnotation:       strings.Join(roles, ","),
		DerivedFromAnnotation: kind + "/" + name,
	}
	if reader.order != "" && hasRoles(roles, strings.Split(reader.order, ">")) {
		annotations[LaunchOrderAnnotation] = reader.order
	}
	if reader.options != nil {
		if err := reader.options(spec, templates, annotations); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, name, err)
		}
	}
	if _, errs := Parse(annotations); len(errs) > 0 {
		return nil, fmt.Errorf("%s %s makes no topology muster can serve: %w", kind, name, errs.ToAggregate())
	}
	return annotations, nil
}

// hasRoles reports whether every role of order is one of roles, given as
// role=replicas; "none" needs none.
func hasRoles(roles, order []string) bool {
	for _, want := range order {
		if want != "none" && !slices.ContainsFunc(roles, func(r string) bool { return strings.HasPrefix(r, want+"=") }) {
			return false
		}
	}
	return true
}

// pytorchOptions reads PyTorchJob's elastic range.
func pytorchOptions(spec map[string]any, _ ClaimTemplates, annotations map[string]string) error {
	elastic, ok := spec["elasticPolicy"].(map[string]any)
	if !ok {
		return nil
	}
	lo, errMin := intField(elastic, "minReplicas", 0)
	hi, errMax := intField(elastic, "maxReplicas", 0)
	if errMin != nil || errMax != nil {
		return fmt.Errorf("spec.elasticPolicy: %v %v", errMin, errMax)
	}
	if lo > 0 && hi > 0 {
		annotations[ElasticAnnotation] = fmt.Sprintf("%d:%d", lo, hi)
		// Workers are numbered up to the max, whatever the replicas now:
		// muster may scale them there.
		roles := strings.Split(annotations[RolesAnnotation], ",")
		for i, role := range roles {
			if strings.HasPrefix(role, ElasticRole+"=") {
				roles[i] = fmt.Sprintf("%s=%d", ElasticRole, hi)
			}
		}
		annotations[RolesAnnotation] = strings.Join(roles, ",")
	}
	return nil
}

// mpiOptions reads an MPIJob's slots per worker and, in v2beta1, its MPI
// implementation and a launcher created only once the workers are Ready.
func mpiOptions(spec map[string]any, templates ClaimTemplates, annotations map[string]string) error {
	launcher, late, err := mpiLateLauncher(spec)
	if err != nil {
		return err
	}
	if late {
		member := LateMemberOf(launcher)
		if member.Devices, err = LateDevicesOf(launcher, templates); err != nil {
			return fmt.Errorf("spec.mpiReplicaSpecs.Launcher.template: %w", err)
		}
		data, err := json.Marshal(map[string]LateMember{"launcher": member})
		if err != nil {
			return err
		}
		annotations[LateMembersAnnotation] = string(data)
	}
	slots, err := intField(spec, "slotsPerWorker", 0)
	if err != nil {
		return err
	}
	if slots > 0 {
		annotations[SlotsAnnotation] = strconv.FormatInt(slots, 10)
	}
	if implementation, ok := spec["mpiImplementation"].(string); ok && implementation != "" {
		annotations[MPIImplementationAnnotation] = strings.ToLower(implementation)
	}
	return nil
}

// mpiLateLauncher returns an MPIJob's launcher pod template when the
// operator creates the launcher only once the workers are Ready.
func mpiLateLauncher(spec map[string]any) (*corev1.PodSpec, bool, error) {
	if policy, _ := spec["launcherCreationPolicy"].(string); policy != "WaitForWorkersReady" {
		return nil, false, nil
	}
	template, _, _ := unstructured.NestedMap(spec, "mpiReplicaSpecs", "Launcher", "template", "spec")
	launcher := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(template, launcher); err != nil {
		return nil, false, fmt.Errorf("spec.mpiReplicaSpecs.Launcher.template: %w", err)
	}
	return launcher, true, nil
}

// LateClaimTemplates names the ResourceClaimTemplates that the pod
// templates of a known owner's late members name: FromOwner reads them.
func LateClaimTemplates(apiVersion, kind string, spec map[string]any) ([]string, error) {
	if groupOf(apiVersion)+"/"+kind != "kubeflow.org/MPIJob" {
		return nil, nil
	}
	launcher, late, err := mpiLateLauncher(spec)
	if err != nil || !late {
		return nil, err
	}
	return ClaimTemplateNames(launcher), nil
}

// intField reads a whole number of an unstructured object, or def when it
// is absent.
func intField(obj map[string]any, field string, def int64) (int64, error) {
	switch v := obj[field].(type) {
	case nil:
		return def, nil
	case int64:
		return v, nil
	case float64:
		return int64(v), nil
	}
	return 0, fmt.Errorf("%s is %v, not a whole number", field, obj[field])
}

// RoleReplicasPath is the field of a known operator's job that holds how
// many pods of a role it runs, such as spec.mpiReplicaSpecs.Worker.replicas:
// an elastic group whose owner has no scale subresource is scaled there.
func RoleReplicasPath(apiVersion, kind, role string) ([]string, bool) {
	reader, ok := owners[groupOf(apiVersion)+"/"+kind]
	if !ok {
		return nil, false
	}
	for _, replicaType := range reader.roles {
		if strings.ToLower(replicaType) == role {
			return []string{"spec", reader.replicaSpecs, replicaType, "replicas"}, true
		}
	}
	return nil, false
}
