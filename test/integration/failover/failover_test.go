// Package failover tests muster-controller run as manifests/ runs it, two
// replicas that elect a leader for the reconcilers and both serve the
// webhooks, here behind a front that stands in for their Service
// (localcluster.Front): the leader crashes (SIGKILL), then the new leader
// is restarted (SIGTERM, as a rollout would). It measures, and logs, how
// long the reconcilers had no leader and whether any grouped pod could not
// be created meanwhile.
package failover

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/localcluster"
	"github.com/muster-dev/muster/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.RunMain(m, func(opts *localcluster.Options) { opts.ControllerReplicas = 2 })
}

// createEvery is how often grouped pods are created while a replica goes.
const createEvery = 50 * time.Millisecond

func TestTheReconcilersGetANewLeaderWhenTheLeaderGoes(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.CreatePodGroup(t, ns, "g", 1, nil)
	replicas := []string{localcluster.ControllerReplica(0), localcluster.ControllerReplica(1)}

	for _, how := range []struct {
		name string
		stop func(program string) error
	}{
		{"crashes (SIGKILL)", framework.Cluster().Kill},
		{"is restarted (SIGTERM, then started again)", func(program string) error {
			return framework.Cluster().Restart(context.Background(), program)
		}},
	} {
		leader := waitForLeader(t, replicas)
		standby := replicas[0]
		if leader == standby {
			standby = replicas[1]
		}
		holder := leaseHolder(t)
		creator := startCreating(t, ns, how.name)
		time.Sleep(time.Second) // creations before, as a baseline
		stopped := time.Now()
		stopErr := make(chan error, 1)
		go func() { stopErr <- how.stop(leader) }()
		took := waitForNewHolder(t, holder, stopped)
		if err := <-stopErr; err != nil {
			t.Fatalf("stopping the leader %s: %v", leader, err)
		}
		// The PodGroup the new leader reconciles first: its phase.
		after := fmt.Sprintf("after-%d", time.Now().UnixNano())
		framework.CreatePodGroup(t, ns, after, 1, nil)
		framework.Eventually(t, "the new leader reconciling a PodGroup created after the failover", func(ctx context.Context) (bool, error) {
			pg, err := framework.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, after, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pg.Status.Phase == "" {
				return false, fmt.Errorf("PodGroup %s has no phase yet", after)
			}
			return true, nil
		})
		time.Sleep(time.Second) // creations after, as a baseline
		tally := creator.stop()
		t.Logf("the leader %s: reconcilers without a leader for %s; grouped pods created: %d, refused: %d%s",
			how.name, took.Round(10*time.Millisecond), tally.created, len(tally.refused), tally.refusedWindow())
		if tally.createdBetween(stopped, stopped.Add(took)) == 0 && took > 4*createEvery {
			t.Errorf("no grouped pod was created while %s was stopped and no replica led: the standby %s must serve the webhooks too", leader, standby)
		}
		if !tally.createdSince(stopped.Add(took)) {
			t.Errorf("no grouped pod was created once the lease had a new holder")
		}
		// Back to two replicas, the stopped one the standby now.
		if err := framework.Cluster().Restart(context.Background(), leader); err != nil {
			t.Fatalf("starting %s again: %v", leader, err)
		}
	}
}

// creator creates grouped pods until stopped, recording each outcome.
type creator struct {
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	tally tally
}

type tally struct {
	created   int
	createdAt []time.Time
	refused   []refusal
}

type refusal struct {
	at  time.Time
	err error
}

// maxCreations bounds the load loop.
const maxCreations = 2000

func startCreating(t *testing.T, ns, phase string) *creator {
	c := &creator{done: make(chan struct{})}
	prefix := strings.NewReplacer(" ", "-", "(", "", ")", "", ",", "").Replace(strings.ToLower(phase))
	c.wg.Go(func() {
		ticker := time.NewTicker(createEvery)
		defer ticker.Stop()
		for i := 0; i < maxCreations; i++ {
			select {
			case <-c.done:
				return
			case <-ticker.C:
			}
			pod := framework.MemberPod(ns, "g", 0, "1m").Obj()
			pod.Name = fmt.Sprintf("%s-%d", prefix, i)
			pod.Spec.NodeSelector = map[string]string{"muster.dev/nowhere": "true"}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := framework.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			cancel()
			c.mu.Lock()
			if err != nil {
				c.tally.refused = append(c.tally.refused, refusal{at: time.Now(), err: err})
			} else {
				c.tally.created++
				c.tally.createdAt = append(c.tally.createdAt, time.Now())
			}
			c.mu.Unlock()
		}
	})
	return c
}

func (c *creator) stop() tally {
	close(c.done)
	c.wg.Wait()
	return c.tally
}

func (t tally) createdBetween(from, to time.Time) int {
	n := 0
	for _, at := range t.createdAt {
		if at.After(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (t tally) createdSince(from time.Time) bool {
	return len(t.createdAt) > 0 && t.createdAt[len(t.createdAt)-1].After(from)
}

func (t tally) refusedWindow() string {
	if len(t.refused) == 0 {
		return ""
	}
	first, last := t.refused[0], t.refused[len(t.refused)-1]
	return fmt.Sprintf(", from %s to %s (%s); first: %v", first.at.Format("15:04:05.000"), last.at.Format("15:04:05.000"),
		last.at.Sub(first.at).Round(time.Millisecond), first.err)
}

// leads reports whether the replica holds the reconcilers' lease, from its
// leader_election_master_status metric.
func leads(program string) (bool, error) {
	addr := flagOf(program, "--metrics-bind-address=")
	if addr == "" {
		return false, fmt.Errorf("%s has no metrics address", program)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	return strings.Contains(string(body), `leader_election_master_status{name="muster-controller"} 1`), nil
}

func flagOf(program, prefix string) string {
	for _, p := range framework.Cluster().Processes {
		if p.Name != program || !p.Running() {
			continue
		}
		for _, arg := range p.Args {
			if value, ok := strings.CutPrefix(arg, prefix); ok {
				return value
			}
		}
	}
	return ""
}

func waitForLeader(t *testing.T, replicas []string) string {
	return framework.Eventually(t, "a replica holding the lease", func(context.Context) (string, error) {
		for _, r := range replicas {
			if ok, _ := leads(r); ok {
				return r, nil
			}
		}
		return "", fmt.Errorf("neither of %v leads", replicas)
	})
}

// leaseHolder is the identity holding the reconcilers' lease.
func leaseHolder(t *testing.T) string {
	lease, err := framework.Client.CoordinationV1().Leases(manifests.SystemNamespace).Get(context.Background(), "muster-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the reconcilers' lease: %v", err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// waitForNewHolder waits until a replica other than old holds the lease,
// and returns the time since the leader stopped.
func waitForNewHolder(t *testing.T, old string, stopped time.Time) time.Duration {
	var took time.Duration
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		lease, err := framework.Client.CoordinationV1().Leases(manifests.SystemNamespace).Get(ctx, "muster-controller", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		took = time.Since(stopped)
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder != "" && holder != old, nil
	})
	if err != nil {
		t.Fatalf("waiting for a replica other than %s to hold the lease: %v", old, err)
	}
	return took
}
