// Package cli tests `kubectl muster`, the binary `make build` writes, as a
// user runs it against a real control plane: one test per phase a gang
// passes, each reading the plugin's own output.
package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, func(opts *localcluster.Options) { opts.WorkloadAPI = true })
}

// muster runs kubectl-muster against the package's cluster and returns
// what it printed, or fails the test with what it said on stderr.
func muster(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tryMuster(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryMuster(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(framework.BinDir(), "kubectl-muster"), append([]string{"--kubeconfig", framework.Cluster().Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl muster %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// rows reads a table as `kubectl get` prints it: each column starts where
// its header does, and every cell of a row starts at its column.
func rows(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	var starts []int
	var names []string
	for i := 0; i < len(header); i++ {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
			end := strings.IndexByte(header[i:], ' ')
			if end < 0 {
				end = len(header) - i
			}
			names = append(names, header[i:i+end])
		}
	}
	var table []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for c, start := range starts {
			if start > 0 && (start > len(line) || line[start-1] != ' ') {
				t.Fatalf("column %s is not aligned in %q:\n%s", names[c], line, out)
			}
			end := len(line)
			if c+1 < len(starts) && starts[c+1] < end {
				end = starts[c+1]
			}
			if start < len(line) {
				row[names[c]] = strings.TrimSpace(line[start:end])
			}
		}
		table = append(table, row)
	}
	return table
}

// waitForGang waits until `kubectl muster gangs -o wide` shows the gang
// in phase, and returns its row.
func waitForGang(t *testing.T, namespace, name string, phase gangview.Phase) map[string]string {
	t.Helper()
	return waitForRow(t, namespace, name, phase, nil)
}

// waitForRow waits until the gang's row shows phase and every column as
// wanted (checkRow's rules): what muster says of a gang comes a moment
// after its phase, as the scheduler's first attempt or Kueue's first
// word does.
func waitForRow(t *testing.T, namespace, name string, phase gangview.Phase, want map[string]string) map[string]string {
	t.Helper()
	return framework.Eventually(t, fmt.Sprintf("gang %s in phase %s, showing %v", name, phase, want), func(context.Context) (map[string]string, error) {
		out, err := tryMuster("gangs", "-n", namespace, "-o", "wide")
		if err != nil {
			return nil, err
		}
		for _, row := range rows(t, out) {
			if row["NAME"] != name {
				continue
			}
			if row["PHASE"] != string(phase) {
				return nil, fmt.Errorf("phase %s, waiting for %q", row["PHASE"], row["WAITING-FOR"])
			}
			if wrong := mismatches(row, want); len(wrong) > 0 {
				return nil, errors.New(strings.Join(wrong, "; "))
			}
			return row, nil
		}
		return nil, fmt.Errorf("no row for %s in:\n%s", name, out)
	})
}

// checkRow fails the test for each column of the row that is not as
// wanted (mismatches).
func checkRow(t *testing.T, row map[string]string, want map[string]string) {
	t.Helper()
	for _, wrong := range mismatches(row, want) {
		t.Error(wrong)
	}
}

// mismatches says which columns of the row are not as wanted: a wanted
// value that starts with "~" need only be contained.
func mismatches(row map[string]string, want map[string]string) []string {
	var wrong []string
	for column, value := range want {
		got := row[column]
		if contains, ok := strings.CutPrefix(value, "~"); ok {
			if !strings.Contains(got, contains) {
				wrong = append(wrong, fmt.Sprintf("%s is %q, want it to contain %q", column, got, contains))
			}
		} else if got != value {
			wrong = append(wrong, fmt.Sprintf("%s is %q, want %q", column, got, value))
		}
	}
	return wrong
}

// checkWhy fails the test unless `kubectl muster why` answers for the pod
// with the trouble.
func checkWhy(t *testing.T, namespace, pod string, want gangview.Trouble) {
	t.Helper()
	var answer gangview.Answer
	if err := json.Unmarshal([]byte(muster(t, "why", pod, "-n", namespace, "-o", "json")), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Trouble != want {
		t.Errorf("why %s: %q (muster says %q), want %q", pod, answer.Trouble.Shows, answer.Said, want.Shows)
	}
	out := muster(t, "why", pod, "-n", namespace)
	if !strings.Contains(out, "Fix:") || !strings.Contains(out, want.Fix) {
		t.Errorf("why %s prints no fix %q:\n%s", pod, want.Fix, out)
	}
}

func member(namespace, group string, index int, cpu string) *corev1.Pod {
	return framework.InPool(framework.MemberPod(namespace, group, index, cpu).Obj(), namespace)
}

func roleMember(namespace, group, role string, index int, cpu string) *corev1.Pod {
	return framework.InPool(framework.MemberPod(namespace, group, index, cpu).Name(fmt.Sprintf("%s-%s-%d", group, role, index)).
		Label(topology.RoleLabel, role).Label(topology.IndexLabel, fmt.Sprint(index)).Obj(), namespace)
}

// TestAGangShortOfMembersWaitsForMembers: a PodGroup of 3 with 2 pods.
func TestAGangShortOfMembersWaitsForMembers(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	framework.CreatePodGroup(t, ns, "short", 3, nil)
	framework.CreatePods(t, member(ns, "short", 0, "1"), member(ns, "short", 1, "1"))
	waitForRow(t, ns, "short", gangview.WaitingForMembers, map[string]string{"SOURCE": "scheduling.x-k8s.io", "MEMBERS": "0/3", "WAITING-FOR": fmt.Sprintf("waiting for 1 more pods of group %s/short (2/3)", ns)})
	checkWhy(t, ns, "short-0", gangview.TroubleFewMembers)

	out := muster(t, "gangs", "-n", ns, "--no-headers")
	if strings.HasPrefix(out, "NAME") || !strings.HasPrefix(out, "short ") {
		t.Errorf("--no-headers printed %q", out)
	}
	if strings.Contains(out, "\033[") {
		t.Errorf("colour written to a pipe: %q", out)
	}
}

// TestAGangKueueHasNotAdmittedIsQueuedInKueue: a Job of three 1-CPU pods
// in a queue of 1 CPU stays suspended, with no pod.
func TestAGangKueueHasNotAdmittedIsQueuedInKueue(t *testing.T) {
	ns := framework.QueuedNamespace(t, 1, "4", "1")
	framework.CreatePodGroup(t, ns, "queued", 3, nil)
	framework.CreateObject(t, ns, fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata: {name: queued, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  parallelism: 3
  completions: 3
  template:
    metadata: {labels: {%s: queued}}
    spec:
      schedulerName: %s
      restartPolicy: Never
      nodeSelector: %s
      tolerations: %s
      containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}]
`, topology.GroupLabel, localcluster.SchedulerName, inline(framework.InPool(&corev1.Pod{}, ns).Spec.NodeSelector), inline(framework.InPool(&corev1.Pod{}, ns).Spec.Tolerations)))
	waitForRow(t, ns, "queued", gangview.QueuedInKueue, map[string]string{"MEMBERS": "0/3", "WAITING-FOR": "~Kueue, queue lq: couldn't assign flavors"})
	if out := muster(t, "describe", "gang", "queued", "-n", ns); !strings.Contains(out, "queue lq, admitted: no") {
		t.Errorf("describe does not show the Workload waiting:\n%s", out)
	}
}

// inline writes v as JSON, which YAML reads in flow style.
func inline(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// TestAGangWithNoRoomWaitsForRoomAndSaysWhy: two 2-CPU members on one
// node of 2 CPUs.
func TestAGangWithNoRoomWaitsForRoomAndSaysWhy(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	framework.CreatePodGroup(t, ns, "big", 2, nil)
	framework.CreatePods(t, member(ns, "big", 0, "2"), member(ns, "big", 1, "2"))
	framework.WaitForEvent(t, ns, "big", gangview.ReasonGangRejected)
	waitForRow(t, ns, "big", gangview.WaitingForRoom, map[string]string{"MEMBERS": "0/2", "WAITING-FOR": "~fits on no node"})
	checkWhy(t, ns, "big-0", gangview.TroubleNoRoom)
	out := muster(t, "describe", "gang", "big", "-n", ns)
	for _, want := range []string{"Phase:", "WaitingForRoom", "Attempts:", gangview.ReasonGangRejected, "big-0", "big-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe gang big does not show %q:\n%s", want, out)
		}
	}
}

// TestALauncherHeldForItsWorkersIsLaunching: an MPI gang whose workers
// never turn Ready: both are bound, the launcher is held.
func TestALauncherHeldForItsWorkersIsLaunching(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	framework.CreatePodGroup(t, ns, "mpi", 3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"})
	for i := range 2 {
		worker := roleMember(ns, "mpi", "worker", i, "1")
		worker.Annotations = map[string]string{localcluster.SimReadyAfterAnnotation: "1h"}
		framework.CreatePods(t, worker)
	}
	framework.CreatePods(t, roleMember(ns, "mpi", "launcher", 0, "1"))
	waitForRow(t, ns, "mpi", gangview.Launching, map[string]string{"MEMBERS": "2/3", "LAUNCH": "worker 0/2 Ready, launcher held", "WAITING-FOR": "mpi-launcher-0 held until worker is Ready (0/2)"})
	checkWhy(t, ns, "mpi-launcher-0", gangview.TroubleLaunchHeld)
	var g gangview.Gang
	if err := json.Unmarshal([]byte(muster(t, "describe", "gang", "mpi", "-n", ns, "-o", "json")), &g); err != nil {
		t.Fatal(err)
	}
	for _, m := range g.Members {
		if want := map[string]string{"launcher": gangview.StateHeld, "worker": string(corev1.PodRunning)}[m.Role]; m.State != want {
			t.Errorf("member %s is %s, want %s", m.Name, m.State, want)
		}
	}
}

// TestAGangBoundBeforeItsContainersStartIsAdmitted: both members bound,
// their containers not started yet.
func TestAGangBoundBeforeItsContainersStartIsAdmitted(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	framework.CreatePodGroup(t, ns, "slow", 2, nil)
	for i := range 2 {
		pod := member(ns, "slow", i, "1")
		pod.Annotations = map[string]string{localcluster.SimStartAfterAnnotation: "1h"}
		framework.CreatePods(t, pod)
	}
	row := waitForGang(t, ns, "slow", gangview.Admitted)
	checkRow(t, row, map[string]string{"MEMBERS": "2/2", "WAITING-FOR": "0 of 2 members running"})
	checkWhy(t, ns, "slow-0", gangview.TroubleNone)
}

// TestARunningGangIsRunningAndAFinishedOneFinished: a gang of two runs,
// then succeeds.
func TestARunningGangIsRunningAndAFinishedOneFinished(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	framework.CreatePodGroup(t, ns, "train", 2, nil)
	for i := range 2 {
		pod := member(ns, "train", i, "1")
		pod.Annotations = map[string]string{localcluster.SimRunForAnnotation: "3s"}
		framework.CreatePods(t, pod)
	}
	row := waitForGang(t, ns, "train", gangview.Running)
	checkRow(t, row, map[string]string{"MEMBERS": "2/2", "WAITING-FOR": "-"})
	waitForGang(t, ns, "train", gangview.Finished)
}

// TestAGangLeftPartlyBoundIsShownSoThenEvicted: one member of a gang of 3
// is bound by its own spec.nodeName; the two others fit nowhere. Past its
// schedule timeout the gang's bound member is evicted.
func TestAGangLeftPartlyBoundIsShownSoThenEvicted(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "2")
	framework.CreatePodGroup(t, ns, "stuck", 3, nil)
	timeout := []byte(`{"spec":{"scheduleTimeoutSeconds":5}}`)
	if _, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Patch(context.Background(), "stuck", types.MergePatchType, timeout, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := member(ns, "stuck", 0, "1")
	bound.Spec.NodeName = ns + "-0"
	framework.CreatePods(t, bound, member(ns, "stuck", 1, "2"), member(ns, "stuck", 2, "2"))
	row := waitForGang(t, ns, "stuck", gangview.PartlyBound)
	checkRow(t, row, map[string]string{"MEMBERS": "1/3", "WAITING-FOR": "~1 of 3 bound; "})
	framework.WaitForEvent(t, ns, "stuck", gangview.ReasonGangEvicted)
	out := muster(t, "describe", "gang", "stuck", "-n", ns)
	if !strings.Contains(out, gangview.ReasonGangEvicted) {
		t.Errorf("describe gang stuck does not show its eviction:\n%s", out)
	}
}

// TestAGangPreemptedWholeSaysByWhom: a low-priority gang of two 2-CPU
// members, made by an Indexed Job, fills a node of 4 CPUs; a
// high-priority gang takes it whole. The Job makes its members again, and
// they wait for room, saying by whom they were preempted.
func TestAGangPreemptedWholeSaysByWhom(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	low, high := framework.PriorityClass(t, ns, 10), framework.PriorityClass(t, ns, 1000)
	framework.CreatePodGroup(t, ns, "low", 2, nil)
	framework.CreateObject(t, ns, fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata: {name: low}
spec:
  parallelism: 2
  completions: 2
  backoffLimit: 10
  template:
    metadata: {labels: {%s: low}}
    spec:
      schedulerName: %s
      priorityClassName: %s
      restartPolicy: Never
      nodeSelector: %s
      tolerations: %s
      containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "2"}}}]
`, topology.GroupLabel, localcluster.SchedulerName, low, inline(framework.InPool(&corev1.Pod{}, ns).Spec.NodeSelector), inline(framework.InPool(&corev1.Pod{}, ns).Spec.Tolerations)))
	waitForGang(t, ns, "low", gangview.Running)

	framework.CreatePodGroup(t, ns, "high", 2, nil)
	for i := range 2 {
		pod := member(ns, "high", i, "2")
		pod.Spec.PriorityClassName = high
		framework.CreatePods(t, pod)
	}
	waitForGang(t, ns, "high", gangview.Running)
	waitForRow(t, ns, "low", gangview.WaitingForRoom, map[string]string{"WAITING-FOR": fmt.Sprintf("~all 2 members preempted by gang %s/high (priority 1000)", ns)})
	if t.Failed() {
		t.Log(muster(t, "describe", "gang", "low", "-n", ns))
		out, _ := exec.Command(filepath.Join(framework.BinDir(), "kubectl"), "--kubeconfig", framework.Cluster().Kubeconfig, "get", "events.events.k8s.io", "-n", ns, "-o", "custom-columns=R:.regarding.kind,N:.regarding.name,REASON:.reason,T:.eventTime,S:.series").CombinedOutput()
		t.Log(string(out))
	}
	var g gangview.Gang
	if err := json.Unmarshal([]byte(muster(t, "describe", "gang", "high", "-n", ns, "-o", "json")), &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Preemptions) == 0 || g.Preemptions[0].Reason != gangview.ReasonPreempting {
		t.Errorf("gang high shows preemptions %+v, want the one it took", g.Preemptions)
	}
	pending := framework.Eventually(t, "a member of low made again", func(ctx context.Context) (string, error) {
		pods, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: topology.GroupLabel + "=low"})
		if err != nil {
			return "", err
		}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp == nil && pod.Spec.NodeName == "" {
				return pod.Name, nil
			}
		}
		return "", fmt.Errorf("none pending among %d", len(pods.Items))
	})
	checkWhy(t, ns, pending, gangview.TroublePreempted)
}

