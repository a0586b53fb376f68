package gangpreemption

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"
)

// Args configure the GangPreemption plugin through pluginConfig in the
// scheduler's configuration. The candidate-node fields are
// DefaultPreemption's, with its defaults and its validation:
//
//	pluginConfig:
//	- name: GangPreemption
//	  args:
//	    minCandidateNodesPercentage: 10
//	    minCandidateNodesAbsolute: 100
//	    victimWaitSeconds: 120
//	    maxConcurrentEvictions: 100
type Args struct {
	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute say how many
	// nodes a dry run tries before it picks the best of those that work,
	// as DefaultPreemption's args do.
	MinCandidateNodesPercentage *int32 `json:"minCandidateNodesPercentage,omitempty"`
	MinCandidateNodesAbsolute   *int32 `json:"minCandidateNodesAbsolute,omitempty"`
	// VictimWaitSeconds bounds how long a gang waits for the victims
	// preempted for it: one that never goes (a node gone, a finalizer)
	// must not hold the gang back for good. The gang may then preempt
	// again.
	VictimWaitSeconds int64 `json:"victimWaitSeconds,omitempty"`
	// MaxConcurrentEvictions is how many of a gang's victims are being
	// preempted (a status patch, then a deletion) at once. kube-scheduler
	// sends one pod's victims with the profile's parallelism (16), and
	// the pods of no gang preempt side by side; a gang's members are
	// admitted only once all their victims are gone, so sixteen at a time
	// would make a gang of 50 taking 150 wait for ten rounds of calls, and
	// a thousand at once would flood the API server's watchers.
	MaxConcurrentEvictions int32 `json:"maxConcurrentEvictions,omitempty"`
}

const (
	// kube-scheduler's defaults for DefaultPreemption.
	defaultMinCandidateNodesPercentage = 10
	defaultMinCandidateNodesAbsolute   = 100
	defaultVictimWaitSeconds           = 120
	maxVictimWaitSeconds               = 60 * 60
	defaultMaxConcurrentEvictions      = 100
	// kube-apiserver's streams on one connection, as Gang's
	// maxConcurrentBinds.
	maxMaxConcurrentEvictions = 1000
)

// decodeArgs reads the plugin's args, fills in defaults and validates them.
func decodeArgs(obj runtime.Object) (Args, error) {
	var args Args
	if obj != nil {
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return Args{}, fmt.Errorf("decoding the args of plugin %s: %w", Name, err)
		}
	}
	if args.MinCandidateNodesPercentage == nil {
		args.MinCandidateNodesPercentage = ptr.To[int32](defaultMinCandidateNodesPercentage)
	}
	if args.MinCandidateNodesAbsolute == nil {
		args.MinCandidateNodesAbsolute = ptr.To[int32](defaultMinCandidateNodesAbsolute)
	}
	if args.VictimWaitSeconds == 0 {
		args.VictimWaitSeconds = defaultVictimWaitSeconds
	}
	if args.MaxConcurrentEvictions == 0 {
		args.MaxConcurrentEvictions = defaultMaxConcurrentEvictions
	}
	if errs := args.validate(); len(errs) > 0 {
		return Args{}, fmt.Errorf("invalid args of plugin %s: %w", Name, errs.ToAggregate())
	}
	return args, nil
}

// validate checks the candidate-node fields with DefaultPreemption's own
// validation, the victim wait and the evictions at once.
func (a Args) validate() field.ErrorList {
	path := field.NewPath("pluginConfig").Key(Name).Child("args")
	var errs field.ErrorList
	upstream := &config.DefaultPreemptionArgs{
		MinCandidateNodesPercentage: *a.MinCandidateNodesPercentage,
		MinCandidateNodesAbsolute:   *a.MinCandidateNodesAbsolute,
	}
	if err := validation.ValidateDefaultPreemptionArgs(path, upstream); err != nil {
		errs = append(errs, field.Invalid(path, fmt.Sprintf("%d%%, %d", upstream.MinCandidateNodesPercentage, upstream.MinCandidateNodesAbsolute), err.Error()))
	}
	if a.VictimWaitSeconds < 1 || a.VictimWaitSeconds > maxVictimWaitSeconds {
		errs = append(errs, field.Invalid(path.Child("victimWaitSeconds"), a.VictimWaitSeconds,
			fmt.Sprintf("must be between 1 and %d", maxVictimWaitSeconds)))
	}
	if a.MaxConcurrentEvictions < 1 || a.MaxConcurrentEvictions > maxMaxConcurrentEvictions {
		errs = append(errs, field.Invalid(path.Child("maxConcurrentEvictions"), a.MaxConcurrentEvictions,
			fmt.Sprintf("must be between 1 and %d: kube-apiserver lets one connection carry %d streams", maxMaxConcurrentEvictions, maxMaxConcurrentEvictions)))
	}
	return errs
}

func (a Args) victimWait() time.Duration { return time.Duration(a.VictimWaitSeconds) * time.Second }

// numCandidates is how many of nodes a dry run tries: the percentage, at
// least the absolute number, at most every node.
func (a Args) numCandidates(nodes int32) int32 {
	n := max(nodes*(*a.MinCandidateNodesPercentage)/100, *a.MinCandidateNodesAbsolute)
	return min(n, nodes)
}
