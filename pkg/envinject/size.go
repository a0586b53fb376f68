package envinject

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/muster-dev/muster/pkg/topology"
)

// Limits on what muster writes for a group, so that a group too large for
// them is refused at its PodGroup rather than failing in storage later.
const (
	// MaxFilesBytes is what a ConfigMap may hold: the API server refuses
	// a larger one.
	MaxFilesBytes = 1 << 20
	// MaxEnvBytes bounds the variables muster sets on one container. The
	// whole pod must fit in etcd's request limit of 1.5 MiB; this leaves
	// room for four containers that each get the environment, and for the
	// pod's own spec.
	MaxEnvBytes = 256 << 10
)

// CheckSize refuses a group whose files or one member's environment would
// be larger than the limits above. It estimates from the longest address
// first, so that a group of billions of members is refused without
// rendering it.
func CheckSize(g Group) field.ErrorList {
	roles := field.NewPath("metadata", "annotations").Key(topology.RolesAnnotation)
	var members, hostsBytes int64
	for _, role := range g.Topology.Roles {
		n := int64(g.Topology.Replicas[role])
		members += n
		hostsBytes += n * int64(len(g.Address(role, g.Topology.Replicas[role]-1))+1)
	}
	tooLarge := func(what string, size, limit int64) *field.Error {
		return field.Invalid(roles, members, fmt.Sprintf(
			"%d members make %s %d bytes or more, over the limit of %d; run fewer replicas per group", members, what, size, limit))
	}
	// Every member's MUSTER_<ROLE>_HOSTS lists every address, and every
	// file lists them at least once.
	if hostsBytes > MaxEnvBytes {
		return field.ErrorList{tooLarge("each member's environment", hostsBytes, MaxEnvBytes)}
	}
	var errs field.ErrorList
	if files, err := Files(g, allIndices(g.Topology.Replicas["worker"])); err == nil {
		var size int64
		for key, value := range files {
			size += int64(len(key) + len(value))
		}
		if size > MaxFilesBytes {
			errs = append(errs, tooLarge("the group's files (ConfigMap "+g.ConfigMapName()+")", size, MaxFilesBytes))
		}
	}
	for _, role := range g.Topology.Roles {
		// Sized in the default domain: a domain's length changes one
		// variable of an elastic PyTorch member by a few bytes.
		env, err := Env(g, role, g.Topology.Replicas[role]-1, DefaultClusterDomain)
		if err != nil {
			continue
		}
		var size int64
		for _, e := range env {
			size += int64(len(e.Name) + len(e.Value))
		}
		if size > MaxEnvBytes {
			errs = append(errs, tooLarge("the environment of a "+role, size, MaxEnvBytes))
			break
		}
	}
	return errs
}

func allIndices(n int32) []int32 {
	indices := make([]int32, n)
	for i := range indices {
		indices[i] = int32(i)
	}
	return indices
}