// TestAGangNoRackHoldsSaysWhichComesClosest: a gang of 3 two-CPU members
// that must share a rack, where each rack has room for 2.
func TestAGangNoRackHoldsSaysWhichComesClosest(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.RackPool(t, ns, map[string]int{"rack-a": 1, "rack-b": 1}, "4")
	framework.CreatePodGroup(t, ns, "racked", 3, map[string]string{topology.DomainRequiredAnnotation: framework.RackLabel})
	framework.CreatePods(t, member(ns, "racked", 0, "2"), member(ns, "racked", 1, "2"), member(ns, "racked", 2, "2"))
	waitForRow(t, ns, "racked", gangview.WaitingForRoom, map[string]string{"MEMBERS": "0/3", "WAITING-FOR": "~no " + framework.RackLabel + " domain has room for the 3 members"})
	checkWhy(t, ns, "racked-0", gangview.TroubleNoDomain)
}

// TestAGangShortOfDevicesSaysWhichClass: two members each claiming a
// device, on a node that publishes one.
func TestAGangShortOfDevicesSaysWhichClass(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.DevicePool(t, ns, 1, "4", 1)
	framework.CreateDeviceClaimTemplate(t, ns)
	framework.CreatePodGroup(t, ns, "gpus", 2, nil)
	framework.CreatePods(t, framework.ClaimOneDevice(member(ns, "gpus", 0, "1")), framework.ClaimOneDevice(member(ns, "gpus", 1, "1")))
	waitForRow(t, ns, "gpus", gangview.WaitingForRoom, map[string]string{"WAITING-FOR": "~devices of class"})
	checkWhy(t, ns, "gpus-0", gangview.TroubleDevices)
}

