package gang

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/muster-dev/muster/pkg/plugins/internal/group"
)

// Args configure the Gang plugin through pluginConfig in the scheduler's
// configuration:
//
//	pluginConfig:
//	- name: Gang
//	  args:
//	    permitTimeoutSeconds: 60
//	    backoffSeconds: 5
//	    maxConcurrentBinds: 100
type Args struct {
	// PermitTimeoutSeconds is how long reserved members wait at Permit for
	// the rest of their gang before the attempt is given up, how long room
	// is held for late members, and how long a partly bound gang may take
	// to complete. A PodGroup's spec.scheduleTimeoutSeconds overrides it
	// for that group. It is one value per scheduler (Model.ScheduleTimeout):
	// where several profiles set it differently, the last one built wins.
	PermitTimeoutSeconds int64 `json:"permitTimeoutSeconds,omitempty"`
	// BackoffSeconds is how long a gang waits after a failed attempt
	// before it is tried again, so that one gang that cannot fit does not
	// keep the others from the nodes. 0 turns the backoff off.
	BackoffSeconds *int64 `json:"backoffSeconds,omitempty"`
	// MaxConcurrentBinds is how many members allowed together at Permit
	// make their Bind call at once (bindslots.go). It is per profile.
	MaxConcurrentBinds int32 `json:"maxConcurrentBinds,omitempty"`
}

const (
	defaultPermitTimeoutSeconds = 60
	defaultBackoffSeconds       = 5
	maxBackoffSeconds           = 10 * 60
	defaultMaxConcurrentBinds   = 100
	// kube-apiserver lets a client's HTTP/2 connection carry 1,000 streams
	// (--http2-max-streams-per-connection), its watches among them.
	maxMaxConcurrentBinds = 1000
)

// decodeArgs reads the plugin's args, fills in defaults and validates them.
func decodeArgs(obj runtime.Object) (Args, error) {
	var args Args
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return Args{}, fmt.Errorf("decoding the args of plugin %s: %w", Name, err)
	}
	if args.PermitTimeoutSeconds == 0 {
		args.PermitTimeoutSeconds = defaultPermitTimeoutSeconds
	}
	if args.BackoffSeconds == nil {
		backoff := int64(defaultBackoffSeconds)
		args.BackoffSeconds = &backoff
	}
	if args.MaxConcurrentBinds == 0 {
		args.MaxConcurrentBinds = defaultMaxConcurrentBinds
	}
	if errs := args.validate(); len(errs) > 0 {
		return Args{}, fmt.Errorf("invalid args of plugin %s: %w", Name, errs.ToAggregate())
	}
	return args, nil
}

func (a Args) validate() field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("pluginConfig").Key(Name).Child("args")
	if maxSeconds := int64(group.MaxPermitWait / time.Second); a.PermitTimeoutSeconds < 1 || a.PermitTimeoutSeconds > maxSeconds {
		errs = append(errs, field.Invalid(path.Child("permitTimeoutSeconds"), a.PermitTimeoutSeconds,
			fmt.Sprintf("must be between 1 and %d: the framework caps a Permit wait at %s", maxSeconds, group.MaxPermitWait)))
	}
	if *a.BackoffSeconds < 0 || *a.BackoffSeconds > maxBackoffSeconds {
		errs = append(errs, field.Invalid(path.Child("backoffSeconds"), *a.BackoffSeconds,
			fmt.Sprintf("must be between 0 (no backoff) and %d", maxBackoffSeconds)))
	}
	if a.MaxConcurrentBinds < 1 || a.MaxConcurrentBinds > maxMaxConcurrentBinds {
		errs = append(errs, field.Invalid(path.Child("maxConcurrentBinds"), a.MaxConcurrentBinds,
			fmt.Sprintf("must be between 1 and %d: kube-apiserver lets one connection carry %d streams, and past them the client dials a connection for each call that waits", maxMaxConcurrentBinds, maxMaxConcurrentBinds)))
	}
	return errs
}

func (a Args) permitTimeout() time.Duration {
	return time.Duration(a.PermitTimeoutSeconds) * time.Second
}
func (a Args) backoff() time.Duration { return time.Duration(*a.BackoffSeconds) * time.Second }
