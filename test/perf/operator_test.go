//go:build bench

package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/pkg/topology"
)

// launcherAfterAnnotation marks a worker of a job that the simulator runs
// as mpi-operator runs an MPIJob with launcherCreationPolicy
// WaitForWorkersReady: it creates the job's PodGroup when it first sees a
// worker, creates the launcher (launcherTemplatePath) only once as many
// workers as the annotation says are Ready, and deletes the workers once
// the launcher has finished.
const launcherAfterAnnotation = "muster.dev/bench-launcher-after"

// launcherTemplatePath is the pod template of those jobs' launchers.
var launcherTemplatePath = inPerfDir("config/late-launcher.yaml")

// lateJob is one such job as the simulator runs it.
type lateJob struct {
	workers         int32
	members         map[types.UID]types.NamespacedName // its workers
	ready           sets.Set[types.UID]
	launcherCreated bool
	launcherBound   bool
}

// operator is the part of the simulator that plays mpi-operator for the
// workload's profile.
type operator struct {
	profile  string
	groups   schedulingclient.Interface
	launcher *corev1.Pod
}

func newOperator(profile string, groups schedulingclient.Interface) (*operator, error) {
	data, err := os.ReadFile(launcherTemplatePath)
	if err != nil {
		return nil, fmt.Errorf("reading the launcher template: %w", err)
	}
	launcher := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, launcher); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", launcherTemplatePath, err)
	}
	return &operator{profile: profile, groups: groups, launcher: launcher}, nil
}

// launcherAfter returns how many Ready workers the pod's job waits for
// before its launcher is created, if the pod is such a worker.
func launcherAfter(pod *corev1.Pod) (int32, bool) {
	v, ok := pod.Annotations[launcherAfterAnnotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err == nil && n > 0
}

// createPodGroup creates the job's PodGroup as each profile's users have
// their operator make it:
//   - muster: mpi-operator's own, minMember = workers + launcher, with the
//     topology muster-controller derives from the MPIJob, its launcher
//     among the late members;
//   - Coscheduling: minMember = workers, the documented workaround
//     (schedulingPolicy.minAvailable) without which the workers would
//     wait for a launcher that is created only after them;
//   - the default scheduler reads none; it gets the same as Coscheduling,
//     so that the summary reads the job's launch order.
func (o *operator) createPodGroup(ctx context.Context, group types.NamespacedName, workers int32) error {
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: group.Namespace, Name: group.Name, Annotations: map[string]string{
			topology.FrameworkAnnotation: string(topology.MPI),
			topology.RolesAnnotation:     fmt.Sprintf("launcher=1,worker=%d", workers),
		}},
		Spec: v1alpha1.PodGroupSpec{MinMember: workers},
	}
	if o.profile == "muster" {
		late, err := json.Marshal(map[string]topology.LateMember{"launcher": topology.LateMemberOf(&o.launcher.Spec)})
		if err != nil {
			return err
		}
		pg.Annotations[topology.LateMembersAnnotation] = string(late)
		pg.Spec.MinMember = workers + 1
	}
	_, err := o.groups.SchedulingV1alpha1().PodGroups(group.Namespace).Create(ctx, pg, metav1.CreateOptions{})
	return err
}

// launcherPod is the job's launcher, from the template.
func (o *operator) launcherPod(group types.NamespacedName) *corev1.Pod {
	pod := o.launcher.DeepCopy()
	pod.Namespace, pod.Name = group.Namespace, group.Name+"-launcher"
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[topology.GroupLabel] = group.Name
	pod.Labels[topology.RoleLabel] = "launcher"
	pod.Labels[topology.IndexLabel] = "0"
	return pod
}