// TestAnAdmittedGangShowsTheRoomHeldForItsLateLauncher: an MPI gang whose
// launcher its owner creates later: its workers are bound, and the room
// held for the launcher is published on the PodGroup and shown.
func TestAnAdmittedGangShowsTheRoomHeldForItsLateLauncher(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	launcher := framework.InPool(&corev1.Pod{}, ns)
	late, err := json.Marshal(map[string]topology.LateMember{"launcher": {
		Requests:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		NodeSelector: launcher.Spec.NodeSelector,
		Tolerations:  launcher.Spec.Tolerations,
	}})
	if err != nil {
		t.Fatal(err)
	}
	framework.CreatePodGroup(t, ns, "late", 3, map[string]string{
		topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2", topology.LateMembersAnnotation: string(late),
	})
	framework.CreatePods(t, roleMember(ns, "late", "worker", 0, "1"), roleMember(ns, "late", "worker", 1, "1"))
	waitForRow(t, ns, "late", gangview.Launching, map[string]string{"MEMBERS": "2/3", "HELD-ROOMS": "1 (launcher)", "LAUNCH": "worker 2/2 Ready, launcher not created", "WAITING-FOR": "~1 launcher not created yet by its owner; room held on " + ns + "-0"})
	out := muster(t, "describe", "gang", "late", "-n", ns)
	if !strings.Contains(out, "Held rooms:") || !strings.Contains(out, "launcher   "+ns+"-0") {
		t.Errorf("describe gang late does not show the room held on %s-0:\n%s", ns, out)
	}
}

// TestAnUpstreamGangsRecordIsPublishedOnItsPodGroup: muster-scheduler
// writes what it alone knows of a gang on a scheduling.k8s.io PodGroup
// too, as its RBAC allows.
func TestAnUpstreamGangsRecordIsPublishedOnItsPodGroup(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	framework.CreateObject(t, ns, `
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: up}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
`)
	for i := range 2 {
		pod := member(ns, "up", i, "1")
		delete(pod.Labels, topology.GroupLabel)
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptrTo("up")}
		framework.CreatePods(t, pod)
	}
	row := waitForGang(t, ns, "up", gangview.Running)
	checkRow(t, row, map[string]string{"SOURCE": "scheduling.k8s.io", "MEMBERS": "2/2"})
	framework.Eventually(t, "the record on PodGroup up", func(ctx context.Context) (gangview.Published, error) {
		pg, err := framework.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "up", metav1.GetOptions{})
		if err != nil {
			return gangview.Published{}, err
		}
		p := gangview.ReadPublished(topology.FromUpstream(pg))
		if p.LastAttempt == nil || !p.LastAttempt.Admitted {
			return p, fmt.Errorf("record %q", pg.Annotations[gangview.PublishedAnnotation])
		}
		return p, nil
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestWatchPrintsAGangAgainAsItChanges: `gangs -A --watch` prints the
// table, then a row again, with no header, each time the gang changes,
// until it is stopped: here from waiting for members to running.
func TestWatchPrintsAGangAgainAsItChanges(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 1, "4")
	framework.CreatePodGroup(t, ns, "watched", 2, nil)
	framework.CreatePods(t, member(ns, "watched", 0, "1"))
	waitForGang(t, ns, "watched", gangview.WaitingForMembers)

	cmd := exec.Command(filepath.Join(framework.BinDir(), "kubectl-muster"), "--kubeconfig", framework.Cluster().Kubeconfig, "gangs", "-A", "--watch")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	// next returns the next line that is about the gang, or the header.
	next := func(want string) string {
		t.Helper()
		timeout := time.After(framework.Timeout)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the watch ended before printing %q", want)
				}
				if strings.HasPrefix(line, "NAMESPACE") || strings.HasPrefix(line, ns+" ") && strings.Contains(line, " watched ") {
					if strings.Contains(line, want) {
						return line
					}
				}
			case <-timeout:
				t.Fatalf("the watch printed no line with %q within %s", want, framework.Timeout)
			}
		}
	}
	header := next("NAMESPACE")
	if !strings.Contains(header, "WAITING-FOR") {
		t.Errorf("header %q", header)
	}
	next(string(gangview.WaitingForMembers))
	framework.CreatePods(t, member(ns, "watched", 1, "1"))
	row := next(string(gangview.Running))
	if !strings.Contains(row, "2/2") {
		t.Errorf("the running row is %q, want 2/2 bound", row)
	}
}
